package find

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points the temporary folder at one of its own, removed at the
// end: finds that write a find-db take MIOpen's lock, whose file is made
// under $TMPDIR/miopen-lockfiles, and must not leave it in the system's.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "scenario-find-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
