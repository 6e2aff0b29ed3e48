package repro

import (
	"bytes"
	"context"
	"testing"
	"time"

	"miotool/internal/conv"
	"miotool/internal/hip"
	"miotool/internal/hip/cuda"
	"miotool/internal/report"
)

// The GPU tests run the cudnn target on a real NVIDIA GPU: the capture
// scenario in every mode and variant, and the PyTorch stress shape once.
// They skip where there is no CUDA device or no cuDNN 9.

func openCUDNNTarget(t *testing.T) hip.Device {
	t.Helper()
	dev, err := cuda.Open(hip.OpenOptions{})
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	if err := TargetAvailable("cudnn"); err != nil {
		t.Skipf("%v", err)
	}
	return dev
}

func logResult(t *testing.T, r *report.Result) {
	t.Helper()
	var buf bytes.Buffer
	if err := report.WriteText(&buf, r, report.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
}

func TestGPUCUDNNTargetCapture(t *testing.T) {
	dev := openCUDNNTarget(t)
	p := conv.Problem{N: 8, C: 64, H: 56, W: 56, K: 64, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	start := time.Now()
	cases, err := RunTargetCaptureWith(context.Background(), dev, TargetCaptureOptions{
		Target: TargetCUDNN, Modes: hip.CaptureModes, Variants: Variants, Problem: p, Seed: 1, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	r := report.New("capture", "miotool capture --target=cudnn --mode=all --variant=all", start)
	for _, n := range TargetNotes(TargetCUDNN, dev) {
		r.Note("%s", n)
	}
	FillTargetCapture(r, cases, dev.Dialect(), time.Now())
	logResult(t, r)
	for _, c := range cases {
		t.Logf("%s/%s: %s, chosen %s, max |err| %.3g, %v", c.Mode, c.Variant, c.Measured, c.Chosen, c.MaxAbsErr, c.Elapsed.Round(time.Millisecond))
		if c.Measured != Pass {
			t.Errorf("%s/%s: %s %s %s", c.Mode, c.Variant, c.EndCapture.Name(hip.DialectCUDA), c.FirstRefusal, c.Detail)
		}
	}
}

func TestGPUCUDNNTargetStress(t *testing.T) {
	dev := openCUDNNTarget(t)
	opts := DefaultTargetStress(TargetCUDNN)
	opts.Trials = 1
	opts.Timeout = 2 * time.Minute
	opts.Log = t.Logf
	start := time.Now()
	res, err := RunTargetStress(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := report.New("stress-threads", "miotool stress-threads --target=cudnn --trials 1", start)
	FillTargetStress(r, res, time.Now())
	logResult(t, r)
	for _, th := range res.Threads {
		t.Logf("thread %d: sum %.0f (want %.0f), %d elements not 1, %v, algorithms %s", th.Thread+1, th.Sum, th.Expected, th.Wrong, th.Elapsed.Round(time.Millisecond), countList(th.Algos))
	}
	if res.Measured != Pass {
		t.Fatalf("stress: %s", res.Detail)
	}
}
