package stress

import (
	"context"
	"testing"
	"time"

	"miotool/internal/dnn/target"
	"miotool/internal/dnn/target/targettest"
	"miotool/internal/scenario"
)

// The GPU test runs the cudnn target on a real NVIDIA GPU: the PyTorch
// stress shape once. It skips where there is no CUDA device or no cuDNN 9.

func TestGPUCUDNNTargetStress(t *testing.T) {
	dev := targettest.OpenCUDNNDevice(t)
	opts := DefaultTargetOptions(target.CUDNN)
	opts.Trials = 1
	opts.Timeout = 2 * time.Minute
	opts.Log = t.Logf
	res, err := RunTarget(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("library %s, %s algorithm selection: %s in %v", res.Library, res.Options.Select, res.Measured, res.Elapsed.Round(time.Millisecond))
	for _, th := range res.Threads {
		t.Logf("thread %d: sum %.0f (want %.0f), %d elements not 1, %v, algorithms %v", th.Thread+1, th.Sum, th.Expected, th.Wrong, th.Elapsed.Round(time.Millisecond), th.Algos)
	}
	if res.Measured != scenario.Pass {
		t.Fatalf("stress: %s", res.Detail)
	}
}
