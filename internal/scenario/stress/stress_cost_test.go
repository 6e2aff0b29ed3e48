package stress

import (
	"context"
	"syscall"
	"testing"
	"time"

	"miotool/internal/aiheur/builtin"
	"miotool/internal/aiheur/cache"
	"miotool/internal/hip"
	"miotool/internal/hip/cuda"
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

// BenchmarkStressRun is one whole run as a fresh child process does it:
// open the device, then RunHere. "defaults" is the PyTorch test's (2
// threads x 1000 iterations x 3 trials on 2048x2048), "fixed" one
// iteration of one trial (the device, buffers, kernels and model: what a
// run costs before its iterations). cpu-s/run is the CPU time of all
// cores per run, the simulator's figure; ns/op is the wall time, the
// GPU's. The cuda runs skip where there is no CUDA device; they leave
// out the process start and the driver's initialization, which a fresh
// process adds (miotool --backend cuda doctor times that floor).
func BenchmarkStressRun(b *testing.B) {
	for _, backend := range []struct {
		name string
		open func() (hip.Device, error)
	}{
		{"sim", func() (hip.Device, error) { return sim.New(hip.OpenOptions{Dialect: hip.DialectCUDA}) }},
		{"cuda", func() (hip.Device, error) { return cuda.Open(hip.OpenOptions{}) }},
	} {
		for _, run := range []struct {
			name                   string
			threads, iters, trials int
		}{
			{"defaults", DefaultThreads, DefaultIters, DefaultTrials},
			{"fixed", DefaultThreads, 1, 1},
		} {
			b.Run(backend.name+"/"+run.name, func(b *testing.B) {
				benchStressRun(b, backend.open, Options{Threads: run.threads, Iters: run.iters, Trials: run.trials,
					Policy: cache.Locked, Models: builtin.FS})
			})
		}
	}
}

func benchStressRun(b *testing.B, open func() (hip.Device, error), o Options) {
	if dev, err := open(); err != nil {
		b.Skipf("no device: %v", err)
	} else {
		_ = dev.Close()
	}
	cpu := time.Duration(0)
	for b.Loop() {
		before := cpuTime(b)
		dev, err := open()
		if err != nil {
			b.Fatal(err)
		}
		run, err := RunHere(context.Background(), dev, o)
		_ = dev.Close()
		cpu += cpuTime(b) - before
		if err != nil {
			b.Fatal(err)
		}
		if !run.OK() {
			b.Fatalf("wrong result: %s", run.WrongDetail)
		}
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/run")
}
