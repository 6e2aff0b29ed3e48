package sim_test

import (
	"testing"

	"miotool/internal/hip"
)

// BenchmarkLaunchSynchronize: one empty kernel launched and waited for.
func BenchmarkLaunchSynchronize(b *testing.B) {
	d := newDevice(b, "", 0)
	k := loadKernels(b, d, 0)
	s := must1[hip.Stream](b)(d.StreamCreate(0))
	for b.Loop() {
		if err := d.LaunchKernel(k.tiny, hip.D1(1), hip.D1(1), 0, s); err != nil {
			b.Fatal(err)
		}
		if err := d.StreamSynchronize(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHostFuncRoundTrip: from enqueue until the host function has run
// on the callback goroutine and signalled back.
func BenchmarkHostFuncRoundTrip(b *testing.B) {
	d := newDevice(b, "", 0)
	s := must1[hip.Stream](b)(d.StreamCreate(0))
	done := make(chan struct{}, 1)
	signal := func() { done <- struct{}{} }
	for b.Loop() {
		if err := d.LaunchHostFunc(s, signal); err != nil {
			b.Fatal(err)
		}
		<-done
	}
}

// BenchmarkStreamQueryIdle: the cost of one poll of an idle stream.
func BenchmarkStreamQueryIdle(b *testing.B) {
	d := newDevice(b, "", 0)
	s := must1[hip.Stream](b)(d.StreamCreate(0))
	for b.Loop() {
		if err := d.StreamQuery(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGraphLaunch: a replay of a five-kernel graph, waited for.
func BenchmarkGraphLaunch(b *testing.B) {
	d := newDevice(b, "", 0)
	k := loadKernels(b, d, 0)
	capS := must1[hip.Stream](b)(d.StreamCreate(0))
	s := must1[hip.Stream](b)(d.StreamCreate(0))
	var ge hip.GraphExec
	th := startThread(b)
	th.do(b, "capture", func() {
		must(b, d.StreamBeginCapture(capS, hip.CaptureModeGlobal))
		for range 5 {
			must(b, d.LaunchKernel(k.tiny, hip.D1(1), hip.D1(1), 0, capS))
		}
		g := must1[hip.Graph](b)(d.StreamEndCapture(capS))
		ge = must1[hip.GraphExec](b)(d.GraphInstantiate(g))
	})
	for b.Loop() {
		if err := d.GraphLaunch(ge, s); err != nil {
			b.Fatal(err)
		}
		if err := d.StreamSynchronize(s); err != nil {
			b.Fatal(err)
		}
	}
}
