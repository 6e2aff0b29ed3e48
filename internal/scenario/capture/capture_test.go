package capture

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"miotool/internal/conv"
	"miotool/internal/dnn/target/targettest"
	"miotool/internal/hip"
	"miotool/internal/scenario"
	"miotool/internal/streams"
)

// findProblem makes the naive twin overrun its deadline by a wide factor
// while the tiled twin stays quick.
var findProblem = conv.Problem{N: 1, C: 32, H: 48, W: 48, K: 32, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}

var captureProblem = conv.Problem{N: 1, C: 8, H: 12, W: 12, K: 8, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}

func newDevice(t *testing.T, d hip.Dialect) hip.Device { return targettest.SimDevice(t, d) }

func captureOpts() Options {
	return Options{
		FindProblem:     findProblem,
		CaptureProblem:  captureProblem,
		NaiveTimeoutPct: 50, // naive is always slower than half the tiled time: a robust timeout
		Samples:         2,
		MaxDraining:     2,
		Seed:            3,
	}
}

// TestCaptureAfterATimedOutNaiveEvaluation is the end-to-end regression of
// #12121: lazy reclaim breaks a global and a thread-local capture on the
// capturing thread with 901; guarded and worker keep it valid.
func TestCaptureAfterATimedOutNaiveEvaluation(t *testing.T) {
	for _, dialect := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
		dev := newDevice(t, dialect)
		for _, tt := range []struct {
			policy streams.Policy
			mode   hip.CaptureMode
			v      scenario.Variant
			want   scenario.Outcome
		}{
			{streams.Lazy, hip.CaptureModeGlobal, scenario.SameThread, scenario.Fail},
			{streams.Lazy, hip.CaptureModeThreadLocal, scenario.SameThread, scenario.Fail},
			{streams.Lazy, hip.CaptureModeRelaxed, scenario.SameThread, scenario.Pass},
			{streams.Lazy, hip.CaptureModeGlobal, scenario.OtherThread, scenario.Fail},
			{streams.Lazy, hip.CaptureModeThreadLocal, scenario.OtherThread, scenario.Pass},
			{streams.Guarded, hip.CaptureModeGlobal, scenario.SameThread, scenario.Pass},
			{streams.Guarded, hip.CaptureModeGlobal, scenario.OtherThread, scenario.Pass},
			{streams.Worker, hip.CaptureModeGlobal, scenario.SameThread, scenario.Pass},
			{streams.Worker, hip.CaptureModeThreadLocal, scenario.SameThread, scenario.Pass},
			{streams.Worker, hip.CaptureModeGlobal, scenario.OtherThread, scenario.Pass},
		} {
			name := string(dialect) + "/" + string(tt.policy) + "/" + tt.mode.String() + "/" + string(tt.v)
			t.Run(name, func(t *testing.T) {
				opts := captureOpts()
				opts.Policies, opts.Modes, opts.Variants = []streams.Policy{tt.policy}, []hip.CaptureMode{tt.mode}, []scenario.Variant{tt.v}
				cases, err := Run(context.Background(), dev, opts)
				if err != nil {
					t.Fatal(err)
				}
				c := cases[0]
				if !c.NaiveAbandoned || c.DrainingAtCapture == 0 {
					t.Fatalf("precondition: find left no abandoned evaluation: %+v", c)
				}
				if c.Measured != tt.want || c.Expected != tt.want {
					t.Fatalf("measured %s, expected %s, want %s: %s", c.Measured, c.Expected, tt.want, c.Detail)
				}
				if tt.want == scenario.Fail {
					if c.EndCapture != hip.ErrStreamCaptureInvalidated {
						t.Fatalf("end capture %v, want 901: %s", c.EndCapture, c.Detail)
					}
					if !strings.Contains(c.Detail, "(900)") {
						t.Errorf("the refused launch-path query is not named: %s", c.Detail)
					}
				} else if !c.OutputOK {
					t.Fatalf("graph output wrong: %s", c.Detail)
				}
			})
		}
	}
}

func TestCaptureWithTheTimeoutOffAbandonsNothing(t *testing.T) {
	dev := newDevice(t, hip.DialectHIP)
	opts := captureOpts()
	opts.NaiveTimeoutPct = 0
	opts.Policies, opts.Modes, opts.Variants = []streams.Policy{streams.Lazy}, []hip.CaptureMode{hip.CaptureModeGlobal, hip.CaptureModeRelaxed}, []scenario.Variant{scenario.SameThread}
	var progress []string
	opts.Progress = func(done, total int) { progress = append(progress, fmt.Sprintf("%d/%d", done, total)) }
	cases, err := Run(context.Background(), dev, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c := cases[0]; c.Measured != scenario.Inconclusive || c.NaiveAbandoned {
		t.Fatalf("with MIOPEN_NAIVE_TIMEOUT=0 nothing is abandoned, so the case cannot show the bug: %+v", c)
	}
	if got := strings.Join(progress, " "); got != "0/2 1/2 2/2" {
		t.Fatalf("progress %q", got)
	}
}

func TestReplayOnlyWorkloadReleasesScratchOnlyUnderWorker(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	opts := ReplayOptions{
		Options:         captureOpts(),
		Mode:            hip.CaptureModeGlobal,
		Replays:         5,
		ReleaseDeadline: 20 * time.Second,
	}
	for _, tt := range []struct {
		policy   streams.Policy
		deadline time.Duration
		want     scenario.Outcome
	}{
		{streams.Worker, 30 * time.Second, scenario.Pass},
		// Guarded never releases in a replay-only workload; a short
		// deadline keeps the test quick, the naive twin runs far longer.
		{streams.Guarded, 300 * time.Millisecond, scenario.Fail},
		{streams.Lazy, 300 * time.Millisecond, scenario.Fail},
	} {
		t.Run(string(tt.policy), func(t *testing.T) {
			o := opts
			o.Policies, o.ReleaseDeadline = []streams.Policy{tt.policy}, tt.deadline
			cases, err := RunReplay(context.Background(), dev, o)
			if err != nil {
				t.Fatal(err)
			}
			c := cases[0]
			if c.Measured != tt.want || c.Expected != tt.want {
				t.Fatalf("measured %s expected %s want %s: %s (%+v)", c.Measured, c.Expected, tt.want, c.Detail, c.Counters)
			}
			if c.PinnedAfterFind == 0 {
				t.Fatal("find pinned no scratch")
			}
			switch tt.policy {
			case streams.Worker:
				if c.PinnedAtEnd != 0 || c.Counters.ReclaimedByCallback == 0 || !c.ReplaysOK {
					t.Fatalf("worker: %+v", c)
				}
			case streams.Guarded:
				if c.PinnedAtEnd == 0 || !c.ReplaysOK {
					t.Fatalf("guarded must keep the scratch pinned while only replaying: %+v", c)
				}
			case streams.Lazy:
				if c.EndCapture != hip.ErrStreamCaptureInvalidated {
					t.Fatalf("lazy loses its global capture: %+v", c)
				}
			}
		})
	}
}

func TestExpectations(t *testing.T) {
	n := 0
	for _, p := range streams.Policies {
		for _, m := range hip.CaptureModes {
			for _, v := range scenario.Variants {
				if Expected(p, m, v) == scenario.Fail {
					n++
					if p != streams.Lazy {
						t.Errorf("%s/%s/%s expected to fail", p, m, v)
					}
				}
			}
		}
	}
	if n != 3 {
		t.Errorf("lazy should fail in 3 combinations (global both variants, thread-local same thread), got %d", n)
	}
}
