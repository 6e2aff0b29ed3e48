package aiheur

import (
	"io/fs"

	"miotool/internal/aiheur/cache"
	"miotool/internal/aiheur/fdeep"
)

// Caches are a process's model caches, all under one policy: TunaNet and
// KTN model sets keyed by (arch, solver), single fdeep files by (path,
// key), as in the fix of ROCM-27477.
type Caches struct {
	TunaNet cache.Cache[cache.SetKey, *TunaNet]
	KTN     cache.Cache[cache.SetKey, *KTN]
	Files   cache.Cache[cache.FileKey, *fdeep.Model]
}

// NewCaches makes empty caches with the given policy and options.
func NewCaches(p cache.Policy, o cache.Options) (*Caches, error) {
	tn, err := cache.New[cache.SetKey, *TunaNet](p, o)
	if err != nil {
		return nil, err
	}
	ktn, err := cache.New[cache.SetKey, *KTN](p, o)
	if err != nil {
		return nil, err
	}
	files, err := cache.New[cache.FileKey, *fdeep.Model](p, o)
	if err != nil {
		return nil, err
	}
	return &Caches{TunaNet: tn, KTN: ktn, Files: files}, nil
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

// TunaNetFor returns arch's TunaNet, loading it from fsys on a miss.
func (c *Caches) TunaNetFor(fsys fs.FS, arch string) (*TunaNet, error) {
	return c.TunaNet.Get(cache.SetKey{Arch: arch}, func() (*TunaNet, error) { return LoadTunaNet(fsys, arch) })
}

// KTNFor returns a KTN model set, loading it from fsys on a miss.
func (c *Caches) KTNFor(fsys fs.FS, arch, set string) (*KTN, error) {
	return c.KTN.Get(cache.SetKey{Arch: arch, Solver: set}, func() (*KTN, error) { return LoadKTN(fsys, arch, set) })
}

// File returns the fdeep model in file name of fsys under key, loading it
// on a miss (MIOpen's GetFdeepModel(path, key)).
func (c *Caches) File(fsys fs.FS, name, key string) (*fdeep.Model, error) {
	return c.Files.Get(cache.FileKey{Path: name, Key: key}, func() (*fdeep.Model, error) {
		return fdeep.LoadFS(fsys, name, fdeep.Options{})
	})
}
