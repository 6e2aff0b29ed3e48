package cache

import (
	"errors"
	"sync"
	"sync/atomic"
)

// lockFree serves hits from an immutable snapshot behind an atomic
// pointer, so readers never lock. Misses take mu only to find or start the
// key's single in-flight load; the loader publishes a new snapshot with the
// key added (copy on write). Entries are never replaced, so a returned
// model stays valid.
type lockFree[K comparable, V Releaser] struct {
	snapshot atomic.Pointer[snapshot[K, V]]
	// byBytes: a key that is a snapshot key's very bytes is that key
	// (keysByBytes), so a hit may be settled by comparing words.
	byBytes bool
	// The hit counter's cells are written on every hit: none may share
	// the snapshot pointer's cache line, which every hit reads.
	_        [64]byte
	mu       sync.Mutex // guards inflight and snapshot publication
	inflight map[K]*flight[K, V]
	opts     Options
	c        counters
	d        detector
}

// scanKeys is how many keys a snapshot holds in a slice, scanned in order
// on a lookup: a model cache holds a handful, and comparing a few keys
// (string lengths first, then bytes or the same pointer) is cheaper than
// hashing one. Beyond it the snapshot keeps a map.
const scanKeys = 8

// snapshot is one generation of the cache's contents. It is never written
// after it is published: a new key makes a new snapshot.
type snapshot[K comparable, V any] struct {
	// gen counts publications; each entry records the one it came with.
	gen   uint64
	slots []slot[K, V]       // while the keys are few
	index map[K]*entry[K, V] // once they are not (slots is then nil)
}

type slot[K comparable, V any] struct {
	key K
	e   *entry[K, V]
}

// hit is the hit path's lookup in a scanned snapshot: first a key that
// is the caller's very bytes (when byBytes), then one equal to it; nil
// when neither is there or the snapshot keeps a map.
func (s *snapshot[K, V]) hit(key K, byBytes bool) *entry[K, V] {
	slots := s.slots
	if byBytes {
		for i := range slots {
			if sameBytes(&slots[i].key, &key) {
				return slots[i].e
			}
		}
	}
	for i := range slots {
		if slots[i].key == key {
			return slots[i].e
		}
	}
	return nil
}

func (s *snapshot[K, V]) find(key K) *entry[K, V] {
	if s.index != nil {
		return s.index[key]
	}
	for i := range s.slots {
		if s.slots[i].key == key {
			return s.slots[i].e
		}
	}
	return nil
}

func (s *snapshot[K, V]) len() int { return len(s.slots) + len(s.index) }

// with is a new snapshot: s's entries and e, one generation later.
func (s *snapshot[K, V]) with(e *entry[K, V]) *snapshot[K, V] {
	next := &snapshot[K, V]{gen: s.gen + 1}
	if n := s.len() + 1; n <= scanKeys {
		next.slots = make([]slot[K, V], 0, n)
		next.slots = append(append(next.slots, s.slots...), slot[K, V]{e.key, e})
		return next
	}
	next.index = make(map[K]*entry[K, V], s.len()+1)
	for _, sl := range s.slots {
		next.index[sl.key] = sl.e
	}
	for k, old := range s.index {
		next.index[k] = old
	}
	next.index[e.key] = e
	return next
}

// flight is one in-progress load; done closes when e and err are final.
type flight[K comparable, V any] struct {
	done chan struct{}
	e    *entry[K, V]
	err  error
}

var errLoadPanicked = errors.New("model load panicked in another goroutine")

func newLockFree[K comparable, V Releaser](o Options) *lockFree[K, V] {
	c := &lockFree[K, V]{inflight: map[K]*flight[K, V]{}, opts: o, d: newDetector(o), byBytes: keysByBytes[K]()}
	c.snapshot.Store(&snapshot[K, V]{})
	return c
}

func (c *lockFree[K, V]) get(key K, load func() (V, error)) (*entry[K, V], error) {
	s := c.snapshot.Load()
	if e := s.hit(key, c.byBytes); e != nil && e.epoch <= s.gen {
		c.c.hits.inc()
		return e, nil
	}
	return c.notHit(key, load)
}

// notHit is everything but a clean hit in a scanned snapshot: a hit in a
// snapshot that keeps a map, a hit on an entry from a later generation
// than its snapshot (a race, recorded), or a miss.
//
//go:noinline
func (c *lockFree[K, V]) notHit(key K, load func() (V, error)) (*entry[K, V], error) {
	if e := c.found(key); e != nil {
		return e, nil
	}
	return c.miss(key, load)
}

// found is a hit by the full lookup, counted, with an entry from a later
// generation than its snapshot recorded as a race; nil on a miss.
func (c *lockFree[K, V]) found(key K) *entry[K, V] {
	s := c.snapshot.Load()
	e := s.find(key)
	if e == nil {
		return nil
	}
	if e.epoch > s.gen { // written into a snapshot already published
		unpublished(&c.d, e, s.gen)
	}
	c.c.hits.inc()
	return e
}

func (c *lockFree[K, V]) miss(key K, load func() (V, error)) (*entry[K, V], error) {
	c.mu.Lock()
	if e := c.snapshot.Load().find(key); e != nil { // published while we waited for mu
		c.mu.Unlock()
		c.c.hits.inc()
		return e, nil
	}
	c.c.misses.Add(1)
	if f, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		c.c.waits.Add(1)
		<-f.done
		return f.e, f.err
	}
	f := &flight[K, V]{done: make(chan struct{})}
	c.inflight[key] = f
	c.mu.Unlock()
	c.run(key, f, load)
	return f.e, f.err
}

// run performs the load for f and publishes it. If load panics, waiters
// get an error instead of hanging and the panic continues in the caller.
func (c *lockFree[K, V]) run(key K, f *flight[K, V], load func() (V, error)) {
	finished := false
	var m V
	defer func() {
		if !finished {
			f.err = errLoadPanicked
		}
		c.mu.Lock()
		if f.err == nil {
			cur := c.snapshot.Load()
			if f.e = cur.find(key); f.e == nil { // never replace
				f.e = newEntry(key, m, cur.gen+1, threadID())
				c.snapshot.Store(cur.with(f.e))
			}
		}
		delete(c.inflight, key)
		c.mu.Unlock()
		close(f.done)
	}()
	m, f.err = countedLoad(&c.c, load)
	if f.err == nil {
		widen(c.opts)
	}
	finished = true
}

// Get is get with the common hit written out: a key that is a snapshot
// key's very bytes, one compare for detection and one count, with no call
// before the decision (a call would make every hit save its arguments
// for the slow path). Anything else goes through get's path.
func (c *lockFree[K, V]) Get(key K, load func() (V, error)) (V, error) {
	s := c.snapshot.Load()
	if c.byBytes {
		slots := s.slots
		for i := range slots {
			if sameBytes(&slots[i].key, &key) {
				if e := slots[i].e; e.epoch <= s.gen {
					c.c.hits.inc()
					return e.model, nil
				}
				break
			}
		}
	}
	e, err := c.get(key, load)
	if err != nil {
		var zero V
		return zero, err
	}
	return e.model, nil
}

func (c *lockFree[K, V]) Peek(key K) (V, bool) {
	s := c.snapshot.Load()
	if e := s.hit(key, c.byBytes); e != nil && e.epoch <= s.gen {
		c.c.hits.inc()
		return e.model, true
	}
	if e := c.found(key); e != nil {
		return e.model, true
	}
	var zero V
	return zero, false
}

func (c *lockFree[K, V]) Hold(key K, load func() (V, error)) (Held[V], error) {
	e, err := c.get(key, load)
	if err != nil {
		return Held[V]{}, err
	}
	return hold(&c.d, e), nil
}

func (c *lockFree[K, V]) Barrier()          { c.d.barrier.Add(1) }
func (c *lockFree[K, V]) Records() *Records { return c.d.records }
func (c *lockFree[K, V]) Stats() Stats      { return c.c.stats() }
func (c *lockFree[K, V]) Describe() string  { return describe(LockFree, c.opts) }
func (c *lockFree[K, V]) Policy() Policy    { return LockFree }
