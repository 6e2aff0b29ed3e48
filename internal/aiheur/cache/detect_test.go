package cache

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// onGoroutine runs fn on a goroutine of its own, waits for it (failing
// fast after a wide deadline) and returns that goroutine's id. Successive
// calls are ordered by the wait, so they never race for Go's race detector,
// only for the cache's, which sees no synchronization of its own.
func onGoroutine(t *testing.T, name string, fn func()) uint64 {
	t.Helper()
	id := make(chan uint64, 1)
	go func() {
		NameThread(name)
		defer func() { id <- threadID() }()
		fn()
	}()
	select {
	case v := <-id:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never finished", name)
	}
	return 0
}

func modelLoader(m *fakeModel) func() (*fakeModel, error) {
	return func() (*fakeModel, error) { return m, nil }
}

func TestThreadID(t *testing.T) {
	here := threadID()
	if here == 0 || threadID() != here {
		t.Fatalf("threadID() = %d, then %d; want one nonzero id per goroutine", here, threadID())
	}
	other := onGoroutine(t, "other", func() {})
	if other == 0 || other == here {
		t.Errorf("another goroutine's id %d; this one's %d", other, here)
	}
}

// One thread inserts, another reads the same key afterwards. The two are
// ordered by a channel the cache cannot see: the unlocked cache has no
// synchronization of its own and records the read as racing with the
// insert; the fixed caches order it themselves and record nothing. A
// declared barrier in between orders it for every policy.
func TestCrossThreadReadRecordsARaceOnlyWithoutSynchronization(t *testing.T) {
	tests := []struct {
		policy    Policy
		barrier   bool
		wantRaces bool
	}{
		{Unlocked, false, true},
		{Unlocked, true, false},
		{Locked, false, false},
		{LockFree, false, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/barrier=%v", tt.policy, tt.barrier), func(t *testing.T) {
			c := newCache(t, tt.policy, Options{Name: "TunaNet"})
			key := SetKey{Arch: "gfx942"}
			a := &fakeModel{id: 1}
			writer := onGoroutine(t, "thread 1", func() { _, _ = c.Get(key, modelLoader(a)) })
			if tt.barrier {
				c.Barrier()
			}
			var got *fakeModel
			reader := onGoroutine(t, "thread 2", func() {
				got, _ = c.Get(key, func() (*fakeModel, error) { t.Error("load on a hit"); return nil, nil })
			})
			if got != a {
				t.Fatalf("reader got %v, want the inserted model", got)
			}
			d := c.Records().Detections()
			if d.Destroyed.Count != 0 || d.UseAfterFree.Count != 0 {
				t.Errorf("detections %v: nothing was released", d)
			}
			if !tt.wantRaces {
				if d.Any() {
					t.Fatalf("detections %v, first race: %v; want none", d, d.Races.First)
				}
				return
			}
			// The map read and the entry read both race with the insert.
			if d.Races.Count != 2 || d.Races.First == nil {
				t.Fatalf("races %d (first %v); want the map read and the entry read", d.Races.Count, d.Races.First)
			}
			r := *d.Races.First
			want := Record{Kind: KindRace, Cache: "TunaNet", Key: "gfx942/TunaNet", Access: "read", Location: "map", OtherAccess: "write",
				Thread: Thread{ID: reader, Name: "thread 2"}, Other: Thread{ID: writer, Name: "thread 1"}}
			r.Since, r.At = 0, 0
			if r != want {
				t.Errorf("first race\n got %+v\nwant %+v", r, want)
			}
			if d.Races.First.Since <= 0 || d.Races.First.At < d.Races.First.Since {
				t.Errorf("race timing since %v, at %v", d.Races.First.Since, d.Races.First.At)
			}
			note := d.Races.First.String()
			for _, part := range []string{"thread 2 (goroutine", "read the TunaNet cache's map (key gfx942/TunaNet)", "after thread 1 (goroutine", "wrote it, with no lock held and no barrier"} {
				if !strings.Contains(note, part) {
					t.Errorf("note %q lacks %q", note, part)
				}
			}
		})
	}
}

// The same thread may use the unlocked cache as it likes: only another
// thread's access races.
func TestUnlockedSingleThreadRecordsNothing(t *testing.T) {
	c := newCache(t, Unlocked, Options{})
	for i := 0; i < 3; i++ {
		for _, k := range []SetKey{{Arch: "gfx942"}, {Arch: "gfx90a"}} {
			h, err := c.Hold(k, modelLoader(&fakeModel{id: i}))
			if err != nil {
				t.Fatal(err)
			}
			h.Done()
		}
	}
	if d := c.Records().Detections(); d.Any() {
		t.Errorf("detections %v from one goroutine", d)
	}
}

// A write races with another thread's read too: B reads the map (a hit on
// another key) while A is loading, then A inserts.
func TestUnlockedWriteAfterAnotherThreadsReadIsARace(t *testing.T) {
	c := newCache(t, Unlocked, Options{})
	old, fresh := SetKey{Arch: "gfx908"}, SetKey{Arch: "gfx942"}
	if _, err := c.Get(old, modelLoader(&fakeModel{id: 0})); err != nil {
		t.Fatal(err)
	}
	c.Barrier() // the set-up insert is ordered before everything below
	aLoading, bRead := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { closeOnce(aLoading); closeOnce(bRead) })
	aDone := make(chan uint64, 1)
	go func() {
		_, _ = c.Get(fresh, func() (*fakeModel, error) {
			close(aLoading)
			<-bRead
			return &fakeModel{id: 1}, nil
		})
		aDone <- threadID()
	}()
	wait(t, aLoading, "A to start loading")
	b := onGoroutine(t, "B", func() { _, _ = c.Get(old, nil) })
	if d := c.Records().Detections(); d.Any() {
		t.Fatalf("B's hit on an entry inserted before the barrier recorded %v", d)
	}
	close(bRead)
	var a uint64
	select {
	case a = <-aDone:
	case <-time.After(30 * time.Second):
		t.Fatal("A never returned")
	}
	d := c.Records().Detections()
	if d.Races.Count != 1 || d.Races.First == nil {
		t.Fatalf("races %d; want A's insert racing with B's read", d.Races.Count)
	}
	if r := d.Races.First; r.Thread.ID != a || r.Other.ID != b || r.Access != "write" || r.OtherAccess != "read" || r.Location != "map" {
		t.Errorf("race %+v; want A (%d) writing the map after B (%d) read it", r, a, b)
	}
}

// The pre-fix interleavings of two threads missing one key, each ordered
// by gates so that only the cache's detector can call them races. Every
// one of them records a race, whichever thread inserts first and whether
// or not the inserts overlap: the detection does not depend on timing.
func TestUnlockedTwoThreadsRaceInEveryInterleaving(t *testing.T) {
	type step struct {
		who  int    // 0 or 1
		what string // "get" (a whole Get), "miss" (read and start loading), "insert" (finish loading)
	}
	tests := []struct {
		name         string
		steps        []step
		wantReplaced uint64
	}{
		{"one after the other", []step{{0, "get"}, {1, "get"}}, 0},
		{"the other first", []step{{1, "get"}, {0, "get"}}, 0},
		{"both miss, first inserts first", []step{{0, "miss"}, {1, "miss"}, {0, "insert"}, {1, "insert"}}, 1},
		{"both miss, second inserts first", []step{{0, "miss"}, {1, "miss"}, {1, "insert"}, {0, "insert"}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, Unlocked, Options{})
			key := SetKey{Arch: "gfx942"}
			var loading, release, done [2]chan struct{}
			for i := range 2 {
				loading[i], release[i], done[i] = make(chan struct{}), make(chan struct{}), make(chan struct{})
				t.Cleanup(func() { closeOnce(loading[i]); closeOnce(release[i]) })
			}
			start := func(i int) {
				go func() {
					defer close(done[i])
					_, _ = c.Get(key, func() (*fakeModel, error) {
						close(loading[i])
						<-release[i]
						return &fakeModel{id: i}, nil
					})
				}()
			}
			for _, s := range tt.steps {
				switch s.what {
				case "get":
					start(s.who)
					closeOnce(release[s.who]) // a miss loads at once; a hit never waits
					wait(t, done[s.who], "a Get")
				case "miss":
					start(s.who)
					wait(t, loading[s.who], "a miss")
				case "insert":
					close(release[s.who])
					wait(t, done[s.who], "an insert")
				}
			}
			d := c.Records().Detections()
			if d.Races.Count == 0 {
				t.Errorf("no race recorded")
			}
			if got := c.Stats().Replaced; got != tt.wantReplaced || d.Destroyed.Count != tt.wantReplaced {
				t.Errorf("replaced %d, destroyed records %d; want %d", got, d.Destroyed.Count, tt.wantReplaced)
			}
		})
	}
}

// A concurrent insert destroys the model A published, while A holds it
// or not: a destroyed published model either way, and a use-after-free
// when A held it.
func TestUnlockedInsertOverPublishedModelIsRecorded(t *testing.T) {
	for _, holding := range []bool{false, true} {
		t.Run(fmt.Sprintf("A holding=%v", holding), func(t *testing.T) {
			c := newCache(t, Unlocked, Options{Name: "KTN"})
			key := SetKey{Arch: "gfx942", Solver: "ConvHipIgemmGroupFwdXdlops"}
			a, b := &fakeModel{id: 1}, &fakeModel{id: 2}
			aLoading, bLoading, aHas, aMayFinish := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
			for _, ch := range []chan struct{}{aLoading, bLoading, aHas, aMayFinish} {
				t.Cleanup(func() { closeOnce(ch) })
			}
			aDone := make(chan uint64, 1)
			go func() {
				load := func() (*fakeModel, error) { close(aLoading); <-bLoading; return a, nil }
				if holding {
					h, _ := c.Hold(key, load)
					close(aHas)
					<-aMayFinish
					h.Done()
				} else {
					_, _ = c.Get(key, load)
					close(aHas)
				}
				aDone <- threadID()
			}()
			wait(t, aLoading, "A to miss")
			b0 := onGoroutine(t, "B", func() {
				_, _ = c.Get(key, func() (*fakeModel, error) { close(bLoading); <-aHas; return b, nil })
			})
			close(aMayFinish)
			var a0 uint64
			select {
			case a0 = <-aDone:
			case <-time.After(30 * time.Second):
				t.Fatal("A never finished")
			}
			if !a.released.Load() || b.released.Load() {
				t.Fatalf("released: A's model %v, B's %v; want only A's", a.released.Load(), b.released.Load())
			}
			d := c.Records().Detections()
			if d.Destroyed.Count != 1 || d.Destroyed.First == nil {
				t.Fatalf("destroyed %v; want one record", d.Destroyed)
			}
			r := d.Destroyed.First
			wantReaders := int64(0)
			if holding {
				wantReaders = 1
			}
			if r.Thread.ID != b0 || r.Other.ID != a0 || r.Cache != "KTN" || r.Key != key.String() || r.Readers != wantReaders || r.Since <= 0 {
				t.Errorf("destroyed record %+v; want B (%d) destroying A's (%d) model, %d readers", r, b0, a0, wantReaders)
			}
			if !strings.Contains(r.String(), "destroyed the model goroutine") {
				t.Errorf("note %q", r.String())
			}
			if !holding {
				if d.UseAfterFree.Count != 0 {
					t.Errorf("use-after-free %v with no reader", d.UseAfterFree)
				}
				return
			}
			if d.UseAfterFree.Count != 1 || d.UseAfterFree.First == nil {
				t.Fatalf("use-after-free %v; want one record", d.UseAfterFree)
			}
			u := d.UseAfterFree.First
			if u.Thread.ID != b0 || u.Readers != 1 || u.LateHold || !strings.Contains(u.String(), "while 1 reader held it") {
				t.Errorf("use-after-free record %+v (%s)", u, u)
			}
		})
	}
}

// A reader that found the entry before the replace and takes hold of it
// after the release uses freed memory: the reader records it.
func TestHoldAfterReleaseIsAUseAfterFree(t *testing.T) {
	c := newCache(t, Unlocked, Options{}).(*unlocked[SetKey, *fakeModel])
	key := SetKey{Arch: "gfx942"}
	e, err := c.get(key, modelLoader(&fakeModel{id: 1}))
	if err != nil {
		t.Fatal(err)
	}
	destroy(&c.d, e, threadID()) // what a concurrent insert does
	if d := c.Records().Detections(); d.UseAfterFree.Count != 0 {
		t.Fatalf("use-after-free %v before anyone held the model", d.UseAfterFree)
	}
	h := hold(&c.d, e)
	defer h.Done()
	d := c.Records().Detections()
	if d.UseAfterFree.Count != 1 || d.UseAfterFree.First == nil || !d.UseAfterFree.First.LateHold {
		t.Fatalf("use-after-free %+v; want one late hold", d.UseAfterFree)
	}
	if s := d.UseAfterFree.First.String(); !strings.Contains(s, "took hold of the gfx942/TunaNet model") {
		t.Errorf("note %q", s)
	}
	hold(&c.d, e).Done() // one record per model
	if n := c.Records().Detections().UseAfterFree.Count; n != 1 {
		t.Errorf("%d use-after-free records for one model", n)
	}
}

// A snapshot entry from a later generation than the snapshot it was found
// in was written into a snapshot readers already had: a race.
func TestLockFreeEntryFromALaterGenerationIsARace(t *testing.T) {
	c := newCache(t, LockFree, Options{}).(*lockFree[SetKey, *fakeModel])
	key := SetKey{Arch: "gfx942"}
	live := c.snapshot.Load()
	e := newEntry(key, &fakeModel{id: 1}, live.gen+1, threadID())
	live.slots = append(live.slots, slot[SetKey, *fakeModel]{key, e}) // the regression: no copy
	if _, err := c.Get(key, nil); err != nil {
		t.Fatal(err)
	}
	d := c.Records().Detections()
	if d.Races.Count != 1 || d.Races.First == nil || !strings.Contains(d.Races.First.Location, "published in snapshot 1, read through snapshot 0") {
		t.Fatalf("races %+v; want the read of an unpublished entry", d.Races)
	}
}

// The fixed caches record nothing under contention, with readers holding
// models while others load and publish, and barriers in between.
func TestFixedCachesRecordNothingUnderContention(t *testing.T) {
	const goroutines, rounds, keys = 16, 50, 12
	for _, p := range []Policy{Locked, LockFree} {
		t.Run(string(p), func(t *testing.T) {
			c := newCache(t, p, Options{})
			for r := 0; r < 2; r++ {
				var wg sync.WaitGroup
				for g := 0; g < goroutines; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := 0; i < rounds; i++ {
							k := SetKey{Arch: "gfx942", Solver: fmt.Sprint((g + i) % keys)}
							h, err := c.Hold(k, modelLoader(&fakeModel{id: g}))
							if err != nil || h.Model == nil || h.Model.released.Load() {
								t.Errorf("Hold(%v) = %v, %v", k, h.Model, err)
								return
							}
							h.Done()
						}
					}()
				}
				wg.Wait()
				c.Barrier()
			}
			if d := c.Records().Detections(); d.Any() {
				t.Errorf("detections %v (first race %v)", d, d.Races.First)
			}
			if s := c.Stats(); s.Loads != keys || s.Replaced != 0 {
				t.Errorf("stats %v; want %d loads, nothing replaced", s, keys)
			}
		})
	}
}

// onFirst sees the first record of each kind once, as it is made; caches
// sharing a Records report together.
func TestRecordsOnFirstAndSharing(t *testing.T) {
	var mu sync.Mutex
	var seen []Record
	recs := NewRecords(func(r Record) { mu.Lock(); seen = append(seen, r); mu.Unlock() })
	tn := newCache(t, Unlocked, Options{Name: "TunaNet", Records: recs})
	ktn := newCache(t, Unlocked, Options{Name: "KTN", Records: recs})
	for _, c := range []Cache[SetKey, *fakeModel]{tn, ktn} {
		onGoroutine(t, "writer", func() { _, _ = c.Get(SetKey{Arch: "gfx942"}, modelLoader(&fakeModel{})) })
		onGoroutine(t, "reader", func() { _, _ = c.Get(SetKey{Arch: "gfx942"}, nil) })
	}
	d := recs.Detections()
	if d.Races.Count != 4 || d.Races.First.Cache != "TunaNet" {
		t.Errorf("shared races %d, first in %q; want 4, first in TunaNet", d.Races.Count, d.Races.First.Cache)
	}
	if tn.Records() != recs || ktn.Records() != recs {
		t.Error("caches do not report into the shared records")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0].Kind != KindRace || seen[0] != *d.Races.First {
		t.Errorf("onFirst saw %+v; want the first race once", seen)
	}
}

// Detections travel in a child's JSON result line.
func TestDetectionsJSON(t *testing.T) {
	in := Detections{Races: Tally{Count: 3, First: &Record{Kind: KindRace, Cache: "TunaNet", Key: "gfx942/TunaNet",
		Thread: Thread{ID: 7, Name: "thread 2"}, Access: "read", Location: "map", OtherAccess: "write", Other: Thread{ID: 6},
		Since: 1500 * time.Microsecond, At: time.Second}}, UseAfterFree: Tally{Count: 1, First: &Record{Kind: KindUseAfterFree, Readers: 1}}}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Detections
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Any() || *out.Races.First != *in.Races.First || out.Of(KindUseAfterFree).Count != 1 || out.Destroyed.First != nil {
		t.Errorf("round trip of %s gave %+v", data, out)
	}
	for _, k := range Kinds {
		if !strings.Contains(string(data), fmt.Sprintf("%q", map[Kind]string{KindRace: "races", KindDestroyed: "published_destroyed", KindUseAfterFree: "use_after_free"}[k])) {
			t.Errorf("%s lacks the %s tally", data, k)
		}
	}
	if (Detections{}).Any() {
		t.Error("empty detections report something")
	}
}
