package finder

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"miotool/internal/handle"
	"miotool/internal/streams"
)

// The teardown after a find that abandoned its naive evaluation says,
// at once and while it lasts, that it waits for that evaluation and how
// long at most; the result is the same before and after it.
func TestTeardownSaysWhatItWaitsFor(t *testing.T) {
	d := newSim(t)
	h, err := handle.New(d, handle.Options{Policy: streams.Worker, MaxDraining: 2, CloseTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := NewTensors(d, naiveTimesOut, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	// The abandoned slot's callback waits at a gate, so the slot is still
	// draining when the teardown begins.
	release := d.Faults().HoldHostFuncs()
	t.Cleanup(release)
	res, err := Find(context.Background(), h, ts, Options{NaiveTimeoutPct: 50, Samples: 1, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Naive.Abandoned() {
		t.Fatalf("precondition: naive was not abandoned (%s)", res.Naive)
	}
	before := *res
	before.Entries = append([]Entry(nil), res.Entries...)
	var waits []TeardownWait
	rep, err := Teardown(h, ts, TeardownOptions{Result: res, Every: time.Millisecond, Notice: func(w TeardownWait) {
		waits = append(waits, w)
		if len(waits) == 3 {
			release()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) < 3 || rep.Notices != len(waits) {
		t.Fatalf("%d notices (report says %d), want 3 or more", len(waits), rep.Notices)
	}
	w := waits[0]
	if w.Draining != 1 || w.Left <= 0 || w.Left > time.Minute || w.SinceAbandoned <= 0 || !strings.Contains(w.String(), "waiting for the abandoned naive evaluation") || !strings.Contains(w.String(), "left at most") {
		t.Errorf("first notice %+v: %s", w, w)
	}
	if waits[2].Left > w.Left || waits[2].Waited < w.Waited {
		t.Errorf("the notices do not count down: %+v then %+v", w, waits[2])
	}
	if rep.Before.Draining != 1 || rep.After.Draining != 0 || rep.Took <= 0 {
		t.Errorf("report %+v", rep)
	}
	if !reflect.DeepEqual(before, *res) {
		t.Error("the teardown changed the find's result")
	}
	if n, _ := d.MemoryInUse(); n != 0 {
		t.Errorf("%d device bytes left after the teardown", n)
	}
}

// With nothing abandoned, the teardown has nothing to say.
func TestTeardownWithNothingAbandonedIsSilent(t *testing.T) {
	d := newSim(t)
	h, err := handle.New(d, handle.Options{Policy: streams.Worker, MaxDraining: 2})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := NewTensors(d, small, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Find(context.Background(), h, ts, Options{NaiveTimeoutPct: 0, Samples: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Teardown(h, ts, TeardownOptions{Result: res, Notice: func(w TeardownWait) { t.Errorf("notice %v", w) }})
	if err != nil || rep.Notices != 0 {
		t.Fatalf("report %+v, %v", rep, err)
	}
}
