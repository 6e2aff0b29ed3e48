package capture

import (
	"context"
	"errors"
	"strings"
	"testing"

	"miotool/internal/conv"
	"miotool/internal/dnn/cudnn"
	"miotool/internal/dnn/miopen"
	"miotool/internal/dnn/target"
	"miotool/internal/dnn/target/targettest"
	"miotool/internal/hip"
	"miotool/internal/scenario"
)

func TestTargetCaptureOfACorrectLibraryPassesInEveryMode(t *testing.T) {
	for _, d := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
		t.Run(string(d), func(t *testing.T) {
			dev := newDevice(t, d)
			lib := targettest.NewFakeLib(t, dev)
			open := targettest.Opener(lib, nil)
			cases, err := RunTarget(context.Background(), dev, TargetOptions{Open: open,
				Target: target.MIOpen, Modes: hip.CaptureModes, Variants: scenario.Variants, Problem: captureProblem, Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			if len(cases) != 6 {
				t.Fatalf("%d cases, want 6", len(cases))
			}
			for _, c := range cases {
				if c.Measured != scenario.Pass || c.Expected != scenario.Pass || c.EndCapture != hip.Success || !c.OutputOK {
					t.Errorf("%s/%s: %+v", c.Mode, c.Variant, c)
				}
				if c.Chosen.Name != conv.SolverImplicitGemm || len(c.Found) != len(conv.Solvers()) || c.Library != lib.Describe() || c.Target != target.MIOpen {
					t.Errorf("%s/%s: chosen %s, found %v, library %q", c.Mode, c.Variant, c.Chosen, c.Found, c.Library)
				}
				if c.StatusAfterLaunch != hip.CaptureStatusActive || c.MaxAbsErr > 1e-3 {
					t.Errorf("%s/%s: status after launch %s, max err %g", c.Mode, c.Variant, c.StatusAfterLaunch, c.MaxAbsErr)
				}
			}
			if lib.Open.Load() != 0 || !lib.Closed.Load() {
				t.Fatalf("%d sessions left open, library closed %v", lib.Open.Load(), lib.Closed.Load())
			}
			// Same-thread cases bind one thread, other-thread cases two.
			if got := lib.Binds.Load(); got != 9 {
				t.Fatalf("threads bound %d, want 9", got)
			}

		})
	}
}

// A library that polls another stream from its launch path breaks a
// capture where the runtime's rules say so, and the scenario measures it:
// the same cases the builtin lazy policy fails.
func TestTargetCaptureMeasuresALibraryThatBreaksCaptures(t *testing.T) {
	for _, d := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
		t.Run(string(d), func(t *testing.T) {
			dev := newDevice(t, d)
			lib := targettest.NewFakeLib(t, dev)
			poll, err := dev.StreamCreate(hip.StreamNonBlocking)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = dev.StreamDestroy(poll) })
			lib.Poll = poll
			open := targettest.Opener(lib, nil)
			cases, err := RunTarget(context.Background(), dev, TargetOptions{Open: open,
				Target: target.MIOpen, Modes: hip.CaptureModes, Variants: scenario.Variants, Problem: captureProblem, Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				want := Expected("lazy", c.Mode, c.Variant)
				if c.Measured != want {
					t.Errorf("%s/%s: measured %s, want %s: %s", c.Mode, c.Variant, c.Measured, want, c.Detail)
					continue
				}
				if want == scenario.Pass {
					if !c.OutputOK {
						t.Errorf("%s/%s: output wrong: %s", c.Mode, c.Variant, c.Detail)
					}
					continue
				}
				if c.EndCapture != hip.ErrStreamCaptureInvalidated || c.Agrees() {
					t.Errorf("%s/%s: end capture %v, agrees %v", c.Mode, c.Variant, c.EndCapture, c.Agrees())
				}
				if c.Variant == scenario.SameThread && (c.FirstRefusal == "" || c.StatusAfterLaunch != hip.CaptureStatusInvalidated) {
					t.Errorf("%s/%s: the failed library call is not recorded: %+v", c.Mode, c.Variant, c)
				}
				if c.Variant == scenario.OtherThread && !strings.Contains(c.Detail, "end capture") {
					t.Errorf("%s/%s: detail %q", c.Mode, c.Variant, c.Detail)
				}
			}
		})
	}
}

func TestTargetCaptureRefusesBadInput(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	open := targettest.Opener(targettest.NewFakeLib(t, dev), nil)
	grouped := captureProblem
	grouped.Groups = 2
	for _, tt := range []struct {
		name string
		opts TargetOptions
		want string
	}{
		{"builtin", TargetOptions{Open: open, Target: target.Builtin, Modes: hip.CaptureModes}, "runs through Run"},
		{"no modes", TargetOptions{Open: open, Target: target.CUDNN, Problem: captureProblem}, "no capture mode"},
		{"groups", TargetOptions{Open: open, Target: target.CUDNN, Modes: hip.CaptureModes, Problem: grouped}, "group_count 1 only"},
	} {
		if _, err := RunTarget(context.Background(), dev, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := RunTarget(context.Background(), dev, TargetOptions{Target: "tensorflow", Modes: hip.CaptureModes}); err == nil || !strings.Contains(err.Error(), `unknown target "tensorflow"`) {
		t.Errorf("unknown target: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunTarget(ctx, dev, TargetOptions{Open: open, Target: target.CUDNN, Modes: hip.CaptureModes, Problem: captureProblem}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestLibraryCheckAcceptsTheDriversRMSCriterion(t *testing.T) {
	p := conv.Problem{N: 1, C: 4, H: 8, W: 8, K: 4, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	want := conv.Reference(p, conv.RandomTensor(p.InputElements(), 1), conv.RandomTensor(p.WeightElements(), 2))
	got := append([]float32(nil), want...)
	if err := libraryCheck(p, got, want); err != nil {
		t.Fatalf("exact output refused: %v", err)
	}
	// One element off by more than the element-wise tolerance, RMS still tiny.
	got[3] += 1e-3
	if conv.Check(p, got, want).OK {
		t.Fatal("the element-wise check should refuse this")
	}
	if err := libraryCheck(p, got, want); err == nil && conv.Check(p, got, want).RMS > conv.DriverRMSTolerance {
		t.Fatal("accepted past the RMS tolerance")
	}
	// Garbage fails both.
	for i := range got {
		got[i] = 0
	}
	if err := libraryCheck(p, got, want); err == nil {
		t.Fatal("zeros accepted")
	}
}

func TestTargetCaptureThroughTheStandInLibraries(t *testing.T) {
	for _, tt := range []struct {
		target    target.Name
		open      func(*testing.T) (*targettest.HostDevice, target.Target)
		chosen    string
		found     []string
		wantNotes string
	}{
		{target.CUDNN, targettest.CUDNNStandIn, "IMPLICIT_PRECOMP_GEMM", []string{"IMPLICIT_PRECOMP_GEMM", "IMPLICIT_GEMM", "WINOGRAD"}, "CUDNN_FMA_MATH"},
		{target.MIOpen, targettest.MIOpenStandIn, "miopenConvolutionFwdAlgoDirect", []string{"miopenConvolutionFwdAlgoDirect", "miopenConvolutionFwdAlgoGEMM"}, "MIOPEN_DEBUG_DISABLE_FIND_DB=1"},
	} {
		t.Run(string(tt.target), func(t *testing.T) {
			dev, lib := tt.open(t)
			open := targettest.Opener(lib, nil)
			cases, err := RunTarget(context.Background(), dev, TargetOptions{Open: open,
				Target: tt.target, Modes: hip.CaptureModes, Variants: scenario.Variants, Problem: targettest.StandInProblem, Seed: 9})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				if c.Measured != scenario.Pass || !c.OutputOK || c.Chosen.Name != tt.chosen {
					t.Fatalf("%s/%s: %+v", c.Mode, c.Variant, c)
				}
				var names []string
				for _, a := range c.Found {
					names = append(names, a.Name)
				}
				if strings.Join(names, " ") != strings.Join(tt.found, " ") {
					t.Fatalf("found %v, want %v", names, tt.found)
				}
				if want := map[target.Name]string{target.CUDNN: cudnn.Soname, target.MIOpen: miopen.Soname}[tt.target]; !strings.HasSuffix(c.Library, want+")") {
					t.Fatalf("library %q", c.Library)
				}
			}
			if n := dev.Allocations(); n != 0 {
				t.Fatalf("%d allocations left", n)
			}
			if notes := strings.Join(lib.Notes(), " "); !strings.Contains(notes, tt.wantNotes) {
				t.Fatalf("notes %q", notes)
			}
		})
	}
}

// cuDNN's find lists an algorithm that cannot run; it is shown, not chosen.
func TestCUDNNTargetKeepsFailedFindEntries(t *testing.T) {
	dev, lib := targettest.CUDNNStandIn(t)
	open := targettest.Opener(lib, nil)
	cases, err := RunTarget(context.Background(), dev, TargetOptions{Open: open,
		Target: target.CUDNN, Modes: []hip.CaptureMode{hip.CaptureModeGlobal}, Problem: targettest.StandInProblem})
	if err != nil {
		t.Fatal(err)
	}
	w := cases[0].Found[2]
	if w.OK || w.Note != "CUDNN_STATUS_NOT_SUPPORTED" || cases[0].Found[0].Note != "deterministic, CUDNN_FMA_MATH" || cases[0].Found[0].WorkspaceBytes != 4096 {
		t.Fatalf("find entries %+v", cases[0].Found)
	}
	if got := target.AlgoList(cases[0].Found); got != "IMPLICIT_PRECOMP_GEMM 0.25 ms, IMPLICIT_GEMM 0.5 ms, WINOGRAD (CUDNN_STATUS_NOT_SUPPORTED)" {
		t.Fatalf("algoList = %q", got)
	}
}
