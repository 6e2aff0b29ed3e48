package aiheur

import (
	"io/fs"

	"miotool/internal/aiheur/cache"
	"miotool/internal/aiheur/fdeep"
)

// Caches are a process's model caches, all under one policy: TunaNet and
// KTN model sets keyed by (arch, solver), single fdeep files by (path,
// key), as in the fix of ROCM-27477. They report their detections (see
// package cache) into one Records.
type Caches struct {
	TunaNet cache.Cache[cache.SetKey, *TunaNet]
	KTN     cache.Cache[cache.SetKey, *KTN]
	Files   cache.Cache[cache.FileKey, *fdeep.Model]
	records *cache.Records
}

// NewCaches makes empty caches with the given policy and options. The
// caches are named TunaNet, KTN and fdeep file in records; o.Records, if
// set, collects their detections (else the caches share a new one).
func NewCaches(p cache.Policy, o cache.Options) (*Caches, error) {
	if o.Records == nil {
		o.Records = cache.NewRecords(nil)
	}
	named := func(name string) cache.Options { n := o; n.Name = name; return n }
	tn, err := cache.New[cache.SetKey, *TunaNet](p, named("TunaNet"))
	if err != nil {
		return nil, err
	}
	ktn, err := cache.New[cache.SetKey, *KTN](p, named("KTN"))
	if err != nil {
		return nil, err
	}
	files, err := cache.New[cache.FileKey, *fdeep.Model](p, named("fdeep file"))
	if err != nil {
		return nil, err
	}
	return &Caches{TunaNet: tn, KTN: ktn, Files: files, records: o.Records}, nil
}

// Describe is the policy line shared by the three caches.
func (c *Caches) Describe() string { return c.TunaNet.Describe() }

// Stats sums the three caches' counters.
func (c *Caches) Stats() cache.Stats {
	var sum cache.Stats
	for _, s := range []cache.Stats{c.TunaNet.Stats(), c.KTN.Stats(), c.Files.Stats()} {
		sum.Hits += s.Hits
		sum.Misses += s.Misses
		sum.Loads += s.Loads
		sum.LoadErrors += s.LoadErrors
		sum.Waits += s.Waits
		sum.Replaced += s.Replaced
	}
	return sum
}

// Detections are what the three caches detected: races, published models
// destroyed, uses after free.
func (c *Caches) Detections() cache.Detections { return c.records.Detections() }

// Barrier declares that every goroutine that used the caches has
// synchronized with the caller and none is inside them (see
// cache.Cache.Barrier): call it where all users were joined.
func (c *Caches) Barrier() {
	c.TunaNet.Barrier()
	c.KTN.Barrier()
	c.Files.Barrier()
}

// TunaNetFor returns arch's TunaNet, loading it from fsys on a miss. The
// lookups below Peek first so that a hit makes no loader (a closure,
// allocated whenever it is made).
func (c *Caches) TunaNetFor(fsys fs.FS, arch string) (*TunaNet, error) {
	key := cache.SetKey{Arch: arch}
	if m, ok := c.TunaNet.Peek(key); ok {
		return m, nil
	}
	return c.TunaNet.Get(key, tunaNetLoader(fsys, arch))
}

// HoldTunaNet is TunaNetFor for a caller that calls Done on the result
// when it has finished with the model (see cache.Cache.Hold).
func (c *Caches) HoldTunaNet(fsys fs.FS, arch string) (cache.Held[*TunaNet], error) {
	return c.TunaNet.Hold(cache.SetKey{Arch: arch}, tunaNetLoader(fsys, arch))
}

func tunaNetLoader(fsys fs.FS, arch string) func() (*TunaNet, error) {
	return func() (*TunaNet, error) { return LoadTunaNet(fsys, arch) }
}

// KTNFor returns a KTN model set, loading it from fsys on a miss.
func (c *Caches) KTNFor(fsys fs.FS, arch, set string) (*KTN, error) {
	key := cache.SetKey{Arch: arch, Solver: set}
	if m, ok := c.KTN.Peek(key); ok {
		return m, nil
	}
	return c.KTN.Get(key, ktnLoader(fsys, arch, set))
}

// HoldKTN is KTNFor for a caller that calls Done when it has finished.
func (c *Caches) HoldKTN(fsys fs.FS, arch, set string) (cache.Held[*KTN], error) {
	return c.KTN.Hold(cache.SetKey{Arch: arch, Solver: set}, ktnLoader(fsys, arch, set))
}

func ktnLoader(fsys fs.FS, arch, set string) func() (*KTN, error) {
	return func() (*KTN, error) { return LoadKTN(fsys, arch, set) }
}

// File returns the fdeep model in file name of fsys under key, loading it
// on a miss (MIOpen's GetFdeepModel(path, key)).
func (c *Caches) File(fsys fs.FS, name, key string) (*fdeep.Model, error) {
	k := cache.FileKey{Path: name, Key: key}
	if m, ok := c.Files.Peek(k); ok {
		return m, nil
	}
	return c.Files.Get(k, fileLoader(fsys, name))
}

// HoldFile is File for a caller that calls Done when it has finished.
func (c *Caches) HoldFile(fsys fs.FS, name, key string) (cache.Held[*fdeep.Model], error) {
	return c.Files.Hold(cache.FileKey{Path: name, Key: key}, fileLoader(fsys, name))
}

func fileLoader(fsys fs.FS, name string) func() (*fdeep.Model, error) {
	return func() (*fdeep.Model, error) { return fdeep.LoadFS(fsys, name, fdeep.Options{}) }
}
