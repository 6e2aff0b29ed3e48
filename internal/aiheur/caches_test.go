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

// Holding real models through the caches: the fixed caches record nothing
// with 16 goroutines holding while they rank; the pre-fix cache records a
// race in the TunaNet cache as soon as a second goroutine reads what the
// first inserted, and a barrier in between orders the two.
func TestCachesHoldAndDetections(t *testing.T) {
	fsys := os.DirFS(modelsDir(t))
	for _, p := range []cache.Policy{cache.Locked, cache.LockFree} {
		t.Run(string(p), func(t *testing.T) {
			c, err := NewCaches(p, cache.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h, err := c.HoldTunaNet(fsys, "gfx942")
					if err != nil {
						t.Error(err)
						return
					}
					defer h.Done()
					if _, err := h.Model.Rank(exampleProblem); err != nil {
						t.Error(err)
					}
					k, err := c.HoldKTN(fsys, "gfx942", KTNGroupFwd)
					if err != nil {
						t.Error(err)
						return
					}
					k.Done()
					f, err := c.HoldFile(fsys, "gfx90a.tn.model", "gfx90a_tn")
					if err != nil || f.Model.Name() != "gfx90a.tn.model" {
						t.Errorf("HoldFile = %v, %v", f.Model, err)
						return
					}
					f.Done()
				}()
			}
			wg.Wait()
			c.Barrier()
			if d := c.Detections(); d.Any() {
				t.Errorf("detections %v", d)
			}
			if s := c.Stats(); s.Loads != 3 || s.Hits+s.Misses != 48 {
				t.Errorf("stats %v; want 3 loads of 48 gets", s)
			}
		})
	}
	t.Run("unlocked", func(t *testing.T) {
		var first []cache.Record
		var mu sync.Mutex
		c, err := NewCaches(cache.Unlocked, cache.Options{Records: cache.NewRecords(func(r cache.Record) {
			mu.Lock()
			first = append(first, r)
			mu.Unlock()
		})})
		if err != nil {
			t.Fatal(err)
		}
		// Each step on a goroutine of its own, ordered by the wait alone.
		step := func(fn func()) {
			done := make(chan struct{})
			go func() { defer close(done); fn() }()
			<-done
		}
		hold := func(arch string) func() {
			return func() {
				h, err := c.HoldTunaNet(fsys, arch)
				if err != nil {
					t.Error(err)
					return
				}
				h.Done()
			}
		}
		step(hold("gfx942"))
		c.Barrier()
		step(hold("gfx942"))
		if d := c.Detections(); d.Any() {
			t.Fatalf("detections %v across a barrier", d)
		}
		step(hold("gfx90a")) // inserts into the map the previous step read
		d := c.Detections()
		if d.Races.Count != 1 || d.Races.First.Cache != "TunaNet" || d.Races.First.Key != "gfx90a/TunaNet" ||
			d.Races.First.Access != "write" || d.Races.First.OtherAccess != "read" {
			t.Fatalf("detections %v, first race %+v; want the gfx90a insert racing with the gfx942 read", d, d.Races.First)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(first) != 1 || first[0].Kind != cache.KindRace {
			t.Errorf("first records reported as made: %+v", first)
		}
	})
}
