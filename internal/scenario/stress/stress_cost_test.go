package stress

import (
	"context"
	"syscall"
	"testing"
	"time"

	"miotool/internal/aiheur/builtin"
	"miotool/internal/aiheur/cache"
	"miotool/internal/hip"
	"miotool/internal/hip/sim"
)

// cpuTime is the process's user plus system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStressRunSim is one whole run of the PyTorch test's defaults
// (2 threads x 1000 iterations x 3 trials on 2048x2048) on a new simulated
// device, as a fresh child process does it; cpu-s/run is the CPU time it
// costs (all cores), the figure the simulator's run time is bounded by.
func BenchmarkStressRunSim(b *testing.B) {
	cpu := time.Duration(0)
	for b.Loop() {
		dev, err := sim.New(hip.OpenOptions{Dialect: hip.DialectCUDA})
		if err != nil {
			b.Fatal(err)
		}
		before := cpuTime(b)
		run, err := RunHere(context.Background(), dev, Options{Threads: DefaultThreads, Iters: DefaultIters,
			Trials: DefaultTrials, Policy: cache.Locked, Models: builtin.FS})
		cpu += cpuTime(b) - before
		_ = dev.Close()
		if err != nil {
			b.Fatal(err)
		}
		if !run.OK() {
			b.Fatalf("wrong result: %+v", run)
		}
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/run")
}
