package finddb

import (
	"os"
	"testing"

	"miotool/internal/testutil"
)

// TestMain points the temporary folder at one of its own, removed at the
// end, so MIOpen's lock files the tests create (under
// $TMPDIR/miopen-lockfiles) are not left in the system's.
func TestMain(m *testing.M) {
	if os.Getenv(lockHelperEnv) != "" {
		os.Exit(lockHelper())
	}
	if os.Getenv(killedWriterEnv) != "" {
		os.Exit(killedWriter())
	}
	os.Exit(testutil.RunInOwnTempDir(m, "finddb-test-"))
}
