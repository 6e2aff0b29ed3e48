package stress

import (
	"context"
	"testing"
	"time"

	"miotool/internal/dnn/target"
	"miotool/internal/dnn/target/targettest"
	"miotool/internal/report"
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
	start := time.Now()
	res, err := RunTarget(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := report.New("stress-threads", "miotool stress-threads --target=cudnn --trials 1", start)
	FillTarget(r, res, time.Now())
	targettest.LogResult(t, r)
	for _, th := range res.Threads {
		t.Logf("thread %d: sum %.0f (want %.0f), %d elements not 1, %v, algorithms %s", th.Thread+1, th.Sum, th.Expected, th.Wrong, th.Elapsed.Round(time.Millisecond), countList(th.Algos))
	}
	if res.Measured != scenario.Pass {
		t.Fatalf("stress: %s", res.Detail)
	}
}
