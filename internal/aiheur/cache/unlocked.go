package cache

// unlocked is MIOpen's pre-fix cache: a static map with no lock.
//
//	auto it = models.find(key);
//	if(it != models.end()) return *it->second;
//	auto model = make_unique<...>(load(...));
//	models[key] = std::move(model);   // destroys any model stored meanwhile
//
// It is deliberately racy; see the package doc.
type unlocked[K comparable, V Releaser] struct {
	models map[K]V
	opts   Options
	c      counters
}

func (u *unlocked[K, V]) Get(key K, load func() (V, error)) (V, error) {
	if m, ok := u.models[key]; ok {
		u.c.hits.inc()
		return m, nil
	}
	u.c.misses.inc()
	m, err := countedLoad(&u.c, load)
	if err != nil {
		var zero V
		return zero, err
	}
	widen(u.opts)
	// The move-assignment: store the new model, then destroy the old one,
	// which another caller may still be using.
	old, replaced := u.models[key]
	u.models[key] = m
	if replaced {
		u.c.replacedModels.Add(1)
		old.Release()
	}
	return m, nil
}

func (u *unlocked[K, V]) Stats() Stats     { return u.c.stats() }
func (u *unlocked[K, V]) Describe() string { return describe(Unlocked, u.opts) }
func (u *unlocked[K, V]) Policy() Policy   { return Unlocked }
