package find

import (
	"os"
	"testing"

	"miotool/internal/testutil"
)

// TestMain gives the tests a temporary folder of their own, so that the
// lock files of the finds they run are not left in the system's.
func TestMain(m *testing.M) { os.Exit(testutil.RunInOwnTempDir(m, "cmd-find-test-")) }
