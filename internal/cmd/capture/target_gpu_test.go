package capture

import (
	"bytes"
	"context"
	"testing"
	"time"

	"miotool/internal/conv"
	"miotool/internal/dnn/target"
	"miotool/internal/dnn/target/targettest"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/scenario"
	capturescen "miotool/internal/scenario/capture"
)

// The GPU test runs the cudnn target on a real NVIDIA GPU: the capture
// scenario in every mode and variant. It skips where there is no CUDA
// device or no cuDNN 9.

func TestGPUCUDNNTargetCapture(t *testing.T) {
	dev := targettest.OpenCUDNNDevice(t)
	p := conv.Problem{N: 8, C: 64, H: 56, W: 56, K: 64, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	start := time.Now()
	cases, err := capturescen.RunTarget(context.Background(), dev, capturescen.TargetOptions{
		Target: target.CUDNN, Modes: hip.CaptureModes, Variants: scenario.Variants, Problem: p, Seed: 1, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	r := report.New("capture", "miotool capture --target=cudnn --mode=all --variant=all", start)
	for _, n := range target.NotesFor(nil, dev, target.CUDNN) {
		r.Note("%s", n)
	}
	fillTargetCases(r, cases, dev.Dialect(), nil, time.Now())
	logResult(t, r)
	for _, c := range cases {
		t.Logf("%s/%s: %s, chosen %s, max |err| %.3g, %v", c.Mode, c.Variant, c.Measured, c.Chosen, c.MaxAbsErr, c.Elapsed.Round(time.Millisecond))
		if c.Measured != scenario.Pass {
			t.Errorf("%s/%s: %s %s %s", c.Mode, c.Variant, c.EndCapture.Name(hip.DialectCUDA), c.FirstRefusal, c.Detail)
		}
	}
}

// logResult logs r as text.
func logResult(t *testing.T, r *report.Result) {
	t.Helper()
	var buf bytes.Buffer
	if err := report.WriteText(&buf, r, report.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
}
