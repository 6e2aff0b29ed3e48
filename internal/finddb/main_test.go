package finddb

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points the temporary folder at one of its own, removed at the
// end, so MIOpen's lock files the tests create (under
// $TMPDIR/miopen-lockfiles) are not left in the system's.
func TestMain(m *testing.M) {
	if os.Getenv(lockHelperEnv) != "" {
		os.Exit(lockHelper())
	}
	dir, err := os.MkdirTemp("", "finddb-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
