package conv

import (
	"testing"
)

// benchProblem is a mid-size ResNet layer: N=1 C=64 56x56 K=64 3x3 pad 1.
var benchProblem = Problem{N: 1, C: 64, H: 56, W: 56, K: 64, R: 3, S: 3, PadH: 1, PadW: 1,
	StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}

func benchPlan(b *testing.B, p Problem, plan func(Buffers) []Launch) {
	mem := newSliceMemory()
	bufs := Buffers{
		X: mem.add(RandomTensor(p.InputElements(), 1)),
		W: mem.add(RandomTensor(p.WeightElements(), 2)),
		Y: mem.add(make([]float32, p.OutputElements())),
	}
	launches := plan(bufs)
	b.SetBytes(p.BytesRead() + p.BytesWritten())
	b.ResetTimer()
	for b.Loop() {
		if err := RunTwins(mem, launches); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(p.Flops())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkNaiveTwin(b *testing.B) {
	s, _ := SolverByName(SolverNaive)
	benchPlan(b, benchProblem, func(bufs Buffers) []Launch { return s.Plan(benchProblem, bufs) })
}

func BenchmarkTiledTwin(b *testing.B) {
	s, _ := SolverByName(SolverImplicitGemm)
	benchPlan(b, benchProblem, func(bufs Buffers) []Launch { return s.Plan(benchProblem, bufs) })
}

func BenchmarkGemm1x1Twin(b *testing.B) {
	p := benchProblem
	p.R, p.S, p.PadH, p.PadW, p.C, p.K = 1, 1, 0, 0, 256, 256
	s, _ := SolverByName(SolverGemm1x1)
	benchPlan(b, p, func(bufs Buffers) []Launch { return s.Plan(p, bufs) })
}

func BenchmarkReference(b *testing.B) {
	p := benchProblem
	x := RandomTensor(p.InputElements(), 1)
	w := RandomTensor(p.WeightElements(), 2)
	for b.Loop() {
		if Reference(p, x, w) == nil {
			b.Fatal("no result")
		}
	}
	b.ReportMetric(float64(p.Flops())*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
