package cmdtest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// UserFiles is what a user has beside a run of the built binary: a
// working directory with a miotool.yaml, a find-db folder with a db file
// of their own, and a private temporary folder (MIOpen-style lock files go
// to $TMPDIR/miopen-lockfiles). A run must leave the config and the db as
// they were, by bytes, mode and inode, unless it is one that writes a
// find-db record.
type UserFiles struct {
	Dir, Config, DBDir, DB, Tmp string
}

// NewUserFiles makes the files under t.TempDir(). dbFile is the name of
// the user db file in the db folder (e.g. finddb.UserFile's base name).
func NewUserFiles(t *testing.T, dbFile string) *UserFiles {
	t.Helper()
	root := t.TempDir()
	u := &UserFiles{Dir: filepath.Join(root, "work"), DBDir: filepath.Join(root, "db"), Tmp: filepath.Join(root, "tmp")}
	for _, d := range []string{u.Dir, u.DBDir, u.Tmp, filepath.Join(root, "config")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	u.Config = filepath.Join(u.Dir, "miotool.yaml")
	u.DB = filepath.Join(u.DBDir, dbFile)
	write := func(path, data string, mode os.FileMode) {
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	write(u.Config, "# mine\nbackend: sim\n", 0o640)
	write(u.DB, "# my notes=keep\r\nkey=ConvImplicitGemmTiledFwd:notanumber,0,x;Mine:1,0\r\n", 0o600)
	return u
}

// Env is the environment a run sees: Env's clean one with the user's
// folders, their TMPDIR and MIOPEN_USER_DB_PATH, and MIOPEN_NAIVE_TIMEOUT=10
// as in ScenarioEnv, with extra ("NAME=value") over it.
func (u *UserFiles) Env(extra ...string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Dir(u.Dir),
		"XDG_CONFIG_HOME=" + filepath.Join(filepath.Dir(u.Dir), "config"),
		"TMPDIR=" + u.Tmp,
		"MIOPEN_USER_DB_PATH=" + u.DBDir,
		"MIOPEN_NAIVE_TIMEOUT=10",
	}
	return append(env, extra...)
}

// Files are the user's config and db, for Snapshot.
func (u *UserFiles) Files() []string { return []string{u.Config, u.DB} }

// CheckNoLockFiles fails when a run left a lock file in the user's
// temporary folder or beside the db.
func (u *UserFiles) CheckNoLockFiles(t *testing.T) {
	t.Helper()
	for _, pattern := range []string{filepath.Join(u.Tmp, "miopen-lockfiles", "*"), filepath.Join(u.DBDir, "*.lock")} {
		if left, _ := filepath.Glob(pattern); len(left) > 0 {
			t.Errorf("lock files left behind: %v", left)
		}
	}
}

// WaitExit waits at most limit for a process that was not signalled to
// end, and returns its exit status and standard output; one still running
// then fails the test.
func (s *Started) WaitExit(limit time.Duration) (code int, stdout string) {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(limit):
		s.t.Fatalf("still running after %v\nstderr %s", limit, s.Stderr())
	}
	_ = s.cmd.Wait()
	s.waited = true
	return s.cmd.ProcessState.ExitCode(), s.stdout.String()
}

// LastLine is s's last non-empty line.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// ResultJSON is the part of a miotool/result document the tests read.
type ResultJSON struct {
	Check    string           `json:"check"`
	Verdict  string           `json:"verdict"`
	ExitCode int              `json:"exit_code"`
	Status   string           `json:"status"`
	Summary  string           `json:"summary"`
	Counters map[string]int64 `json:"counters"`
	Tables   []struct {
		Title string `json:"title"`
		Rows  []struct {
			Cells []string `json:"cells"`
		} `json:"rows"`
	} `json:"tables"`
}

// ParseResult decodes one result document.
func ParseResult(t *testing.T, out string) ResultJSON {
	t.Helper()
	var r ResultJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not a result document: %v\n%s", err, out)
	}
	return r
}
