package cache

import (
	"errors"
	"maps"
	"sync"
	"sync/atomic"
)

// lockFree serves hits from an immutable snapshot map behind an atomic
// pointer, so readers never lock. Misses take mu only to find or start the
// key's single in-flight load; the loader publishes a new snapshot with the
// key added. Entries are never replaced, so a returned model stays valid.
type lockFree[K comparable, V Releaser] struct {
	snapshot atomic.Pointer[map[K]V]
	mu       sync.Mutex // guards inflight and snapshot publication
	inflight map[K]*flight[V]
	opts     Options
	c        counters
}

// flight is one in-progress load; done closes when v and err are final.
type flight[V any] struct {
	done chan struct{}
	v    V
	err  error
}

var errLoadPanicked = errors.New("model load panicked in another goroutine")

func newLockFree[K comparable, V Releaser](o Options) *lockFree[K, V] {
	c := &lockFree[K, V]{inflight: map[K]*flight[V]{}, opts: o}
	empty := map[K]V{}
	c.snapshot.Store(&empty)
	return c
}

func (c *lockFree[K, V]) Get(key K, load func() (V, error)) (V, error) {
	if m, ok := (*c.snapshot.Load())[key]; ok {
		c.c.hits.inc()
		return m, nil
	}
	c.mu.Lock()
	if m, ok := (*c.snapshot.Load())[key]; ok { // published while we waited for mu
		c.mu.Unlock()
		c.c.hits.inc()
		return m, nil
	}
	c.c.misses.inc()
	if f, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		c.c.waits.Add(1)
		<-f.done
		return f.v, f.err
	}
	f := &flight[V]{done: make(chan struct{})}
	c.inflight[key] = f
	c.mu.Unlock()
	c.run(key, f, load)
	return f.v, f.err
}

// run performs the load for f and publishes it. If load panics, waiters
// get an error instead of hanging and the panic continues in the caller.
func (c *lockFree[K, V]) run(key K, f *flight[V], load func() (V, error)) {
	finished := false
	defer func() {
		if !finished {
			f.err = errLoadPanicked
		}
		c.mu.Lock()
		if f.err == nil {
			next := maps.Clone(*c.snapshot.Load())
			next[key] = f.v
			c.snapshot.Store(&next)
		}
		delete(c.inflight, key)
		c.mu.Unlock()
		close(f.done)
	}()
	f.v, f.err = countedLoad(&c.c, load)
	if f.err == nil {
		widen(c.opts)
	}
	finished = true
}

func (c *lockFree[K, V]) Stats() Stats     { return c.c.stats() }
func (c *lockFree[K, V]) Describe() string { return describe(LockFree, c.opts) }
func (c *lockFree[K, V]) Policy() Policy   { return LockFree }
