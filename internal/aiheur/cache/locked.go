package cache

import "sync"

// locked is the fix: one mutex over find, load and insert, and emplace
// semantics, so an entry is written once and never replaced.
type locked[K comparable, V Releaser] struct {
	mu     sync.Mutex
	models map[K]V
	opts   Options
	c      counters
}

func (l *locked[K, V]) Get(key K, load func() (V, error)) (V, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m, ok := l.models[key]; ok {
		l.c.hits.inc()
		return m, nil
	}
	l.c.misses.inc()
	m, err := countedLoad(&l.c, load)
	if err != nil {
		var zero V
		return zero, err
	}
	widen(l.opts)
	// Emplace: under the lock the key cannot have appeared, but the insert
	// is written so that it could never overwrite a model anyway.
	if existing, ok := l.models[key]; ok {
		return existing, nil
	}
	l.models[key] = m
	return m, nil
}

func (l *locked[K, V]) Stats() Stats     { return l.c.stats() }
func (l *locked[K, V]) Describe() string { return describe(Locked, l.opts) }
func (l *locked[K, V]) Policy() Policy   { return Locked }
