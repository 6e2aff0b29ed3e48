package sim

import (
	"time"

	"miotool/internal/hip"
)

// event is a stream marker. All fields are guarded by Device.mu.
type event struct {
	id    hip.Event
	flags hip.EventFlags

	// recorded: the event has a real (executed, not captured) record.
	recorded bool
	// gen numbers the records; a record completes the event only if no
	// later record replaced it.
	gen    uint64
	done   bool
	at     time.Time
	doneCh chan struct{} // closed when record gen completes

	// captured is the capture the event was last recorded in, if any.
	captured *capture
}

// captureLocked is the live capture the event was last recorded in, or nil.
func (e *event) captureLocked() *capture {
	if e.captured != nil && !e.captured.ended {
		return e.captured
	}
	return nil
}

// startRecordLocked begins a real record: the event is pending until the
// stream reaches it.
func (e *event) startRecordLocked() (uint64, chan struct{}) {
	e.gen++
	e.recorded = true
	e.done = false
	e.captured = nil
	e.doneCh = make(chan struct{})
	return e.gen, e.doneCh
}

// recordInCaptureLocked makes the event a captured one. A captured event
// has no real record until a graph that holds it is launched.
func (e *event) recordInCaptureLocked(c *capture) {
	e.gen++
	e.recorded = false
	e.done = false
	e.doneCh = nil
	e.captured = c
}

// EventCreate creates an event.
func (d *Device) EventCreate(flags hip.EventFlags) (hip.Event, error) {
	const op = "EventCreate"
	known := hip.EventBlockingSync | hip.EventDisableTiming
	if flags&^known != 0 {
		return 0, d.errf(op, hip.ErrInvalidValue, "event flags %#x are unknown (want a combination of %#x)", uint32(flags), uint32(known))
	}
	if err := d.injectedCallFailure(op, 0); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.alive(op); err != nil {
		return 0, err
	}
	e := &event{id: hip.Event(d.newHandleLocked()), flags: flags}
	d.events[e.id] = e
	return e.id, nil
}

// EventDestroy releases an event. A record already queued still runs.
func (d *Device) EventDestroy(h hip.Event) error {
	const op = "EventDestroy"
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.eventLocked(op, h); err != nil {
		return err
	}
	delete(d.events, h)
	return nil
}

func (d *Device) eventLocked(op string, h hip.Event) (*event, error) {
	if err := d.alive(op); err != nil {
		return nil, err
	}
	e, ok := d.events[h]
	if !ok {
		return nil, d.errf(op, hip.ErrInvalidHandle, "event %d does not exist", uintptr(h))
	}
	return e, nil
}

// EventRecord records the event on s: it completes, and takes its time,
// when s reaches it. Re-recording resets it. On a capturing stream the
// record becomes a graph node and the event a captured one.
func (d *Device) EventRecord(eh hip.Event, h hip.Stream) error {
	const op = "EventRecord"
	if err := d.injectedCallFailure(op, h); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e, err := d.eventLocked(op, eh)
	if err != nil {
		return err
	}
	s, err := d.streamLocked(op, h)
	if err != nil {
		return err
	}
	return d.submitLocked(op, s, &node{kind: nodeRecord, event: e})
}

// EventQuery returns nil when the event's latest record has completed (or
// it was never recorded), ErrNotReady while it is pending.
func (d *Device) EventQuery(h hip.Event) error {
	const op = "EventQuery"
	e, err := d.guardEvent(op, h, ActionQueryCapturedEvent, ActionQueryUncapturedEvent)
	if err != nil {
		return err
	}
	if err := d.stickyErr(op); err != nil {
		return err
	}
	if err := d.injectedQueryFailure(op); err != nil {
		return err
	}
	d.mu.Lock()
	pending := e.recorded && !e.done
	d.mu.Unlock()
	if pending {
		return d.newErr(op, hip.ErrNotReady, "")
	}
	return nil
}

// EventSynchronize blocks until the event's latest record has completed.
func (d *Device) EventSynchronize(h hip.Event) error {
	const op = "EventSynchronize"
	e, err := d.guardEvent(op, h, ActionSyncCapturedEvent, ActionSyncUncapturedEvent)
	if err != nil {
		return err
	}
	if err := d.stickyErr(op); err != nil {
		return err
	}
	d.mu.Lock()
	var wait chan struct{}
	if e.recorded && !e.done {
		wait = e.doneCh
	}
	d.mu.Unlock()
	if wait != nil {
		<-wait
	}
	return d.stickyErr(op)
}

// EventElapsedTime is the time from start to stop in milliseconds. Both
// must be timing events with completed records.
func (d *Device) EventElapsedTime(start, stop hip.Event) (float32, error) {
	const op = "EventElapsedTime"
	d.mu.Lock()
	defer d.mu.Unlock()
	var at [2]time.Time
	for i, h := range []hip.Event{start, stop} {
		e, err := d.eventLocked(op, h)
		if err != nil {
			return 0, err
		}
		switch {
		case e.flags&hip.EventDisableTiming != 0:
			return 0, d.errf(op, hip.ErrInvalidHandle, "event %d was created with timing disabled", uintptr(h))
		case !e.recorded:
			return 0, d.errf(op, hip.ErrInvalidHandle, "event %d has not been recorded", uintptr(h))
		case !e.done:
			return 0, d.errf(op, hip.ErrNotReady, "event %d has not completed", uintptr(h))
		}
		at[i] = e.at
	}
	return float32(at[1].Sub(at[0]).Seconds() * 1000), nil
}
