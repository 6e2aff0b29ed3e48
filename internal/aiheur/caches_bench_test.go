package aiheur

import (
	"os"
	"testing"

	"miotool/internal/aiheur/cache"
)

// BenchmarkCachesTunaNetHit is the hit of the heuristic's own entry point,
// Caches.TunaNetFor (what every solver pick calls), under each fixed
// policy: the cache's hit plus what the entry point adds (allocs/op
// counts a loader made for a hit that never calls it).
func BenchmarkCachesTunaNetHit(b *testing.B) {
	fsys := os.DirFS(modelsDir(b))
	for _, p := range []cache.Policy{cache.Locked, cache.LockFree} {
		b.Run(string(p), func(b *testing.B) {
			c, err := NewCaches(p, cache.Options{})
			if err != nil {
				b.Fatal(err)
			}
			want, err := c.TunaNetFor(fsys, "gfx942")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if m, err := c.TunaNetFor(fsys, "gfx942"); err != nil || m != want {
					b.Fatalf("TunaNetFor = %p, %v; want the cached model", m, err)
				}
			}
		})
	}
}
