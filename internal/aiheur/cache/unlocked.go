package cache

// unlocked is MIOpen's pre-fix cache: a static map with no lock.
//
//	auto it = models.find(key);
//	if(it != models.end()) return *it->second;
//	auto model = make_unique<...>(load(...));
//	models[key] = std::move(model);   // destroys any model stored meanwhile
//
// It is deliberately racy; see the package doc. The detector watches every
// access: none is synchronized, so each one from another thread since the
// last barrier is recorded as a race.
type unlocked[K comparable, V Releaser] struct {
	models map[K]*entry[K, V]
	// shadow is the detector's memory of the map's last write and read.
	shadow shadow
	opts   Options
	c      counters
	d      detector
}

func (u *unlocked[K, V]) get(key K, load func() (V, error)) (*entry[K, V], error) {
	me := threadID()
	unsynced(&u.d, &u.shadow, me, false, key)
	if e, ok := u.models[key]; ok {
		unsyncedEntry(&u.d, e, me)
		u.c.hits.inc()
		return e, nil
	}
	u.c.misses.Add(1)
	m, err := countedLoad(&u.c, load)
	if err != nil {
		return nil, err
	}
	widen(u.opts)
	// The move-assignment: store the new model, then destroy the old one,
	// which another caller may still be using.
	unsynced(&u.d, &u.shadow, me, true, key)
	old, replaced := u.models[key]
	e := newEntry(key, m, u.d.barrier.Load(), me)
	u.models[key] = e
	if replaced {
		u.c.replacedModels.Add(1)
		destroy(&u.d, old, me) // recorded before the release, which may crash a reader
		old.model.Release()
	}
	return e, nil
}

func (u *unlocked[K, V]) Get(key K, load func() (V, error)) (V, error) {
	e, err := u.get(key, load)
	if err != nil {
		var zero V
		return zero, err
	}
	return e.model, nil
}

// Peek is the pre-fix lookup alone (models.find), watched as Get's.
func (u *unlocked[K, V]) Peek(key K) (V, bool) {
	me := threadID()
	unsynced(&u.d, &u.shadow, me, false, key)
	if e, ok := u.models[key]; ok {
		unsyncedEntry(&u.d, e, me)
		u.c.hits.inc()
		return e.model, true
	}
	var zero V
	return zero, false
}

func (u *unlocked[K, V]) Hold(key K, load func() (V, error)) (Held[V], error) {
	e, err := u.get(key, load)
	if err != nil {
		return Held[V]{}, err
	}
	return hold(&u.d, e), nil
}

func (u *unlocked[K, V]) Barrier()          { u.d.barrier.Add(1) }
func (u *unlocked[K, V]) Records() *Records { return u.d.records }
func (u *unlocked[K, V]) Stats() Stats      { return u.c.stats() }
func (u *unlocked[K, V]) Describe() string  { return describe(Unlocked, u.opts) }
func (u *unlocked[K, V]) Policy() Policy    { return Unlocked }
