package testutil

import (
	"fmt"
	"os"
	"testing"
)

// RunInOwnTempDir runs a package's tests with TMPDIR pointed at a folder
// of their own, removed at the end, and returns their exit code: finds
// that write a find-db take MIOpen's lock, whose file is made under
// $TMPDIR/miopen-lockfiles, and must not leave it in the system's.
// prefix names the folder.
func RunInOwnTempDir(m *testing.M, prefix string) int {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	return code
}
