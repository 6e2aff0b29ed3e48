package cache

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The lock-free cache publishes by copy on write: a snapshot readers may
// hold is never written again. Readers hit a cached key without any lock
// while other goroutines load and publish new keys, past the size at which
// a snapshot turns from a scanned slice into a map. Writing a new key into
// the live snapshot instead would be a data race on what the readers are
// reading, which -race reports; the snapshots the test keeps must also
// stay exactly as they were published, which fails without -race too.
func TestLockFreePublishesWithoutWritingLiveSnapshots(t *testing.T) {
	const readers, writers, keysPerWriter = 8, 4, 2 * scanKeys
	c := newCache(t, LockFree, Options{}).(*lockFree[SetKey, *fakeModel])
	hot := SetKey{Arch: "gfx942"}
	hotModel := &fakeModel{id: -1}
	if _, err := c.Get(hot, modelLoader(hotModel)); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var hits atomic.Int64
	var readersWG, writersWG sync.WaitGroup
	readersGo := make(chan struct{})
	for r := 0; r < readers; r++ {
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			<-readersGo
			for !stop.Load() {
				h, err := c.Hold(hot, func() (*fakeModel, error) { return nil, fmt.Errorf("the hot key was lost") })
				if err != nil || h.Model != hotModel {
					t.Errorf("hit on the cached key: %v, %v", h.Model, err)
					stop.Store(true)
					return
				}
				h.Done()
				hits.Add(1)
			}
		}()
	}
	close(readersGo)

	// Each snapshot, as published, with the keys it held then.
	type kept struct {
		s    *snapshot[SetKey, *fakeModel]
		keys []SetKey
	}
	var keptMu sync.Mutex
	var snaps []kept
	keep := func() {
		s := c.snapshot.Load()
		var keys []SetKey
		for _, sl := range s.slots {
			keys = append(keys, sl.key)
		}
		for k := range s.index {
			keys = append(keys, k)
		}
		keptMu.Lock()
		snaps = append(snaps, kept{s, keys})
		keptMu.Unlock()
	}
	keep()
	for w := 0; w < writers; w++ {
		writersWG.Add(1)
		go func() {
			defer writersWG.Done()
			for i := 0; i < keysPerWriter; i++ {
				k := SetKey{Arch: fmt.Sprintf("gfx%d", w), Solver: fmt.Sprint(i)}
				if _, err := c.Get(k, modelLoader(&fakeModel{id: w*100 + i})); err != nil {
					t.Error(err)
				}
				keep()
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { writersWG.Wait(); close(writersDone) }()
	select {
	case <-writersDone:
	case <-time.After(30 * time.Second):
		stop.Store(true)
		t.Fatal("writers did not finish")
	}
	stop.Store(true)
	readersWG.Wait()

	if n := c.snapshot.Load().len(); n != 1+writers*keysPerWriter {
		t.Errorf("final snapshot holds %d keys, want %d", n, 1+writers*keysPerWriter)
	}
	if c.snapshot.Load().index == nil {
		t.Errorf("the final snapshot is still a slice; the test must cover the map form too")
	}
	for _, k := range snaps {
		if k.s.len() != len(k.keys) {
			t.Fatalf("snapshot %d held %d keys when published and %d now: written after publication", k.s.gen, len(k.keys), k.s.len())
		}
		for _, key := range k.keys {
			if k.s.find(key) == nil {
				t.Fatalf("snapshot %d lost key %v", k.s.gen, key)
			}
		}
	}
	if hits.Load() == 0 {
		t.Error("the readers never hit")
	}
	if d := c.Records().Detections(); d.Any() {
		t.Errorf("detections %v", d)
	}
}
