package cache

import "sync"

// locked is the fix: one mutex over find, load and insert, and emplace
// semantics, so an entry is written once and never replaced.
type locked[K comparable, V Releaser] struct {
	mu sync.Mutex
	// epoch counts lock acquisitions: an insert records the one it was
	// made under. Every access holds mu, so each is ordered after every
	// earlier write and the detector has nothing to check.
	epoch  uint64
	models map[K]*entry[K, V]
	opts   Options
	c      counters
	d      detector
}

func (l *locked[K, V]) get(key K, load func() (V, error)) (*entry[K, V], error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	if e, ok := l.models[key]; ok {
		l.c.hits.inc()
		return e, nil
	}
	l.c.misses.Add(1)
	m, err := countedLoad(&l.c, load)
	if err != nil {
		return nil, err
	}
	widen(l.opts)
	// Emplace: under the lock the key cannot have appeared, but the insert
	// is written so that it could never overwrite a model anyway.
	if existing, ok := l.models[key]; ok {
		return existing, nil
	}
	e := newEntry(key, m, l.epoch, threadID())
	l.models[key] = e
	return e, nil
}

func (l *locked[K, V]) Get(key K, load func() (V, error)) (V, error) {
	e, err := l.get(key, load)
	if err != nil {
		var zero V
		return zero, err
	}
	return e.model, nil
}

func (l *locked[K, V]) Peek(key K) (V, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epoch++
	if e, ok := l.models[key]; ok {
		l.c.hits.inc()
		return e.model, true
	}
	var zero V
	return zero, false
}

func (l *locked[K, V]) Hold(key K, load func() (V, error)) (Held[V], error) {
	e, err := l.get(key, load)
	if err != nil {
		return Held[V]{}, err
	}
	return hold(&l.d, e), nil
}

func (l *locked[K, V]) Barrier()          { l.d.barrier.Add(1) }
func (l *locked[K, V]) Records() *Records { return l.d.records }
func (l *locked[K, V]) Stats() Stats      { return l.c.stats() }
func (l *locked[K, V]) Describe() string  { return describe(Locked, l.opts) }
func (l *locked[K, V]) Policy() Policy    { return Locked }
