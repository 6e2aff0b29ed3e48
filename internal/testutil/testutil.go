// Package testutil finds, for tests, the module's root and the reference
// data in the "shared" folder beside it (real MIOpen model files and
// find-dbs). Only tests import it; the tool itself never reads that folder.
package testutil

import (
	"os"
	"path/filepath"
	"testing"
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
