package capture

import (
	"context"
	"strings"
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

// targetProblem is the captured convolution of the library target tests.
var targetProblem = conv.Problem{N: 1, C: 8, H: 12, W: 12, K: 8, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}

// targetCases runs the capture scenario on a fake library in every mode
// and variant; poll, when set, makes the library poll another stream from
// its launch path.
func targetCases(t *testing.T, d hip.Dialect, poll bool) []capturescen.TargetCase {
	t.Helper()
	dev := targettest.SimDevice(t, d)
	lib := targettest.NewFakeLib(t, dev)
	if poll {
		s, err := dev.StreamCreate(hip.StreamNonBlocking)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dev.StreamDestroy(s) })
		lib.Poll = s
	}
	cases, err := capturescen.RunTarget(context.Background(), dev, capturescen.TargetOptions{Open: targettest.Opener(lib, nil),
		Target: target.MIOpen, Modes: hip.CaptureModes, Variants: scenario.Variants, Problem: targetProblem, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// A library that keeps every capture valid passes, with its find's ranking
// and one row per case.
func TestTargetCasesOfACorrectLibraryPass(t *testing.T) {
	for _, d := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
		t.Run(string(d), func(t *testing.T) {
			cases := targetCases(t, d, false)
			r := report.New("capture", "miotool capture --target=miopen --mode=all", time.Time{})
			fillTargetCases(r, cases, d, nil, time.Time{})
			if r.Verdict != report.Pass || r.Detail != "Passes with --target=miopen" || r.ChecklistStatus() != "Passed (6/6): Passes with --target=miopen" {
				t.Fatalf("verdict %s status %q: %s", r.Verdict, r.ChecklistStatus(), r.Summary)
			}
			if len(r.Tables) != 2 || len(r.Tables[0].Rows) != len(conv.Solvers()) || len(r.Tables[1].Rows) != 6 || !strings.Contains(strings.Join(r.Notes, "\n"), "fakedeep 1.0") {
				t.Fatalf("tables %d, notes %q", len(r.Tables), r.Notes)
			}
		})
	}
}

// A library that breaks captures fails where the runtime's rules say so,
// and the status names the cases each way.
func TestTargetCasesOfALibraryThatBreaksCapturesFail(t *testing.T) {
	for _, d := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
		t.Run(string(d), func(t *testing.T) {
			cases := targetCases(t, d, true)
			r := report.New("capture", "miotool capture --target=miopen", time.Time{})
			fillTargetCases(r, cases, d, nil, time.Time{})
			want := "Fails with --target=miopen (global/same-thread, thread-local/same-thread, global/other-thread), passes (relaxed/same-thread, thread-local/other-thread, relaxed/other-thread)"
			if r.Verdict != report.Fail || r.Detail != want || r.ChecklistStatus() != "Failed (3/6 failed): "+want {
				t.Fatalf("verdict %s status %q", r.Verdict, r.ChecklistStatus())
			}
			if !strings.Contains(r.Summary, "global/same-thread: "+hip.ErrStreamCaptureInvalidated.Name(d)) {
				t.Fatalf("summary %q", r.Summary)
			}
		})
	}
}

// A library that fails every case alike is summarised once, naming the
// cases; different reasons stay apart, in the order first seen.
func TestFillTargetCaptureGroupsIdenticalFailures(t *testing.T) {
	wrong := "graph output: verification FAILED: RMS 4.1e-07"
	mk := func(mode hip.CaptureMode, v scenario.Variant, end hip.Code, detail string) capturescen.TargetCase {
		c := capturescen.TargetCase{Target: target.CUDNN, Library: "libcudnn 9"}
		c.Mode, c.Variant, c.Expected, c.Measured, c.EndCapture, c.Detail = mode, v, scenario.Pass, scenario.Fail, end, detail
		return c
	}
	for _, tt := range []struct {
		name  string
		cases []capturescen.TargetCase
		want  string
	}{
		{"alike", []capturescen.TargetCase{
			mk(hip.CaptureModeGlobal, scenario.SameThread, hip.Success, wrong),
			mk(hip.CaptureModeThreadLocal, scenario.SameThread, hip.Success, wrong),
			mk(hip.CaptureModeRelaxed, scenario.SameThread, hip.Success, wrong),
		}, "global/same-thread, thread-local/same-thread, relaxed/same-thread: CUDA_SUCCESS (0) " + wrong},
		{"two reasons", []capturescen.TargetCase{
			mk(hip.CaptureModeGlobal, scenario.SameThread, hip.ErrStreamCaptureInvalidated, "query refused"),
			mk(hip.CaptureModeThreadLocal, scenario.SameThread, hip.Success, wrong),
			mk(hip.CaptureModeRelaxed, scenario.SameThread, hip.ErrStreamCaptureInvalidated, "query refused"),
		}, "global/same-thread, relaxed/same-thread: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901) query refused; thread-local/same-thread: CUDA_SUCCESS (0) " + wrong},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := report.New("capture", "miotool capture --target=cudnn", time.Time{})
			fillTargetCases(r, tt.cases, hip.DialectCUDA, nil, time.Time{})
			if r.Verdict != report.Fail || r.Summary != tt.want {
				t.Fatalf("verdict %s summary\n %q\nwant\n %q", r.Verdict, r.Summary, tt.want)
			}
		})
	}
}
