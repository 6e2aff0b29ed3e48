package aiheur

import (
	"os"
	"strings"
	"sync"
	"testing"

	"miotool/internal/aiheur/cache"
)

// Real model sets through the fixed caches from 64 goroutines: one load
// per key, every goroutine ranks with the same model.
func TestCachesShareRealModels(t *testing.T) {
	fsys := os.DirFS(modelsDir(t))
	for _, p := range []cache.Policy{cache.Locked, cache.LockFree} {
		t.Run(string(p), func(t *testing.T) {
			c, err := NewCaches(p, cache.Options{})
			if err != nil {
				t.Fatal(err)
			}
			const goroutines = 64
			models := make([]*TunaNet, goroutines)
			ktns := make([]*KTN, goroutines)
			errs := make([]error, goroutines)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if models[g], errs[g] = c.TunaNetFor(fsys, "gfx942"); errs[g] != nil {
						return
					}
					if _, errs[g] = models[g].Rank(exampleProblem); errs[g] != nil {
						return
					}
					ktns[g], errs[g] = c.KTNFor(fsys, "gfx942", KTNGroupFwd)
				}()
			}
			close(start)
			wg.Wait()
			for g := range models {
				if errs[g] != nil {
					t.Fatalf("goroutine %d: %v", g, errs[g])
				}
				if models[g] != models[0] || ktns[g] != ktns[0] || models[g].Model.Released() {
					t.Fatalf("goroutine %d got a different or released model", g)
				}
			}
			if s := c.TunaNet.Stats(); s.Loads != 1 || s.Replaced != 0 {
				t.Errorf("TunaNet cache: %v; want exactly one load", s)
			}
			if s := c.KTN.Stats(); s.Loads != 1 || s.Replaced != 0 {
				t.Errorf("KTN cache: %v; want exactly one load", s)
			}
			m, err := c.File(fsys, "gfx90a.tn.model", "gfx90a_tn")
			if err != nil || m.Name() != "gfx90a.tn.model" {
				t.Fatalf("File = %v, %v", m, err)
			}
			if s := c.Stats(); s.Loads != 3 || s.Hits+s.Misses != 2*goroutines+1 {
				t.Errorf("summed stats %v", s)
			}
			if !strings.HasPrefix(c.Describe(), string(p)+":") {
				t.Errorf("Describe() = %q", c.Describe())
			}
		})
	}
}

func TestCachesErrors(t *testing.T) {
	if _, err := NewCaches("bogus", cache.Options{}); err == nil {
		t.Error("NewCaches accepted an unknown policy")
	}
	c, err := NewCaches(cache.Unlocked, cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	empty := os.DirFS(t.TempDir())
	if _, err := c.TunaNetFor(empty, "gfx942"); err == nil {
		t.Error("TunaNetFor found a model in an empty directory")
	}
	if _, err := c.KTNFor(empty, "gfx942", KTNGroupFwd); err == nil {
		t.Error("KTNFor found a model in an empty directory")
	}
	if s := c.Stats(); s.LoadErrors != 2 {
		t.Errorf("Stats() = %v, want 2 load errors", s)
	}
}
