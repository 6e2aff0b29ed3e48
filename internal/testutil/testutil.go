// Package testutil holds what several packages' tests share: the module's
// root, the reference data in the "shared" folder beside it (real MIOpen
// model files and find-dbs), and the check of a committed PTX file. Only
// tests import it; the tool itself never reads that folder.
package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"miotool/internal/hip"
)

// ModuleRoot walks up from the test's working directory (its package) to
// the directory holding go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}

// Shared is the path of elem in the shared folder beside the module; the test
// is skipped, saying so, where that is absent.
func Shared(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{ModuleRoot(t), "..", "shared"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is absent (%v); this test needs the reference data beside the module", p, err)
	}
	return p
}

// CommittedPTX fails the test unless ptx, the committed PTX of the source
// file named file, was generated from text and has an entry for every
// kernel, and unless the source hands it out (carried is its PTX field).
func CommittedPTX(t testing.TB, file, text, ptx string, kernels []string, carried string) {
	t.Helper()
	first, body, _ := strings.Cut(ptx, "\n")
	if hip.MatchingPTX(file, text, ptx) == "" {
		t.Fatalf("the committed PTX was not generated from this %s (sha256 %s); its header is %q: run scripts/gen-ptx.sh", file, hip.SourceSHA256(text), first)
	}
	for _, k := range kernels {
		if !strings.Contains(body, ".entry "+k) {
			t.Errorf("the PTX of %s has no entry %s", file, k)
		}
	}
	if carried == "" {
		t.Errorf("the source of %s does not carry its PTX", file)
	}
}

// Go runs f on a goroutine of its own and joins it when t ends: after the
// test's deferred calls and the cleanups registered after this call (which
// release whatever f may be waiting on), it waits for f to return, and
// fails t if f has not returned within limit. A test that stops early on a
// failed assertion so leaves no goroutine of its own running. The channel
// is closed when f returns.
func Go(t testing.TB, limit time.Duration, f func()) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t.Cleanup(func() {
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			t.Errorf("a goroutine of the test was still running %v after the test ended", limit)
		}
	})
	return done
}
