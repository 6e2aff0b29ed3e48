package streams

import (
	"fmt"
	"strings"

	"miotool/internal/hip"
)

// Policy selects how abandoned streams are reclaimed.
type Policy string

// The reclaim policies.
const (
	// Lazy sweeps abandoned streams from every kernel launch with a stream
	// query and frees their scratch inline. A launch made while any global
	// capture is in flight (or inside its own capture) has its query
	// refused, which invalidates that capture.
	Lazy Policy = "lazy"
	// Guarded keeps the launch-path sweep but skips it while the handle's
	// stream is capturing and runs it in relaxed capture mode, gated by an
	// atomic count of pinned slots. Captures survive, but a workload that
	// only replays graphs never releases the scratch.
	Guarded Policy = "guarded"
	// Worker takes reclaim off the launch path: abandon queues a host
	// callback behind the evaluation's work and a worker thread retires
	// the slot and frees its scratch when the stream reaches it.
	Worker Policy = "worker"
	// Poller takes reclaim off the launch path without host callbacks: a
	// thread in relaxed capture mode polls the done events of draining
	// slots (every microsecond at first, then with sleeps a fraction of
	// the drain's age; idle when nothing drains), so reclaim does not wait
	// for the runtime's one serialized callback thread.
	Poller Policy = "poller"
)

// Policies lists every policy in the order of the fix's history.
var Policies = []Policy{Lazy, Guarded, Worker, Poller}

// behaviour is everything a policy decides, in one place: what the launch
// path does, what Abandon starts, and which thread (if any) reclaims and
// frees off the launch path.
type behaviour struct {
	// beforeLaunch is the launch path's tracker work (nil: none).
	beforeLaunch func(t *Tracker, handleStream hip.Stream)
	// loop is the reclaim thread's body (nil: the policy has no thread;
	// whoever retires a slot frees its scratch).
	loop func(r *reclaimThread)
	// abandoned runs at the end of Abandon, outside the tracker lock, for
	// a slot just marked draining (nil: nothing more).
	abandoned func(t *Tracker, a *abandonment)
}

var behaviours = map[Policy]behaviour{
	Lazy: {
		// The pre-fix launch path ignores the sweep's outcome; a refused
		// query has already done its damage to any capture in flight.
		beforeLaunch: func(t *Tracker, _ hip.Stream) { _ = t.sweepFromLaunch() },
	},
	Guarded: {
		beforeLaunch: func(t *Tracker, hs hip.Stream) { _ = t.sweepGuarded(hs) },
	},
	Worker: {
		loop:      (*reclaimThread).runWorker,
		abandoned: (*Tracker).queueCallback,
	},
	Poller: {
		loop:      (*reclaimThread).runPoller,
		abandoned: (*Tracker).handToPoller,
	},
}

// ReclaimsOffLaunchPath reports whether the policy reclaims abandoned
// streams without help from the launch path, so that a workload which only
// replays graphs (and never launches through the library) still gets its
// scratch back.
func (p Policy) ReclaimsOffLaunchPath() bool { return behaviours[p].loop != nil }

// ParsePolicy accepts the name of one of Policies.
func ParsePolicy(s string) (Policy, error) {
	names := make([]string, len(Policies))
	for i, p := range Policies {
		if string(p) == s {
			return p, nil
		}
		names[i] = string(p)
	}
	return "", fmt.Errorf("unknown reclaim policy %q (want %s or %s)", s,
		strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// BeforeLaunch is the tracker's part of every kernel launch through the
// library, under the tracker's policy: the lazy and guarded sweeps; nothing
// at all under worker and poller. handleStream is the handle's own stream,
// whose capture state the guarded sweep respects.
func (t *Tracker) BeforeLaunch(handleStream hip.Stream) {
	if f := t.behaviour.beforeLaunch; f != nil {
		f(t, handleStream)
	}
}

// sweepFromLaunch is the lazy policy's launch-path reclaim: poll every
// abandoned stream with a stream query and free the scratch of those that
// finished, inline. It returns the first refused query, which is how a
// capture in flight learns of it (the refusal invalidates the capture).
func (t *Tracker) sweepFromLaunch() error {
	t.mu.Lock()
	var freed []Pin
	var first error
	for _, s := range t.slots {
		if s.state != slotDraining || s.rec.state.Load() != recDraining {
			continue
		}
		err := t.dev.StreamQuery(s.stream)
		switch {
		case err == nil:
			if s.rec.state.CompareAndSwap(recDraining, recClaimed) {
				freed = append(freed, t.retireLocked(s.rec)...)
				t.c.byBackstop.Add(1)
				t.c.byLaunch.Add(1)
			}
		case hip.IsNotReady(err):
		default:
			if first == nil {
				first = err
			}
		}
	}
	t.mu.Unlock()
	for _, p := range freed {
		t.release(p)
	}
	t.noteRefusal(first)
	return first
}

// sweepGuarded is the guarded policy's launch-path reclaim: nothing at all
// unless some slot pins scratch (one atomic load), skipped while the
// handle's stream is capturing, and otherwise done by done event in relaxed
// capture mode so that a capture on another stream or thread survives.
func (t *Tracker) sweepGuarded(handleStream hip.Stream) error {
	if !t.HasPinned() {
		return nil
	}
	st, err := t.dev.StreamIsCapturing(handleStream)
	if err != nil {
		t.noteRefusal(err)
		return err
	}
	if st != hip.CaptureStatusNone {
		return nil
	}
	return hip.WithCaptureMode(t.dev, hip.CaptureModeRelaxed, func() error {
		t.mu.Lock()
		freed, retired, err := t.sweepLocked()
		t.mu.Unlock()
		t.c.byLaunch.Add(int64(retired))
		for _, p := range freed {
			t.release(p)
		}
		t.noteRefusal(err)
		return err
	})
}

func (t *Tracker) noteRefusal(err error) {
	if err == nil {
		return
	}
	t.refusalMu.Lock()
	if t.firstRefusal == nil {
		t.firstRefusal = err
	}
	t.refusalMu.Unlock()
}

// FirstSweepRefusal is the first error a launch-path sweep met, if any.
func (t *Tracker) FirstSweepRefusal() error {
	t.refusalMu.Lock()
	defer t.refusalMu.Unlock()
	return t.firstRefusal
}
