package capture

import (
	"context"
	"errors"
	"testing"

	"miotool/internal/finder"
	"miotool/internal/handle"
	"miotool/internal/hip"
	"miotool/internal/scenario"
	"miotool/internal/streams"
)

// An interruption between two cases ends the run there: the finished
// cases come back, with an error wrapping ErrInterrupted, and the cases
// after it are not run. The interruption is the progress callback's own,
// after the first case, so nothing waits on time.
func TestRunStopsBetweenCasesWhenInterrupted(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stop := errors.New("interrupted by the test")
	o := captureOpts()
	o.Modes, o.Policies, o.Variants, o.Repeat = []hip.CaptureMode{hip.CaptureModeGlobal}, []streams.Policy{streams.Worker}, []scenario.Variant{scenario.SameThread}, 5
	o.Progress = func(done, total int) {
		if done == 1 {
			cancel(stop)
		}
	}
	cases, err := Run(ctx, dev, o)
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, stop) {
		t.Fatalf("error %v, want one wrapping ErrInterrupted and the cause", err)
	}
	if len(cases) != 1 || cases[0].Measured != scenario.Pass || Planned(o) != 5 {
		t.Fatalf("cases %+v (planned %d), want the one that finished", cases, Planned(o))
	}
}

// The replay loop queues every launch asked for, and none once its
// context has ended.
func TestReplayQueuesWhatIsAskedAndStopsWhenInterrupted(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	h, err := handle.New(dev, handle.Options{Policy: streams.Worker})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ts, err := finder.NewTensors(dev, captureProblem, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Free()
	cr, err := captureWith(dev, h, fastestApplicable(captureProblem), ts, hip.CaptureModeGlobal, nil)
	if err != nil || cr.end != hip.Success {
		t.Fatalf("capture: %v, %v", err, cr.endErr)
	}
	g := cr.graph
	defer dev.GraphDestroy(g)
	exec, err := dev.GraphInstantiate(g)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.GraphExecDestroy(exec)
	rs, err := dev.StreamCreate(hip.StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.StreamDestroy(rs)

	n, err := replay(context.Background(), dev, exec, rs, 3*replayBatch+5)
	if err != nil || n != 3*replayBatch+5 {
		t.Fatalf("queued %d (%v), want %d", n, err, 3*replayBatch+5)
	}
	if err := dev.StreamSynchronize(rs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, err := replay(ctx, dev, exec, rs, 10); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("after the end: queued %d (%v)", n, err)
	}
}
