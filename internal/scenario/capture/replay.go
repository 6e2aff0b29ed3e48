package capture

import (
	"context"
	"fmt"
	"time"

	"miotool/internal/conv"
	"miotool/internal/finder"
	"miotool/internal/hip"
	"miotool/internal/scenario"
	"miotool/internal/streams"
)

// ReplayOptions configure the tune -> capture -> replay-only workload.
type ReplayOptions struct {
	Options
	Mode    hip.CaptureMode
	Replays int
	// ReleaseDeadline bounds the wait for the abandoned evaluation's
	// scratch to be freed once the replays are done.
	ReleaseDeadline time.Duration
}

// ReplayCase is one policy's result.
type ReplayCase struct {
	Policy   streams.Policy
	Expected scenario.Outcome
	Measured scenario.Outcome
	// PinnedAfterFind is the scratch the abandoned evaluation pinned when
	// find returned; PinnedAtEnd what was still pinned at the deadline.
	PinnedAfterFind int64
	PinnedAtEnd     int64
	// ReleasedAfter is how long after the last replay was queued the
	// scratch was freed (zero if it was not).
	ReleasedAfter time.Duration
	Replays       int
	ReplaysOK     bool
	EndCapture    hip.Code
	Detail        string
	Counters      streams.Counters
}

// Agrees reports whether the measured outcome is the expected one.
func (c ReplayCase) Agrees() bool { return c.Measured == c.Expected }

// ExpectedReplay: only a policy that reclaims off the launch path releases
// scratch without a call into the library; lazy also loses its capture
// under global mode.
func ExpectedReplay(p streams.Policy) scenario.Outcome {
	if p.ReclaimsOffLaunchPath() {
		return scenario.Pass
	}
	return scenario.Fail
}

// RunReplay runs the workload once per policy.
func RunReplay(ctx context.Context, dev hip.Device, opts ReplayOptions) ([]ReplayCase, error) {
	if opts.CaptureProblem == (conv.Problem{}) {
		opts.CaptureProblem = opts.FindProblem
	}
	if opts.Replays <= 0 {
		opts.Replays = 20
	}
	var out []ReplayCase
	progress := progressOf(opts.Progress, PlannedReplays(opts))
	for range max(1, opts.Repeat) {
		for _, p := range opts.Policies {
			if ctx.Err() != nil {
				return out, interrupted(ctx)
			}
			c, err := runReplayCase(ctx, dev, opts, p)
			if err != nil && ctx.Err() != nil {
				c.Measured, c.Detail = scenario.Interrupted, "interrupted while it ran"
				if c.Replays > 0 {
					c.Detail += fmt.Sprintf(", after %d of %d replays were queued", c.Replays, opts.Replays)
				}
				return append(out, c), interrupted(ctx)
			}
			if err != nil {
				return out, fmt.Errorf("%s: %w", p, err)
			}
			out = append(out, c)
			progress(len(out))
		}
	}
	return out, nil
}

// PlannedReplays is how many cases RunReplay runs for opts.
func PlannedReplays(opts ReplayOptions) int { return max(1, opts.Repeat) * len(opts.Policies) }

// replayBatch is how many graph launches are queued between two looks at
// the context and at the device's progress. At most two batches are in
// flight, so the queue (and the memory a runtime keeps for it) stays the
// same however many replays are asked for, and an interruption is heard
// within two batches: a few milliseconds on a GPU, about a tenth of a
// second on the simulator.
const replayBatch = 1024

// replay launches exec on s n times, with at most two batches queued
// ahead of the device, and returns how many it queued. It stops when ctx
// ends, with ctx's error.
func replay(ctx context.Context, dev hip.Device, exec hip.GraphExec, s hip.Stream, n int) (int, error) {
	var marks [2]hip.Event
	for i := range marks {
		ev, err := dev.EventCreate(hip.EventDefault)
		if err != nil {
			return 0, err
		}
		defer dev.EventDestroy(ev)
		marks[i] = ev
	}
	queued := 0
	for batch := 0; queued < n; batch++ {
		if err := ctx.Err(); err != nil {
			return queued, err
		}
		mark := marks[batch%2]
		if batch >= 2 {
			// The batch before last has run: the queue holds at most
			// this one and the last.
			if err := dev.EventSynchronize(mark); err != nil {
				return queued, fmt.Errorf("replay %d: %w", queued, err)
			}
		}
		for end := min(n, queued+replayBatch); queued < end; queued++ {
			if err := dev.GraphLaunch(exec, s); err != nil {
				return queued, fmt.Errorf("replay %d: %w", queued, err)
			}
		}
		if err := dev.EventRecord(mark, s); err != nil {
			return queued, fmt.Errorf("replay %d: %w", queued, err)
		}
	}
	return queued, nil
}

func runReplayCase(ctx context.Context, dev hip.Device, opts ReplayOptions, p streams.Policy) (ReplayCase, error) {
	c := ReplayCase{Policy: p, Expected: ExpectedReplay(p)}
	log := logf(opts.Options)
	log("replay %s: find on %s", p, opts.FindProblem.Key())
	h, fts, res, _, err := abandonedFind(ctx, dev, opts.Options, p)
	if err != nil {
		return c, err
	}
	defer fts.Free()
	defer h.Close()
	tr := h.Tracker()
	c.PinnedAfterFind = tr.Counters().ScratchBytesPinned
	if !res.NaiveAbandoned || c.PinnedAfterFind == 0 {
		c.Measured = scenario.Inconclusive
		c.Detail = "find did not leave an abandoned evaluation pinning scratch"
		c.Counters = tr.Counters()
		return c, nil
	}

	sol, _ := conv.SolverByName(res.Chosen)
	if sol == nil || !sol.IsApplicable(opts.CaptureProblem) {
		sol = fastestApplicable(opts.CaptureProblem)
	}
	cts, err := finder.NewTensors(dev, opts.CaptureProblem, nil, opts.Seed+11)
	if err != nil {
		return c, err
	}
	defer cts.Free()
	cr, err := captureWith(dev, h, sol, cts, opts.Mode, nil)
	if err != nil {
		return c, err
	}
	c.EndCapture = cr.end
	if cr.end != hip.Success {
		c.Measured, c.Detail = scenario.Fail, "capture failed: "+cr.endErr.Error()
		if cr.runErr != nil {
			c.Detail += "; captured launch: " + cr.runErr.Error()
		}
		if r := tr.FirstSweepRefusal(); r != nil {
			c.Detail += "; launch-path sweep refused: " + r.Error()
		}
		c.Counters = tr.Counters()
		return c, nil
	}
	defer dev.GraphDestroy(cr.graph)
	exec, err := dev.GraphInstantiate(cr.graph)
	if err != nil {
		return c, err
	}
	defer dev.GraphExecDestroy(exec)
	rs, err := dev.StreamCreate(hip.StreamNonBlocking)
	if err != nil {
		return c, err
	}
	defer dev.StreamDestroy(rs)

	// From here on: graph launches only, nothing that reaches the handle.
	log("replay %s: %d graph launches", p, opts.Replays)
	n, err := replay(ctx, dev, exec, rs, opts.Replays)
	c.Replays = n
	if err != nil {
		return c, err
	}
	queued := time.Now()
	deadline := time.NewTimer(opts.ReleaseDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
wait:
	for tr.Counters().ScratchBytesPinned > 0 || tr.Counters().ScratchFreed == 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			break wait
		case <-ctx.Done():
			return c, ctx.Err()
		}
	}
	cn := tr.Counters()
	c.PinnedAtEnd = cn.ScratchBytesPinned
	released := cn.ScratchBytesPinned == 0 && cn.ScratchFreed > 0
	if released {
		c.ReleasedAfter = time.Since(queued)
	}
	if err := dev.StreamSynchronize(rs); err != nil {
		return c, fmt.Errorf("replays: %w", err)
	}
	got, err := cts.Output()
	if err != nil {
		return c, err
	}
	chk := cts.Check(got)
	c.ReplaysOK = chk.OK
	c.Counters = tr.Counters()
	switch {
	case !chk.OK:
		c.Measured, c.Detail = scenario.Fail, "replayed output: "+chk.String()
	case !released:
		c.Measured = scenario.Fail
		c.Detail = fmt.Sprintf("%d bytes of scratch still pinned %s after the last replay was queued", c.PinnedAtEnd, opts.ReleaseDeadline)
	default:
		c.Measured = scenario.Pass
	}
	return c, nil
}
