package bench

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"miotool/configs"
	"miotool/internal/conv"
	"miotool/internal/finder"
	"miotool/internal/handle"
	"miotool/internal/hip"
)

// convProblems are the named problems BenchmarkConv times by default;
// MIOTOOL_BENCH_PROBLEMS (comma-separated names) replaces the list.
var convProblems = []string{"resnet50-conv2", "resnet50-conv4", "pointwise-256-64", "resnet50-stem", "resnext-grouped"}

// BenchmarkConv times every applicable non-naive builtin solver on each
// problem with events on the device: one op is one convolution, reported
// as ms/conv and TFLOP/s. Its fp32 figures are what scripts/gpu-check.sh
// compares with cuDNN's best algorithm on the same problems.
func BenchmarkConv(b *testing.B) {
	names := convProblems
	if s := os.Getenv("MIOTOOL_BENCH_PROBLEMS"); s != "" {
		names = strings.Split(s, ",")
	}
	for _, name := range names {
		np, err := configs.Problem("", name)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range conv.Solvers() {
			if s.IsNaive() || !s.IsApplicable(np.Problem) {
				continue
			}
			b.Run(fmt.Sprintf("%s/%s", name, s.Name), func(b *testing.B) {
				d := device(b)
				if d.Props().Backend == "sim" && np.Problem.Flops() > 2e9 {
					b.Skip("too large for the simulator")
				}
				timeSolver(b, d, np.Problem, s)
			})
		}
	}
}

func timeSolver(b *testing.B, d hip.Device, p conv.Problem, s *conv.Solver) {
	ts, err := finder.NewTensors(d, p, []*conv.Solver{s}, 1)
	must(b, err)
	defer ts.Free()
	h, err := handle.New(d, handle.Options{})
	must(b, err)
	defer h.Close()
	launches := s.Plan(p, conv.Buffers{X: ts.X, W: ts.W, Y: ts.Y, Workspace: ts.Workspace})
	fns := make([]hip.Function, len(launches))
	for i, l := range launches {
		fns[i], err = h.Function(conv.Source(), l.Kernel)
		must(b, err)
	}
	start, err := d.EventCreate(hip.EventDefault)
	must(b, err)
	stop, err := d.EventCreate(hip.EventDefault)
	must(b, err)
	defer d.EventDestroy(start)
	defer d.EventDestroy(stop)
	run := func() {
		for i, l := range launches {
			must(b, h.Run(fns[i], l.Grid, l.Block, l.SharedMem, l.Args...))
		}
	}
	run() // warm-up
	must(b, d.StreamSynchronize(h.Stream()))
	var times []float64
	for b.Loop() {
		must(b, d.EventRecord(start, h.Stream()))
		run()
		must(b, d.EventRecord(stop, h.Stream()))
		must(b, d.EventSynchronize(stop))
		ms, err := d.EventElapsedTime(start, stop)
		must(b, err)
		times = append(times, float64(ms))
	}
	sort.Float64s(times)
	med := times[len(times)/2]
	b.ReportMetric(med, "ms/conv")
	b.ReportMetric(float64(p.Flops())/(med*1e-3)/1e12, "TFLOP/s")
}
