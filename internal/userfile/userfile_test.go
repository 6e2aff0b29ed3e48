package userfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// writeHelperEnv makes this test binary, run again, write the file it
// names as another user would (see TestAnotherUsersFileKeepsItsOwner).
const writeHelperEnv = "MIOTOOL_USERFILE_TEST_WRITE"

func TestMain(m *testing.M) {
	if path := os.Getenv(writeHelperEnv); path != "" {
		if err := Write(path, []byte("written by another user\n"), Options{}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The common umask, so that a mode the umask decides (0664 becoming
	// 0644) shows: under umask 002 it would not.
	syscall.Umask(0o022)
	os.Exit(m.Run())
}

const oldBytes = "the user's old bytes, longer than the new ones\n"

func writeFile(t *testing.T, path, data string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// fixture is a folder with the file a case writes (path) and what it
// checks afterwards.
type fixture struct {
	dir, path string
	// same are the names that must show the new bytes and be the file
	// they were (a hard link, a symlink's target).
	same   []string
	before map[string]fs.FileInfo
	// link is a path that must still be a symbolic link.
	link string
}

func newFixture(t *testing.T, kind string) *fixture {
	t.Helper()
	dir := t.TempDir()
	fx := &fixture{dir: dir, path: filepath.Join(dir, "out"), before: map[string]fs.FileInfo{}}
	switch kind {
	case "new":
	case "one link":
		writeFile(t, fx.path, oldBytes, 0o664)
	case "hard links":
		writeFile(t, fx.path, oldBytes, 0o664)
		other := filepath.Join(dir, "other")
		if err := os.Link(fx.path, other); err != nil {
			t.Fatal(err)
		}
		fx.same = []string{fx.path, other}
	case "symlink":
		real := filepath.Join(dir, "real")
		writeFile(t, real, oldBytes, 0o664)
		if err := os.Symlink("real", fx.path); err != nil {
			t.Fatal(err)
		}
		fx.same, fx.link = []string{real}, fx.path
	case "dangling symlink":
		if err := os.Symlink("real", fx.path); err != nil {
			t.Fatal(err)
		}
		fx.link = fx.path
	default:
		t.Fatalf("no fixture %q", kind)
	}
	for _, p := range fx.same {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		fx.before[p] = info
	}
	return fx
}

// Each kind of file gets the new bytes and stays the file it was: the
// right method, the mode kept exactly (0664, which the umask would make
// 0644), hard links and symlinks kept, nothing left beside it.
func TestWriteKeepsTheFile(t *testing.T) {
	for _, tt := range []struct {
		kind     string
		opts     Options
		method   Method
		why      string
		wantMode fs.FileMode
		// created is the file a dangling symlink's write creates.
		created string
		files   int // in the folder afterwards
	}{
		{kind: "new", method: Rename, wantMode: 0o644, files: 1},
		{kind: "new", opts: Options{NewMode: 0o664}, method: Rename, wantMode: 0o664, files: 1},
		{kind: "one link", method: Rename, wantMode: 0o664, files: 1},
		{kind: "hard links", method: InPlace, why: "has 2 hard links", wantMode: 0o664, files: 2},
		{kind: "hard links", opts: Options{Backup: "BACKUP"}, method: InPlace, why: "has 2 hard links", wantMode: 0o664, files: 2},
		{kind: "symlink", method: InPlace, why: "is a symbolic link to real", wantMode: 0o664, files: 2},
		{kind: "dangling symlink", opts: Options{NewMode: 0o640}, method: InPlace, why: "is a symbolic link to real, which does not exist yet",
			wantMode: 0o640, created: "real", files: 2},
	} {
		t.Run(fmt.Sprintf("%s %+v", tt.kind, tt.opts), func(t *testing.T) {
			fx := newFixture(t, tt.kind)
			if tt.opts.Backup != "" {
				tt.opts.Backup = filepath.Join(fx.dir, "backup")
			}
			plan, err := PlanFor(fx.path)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Method != tt.method || plan.Why != tt.why {
				t.Fatalf("plan %v %q, want %v %q", plan.Method, plan.Why, tt.method, tt.why)
			}
			if err := Write(fx.path, []byte("new\n"), tt.opts); err != nil {
				t.Fatal(err)
			}
			if got := read(t, fx.path); got != "new\n" {
				t.Errorf("%s reads %q", fx.path, got)
			}
			check := append([]string{fx.path}, fx.same...)
			if tt.created != "" {
				check = append(check, filepath.Join(fx.dir, tt.created))
			}
			for _, p := range check {
				info, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if info.Mode().Perm() != tt.wantMode {
					t.Errorf("%s: mode %04o, want %04o", filepath.Base(p), info.Mode().Perm(), tt.wantMode)
				}
				if got := read(t, p); got != "new\n" {
					t.Errorf("%s reads %q", filepath.Base(p), got)
				}
				if before := fx.before[p]; before != nil && !os.SameFile(before, info) {
					t.Errorf("%s was replaced by another file", filepath.Base(p))
				}
			}
			if fx.link != "" {
				if info, err := os.Lstat(fx.link); err != nil || info.Mode()&fs.ModeSymlink == 0 {
					t.Errorf("the symbolic link was replaced: %v", err)
				}
			}
			if entries, _ := os.ReadDir(fx.dir); len(entries) != tt.files {
				t.Errorf("the folder holds %d files, want %d: %v", len(entries), tt.files, entries)
			}
		})
	}
}

// A write to a device is a write into it; a folder is refused.
func TestWriteToWhatIsNoRegularFile(t *testing.T) {
	if _, err := os.Stat("/dev/null"); err != nil {
		t.Skip("no /dev/null here")
	}
	plan, err := PlanFor("/dev/null")
	if err != nil || plan.Method != InPlace || plan.Why != "is a character device" {
		t.Fatalf("plan %+v, %v", plan, err)
	}
	if err := Write("/dev/null", []byte("x"), Options{Sync: true}); err != nil {
		t.Fatalf("writing /dev/null: %v", err)
	}
	if info, err := os.Stat("/dev/null"); err != nil || info.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is no longer a device: %v", err)
	}
	dir := t.TempDir()
	if err := Write(dir, []byte("x"), Options{}); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("writing a folder: %v, want EISDIR", err)
	}
}

// failHalfWay writes half the bytes and fails as a full disk does.
func failHalfWay(f *os.File, data []byte) error {
	if _, err := f.Write(data[:len(data)/2]); err != nil {
		return err
	}
	return syscall.ENOSPC
}

// A write that fails part-way leaves the file as it was: a Rename never
// touched it, and an in-place write puts its backup back. Without a
// backup, an in-place write says that it failed.
func TestAFailedWriteLeavesTheFileAsItWas(t *testing.T) {
	for _, tt := range []struct {
		kind   string
		backup bool
		kept   bool
	}{
		{"one link", false, true},
		{"hard links", true, true},
		{"symlink", true, true},
		{"hard links", false, false},
	} {
		t.Run(fmt.Sprintf("%s backup=%v", tt.kind, tt.backup), func(t *testing.T) {
			fx := newFixture(t, tt.kind)
			opts := Options{WriteFunc: failHalfWay, Sync: true}
			if tt.backup {
				opts.Backup = filepath.Join(fx.dir, "backup")
			}
			entries, _ := os.ReadDir(fx.dir)
			err := Write(fx.path, bytes.Repeat([]byte("new bytes\n"), 20), opts)
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("want the write's error, got %v", err)
			}
			if !tt.kept {
				return
			}
			for _, p := range append([]string{fx.path}, fx.same...) {
				if got := read(t, p); got != oldBytes {
					t.Errorf("%s after a failed write: %q", filepath.Base(p), got)
				}
				if before := fx.before[p]; before != nil {
					if info, _ := os.Stat(p); !os.SameFile(before, info) {
						t.Errorf("%s was replaced by another file", filepath.Base(p))
					}
				}
			}
			if after, _ := os.ReadDir(fx.dir); len(after) != len(entries) {
				t.Errorf("left beside the file: %v", after)
			}
		})
	}
}

// A writer killed while it rewrote a file in place leaves the old bytes
// whole in the backup, which ReadBackup reads and Restore puts back, in
// place.
func TestRestorePutsTheOldBytesBack(t *testing.T) {
	fx := newFixture(t, "hard links")
	backup := filepath.Join(fx.dir, "backup")
	if restored, err := Restore(fx.path, backup, Options{}); restored || err != nil {
		t.Fatalf("with no backup: restored %v, %v", restored, err)
	}
	// What a killed writer leaves: the backup, and the file cut short.
	writeFile(t, backup, oldBytes, 0o664)
	if err := os.Truncate(fx.path, 7); err != nil {
		t.Fatal(err)
	}
	if data, ok, err := ReadBackup(backup); !ok || err != nil || string(data) != oldBytes {
		t.Fatalf("ReadBackup: %q %v %v", data, ok, err)
	}
	// A new write refuses to replace the only whole copy.
	if err := Write(fx.path, []byte("new\n"), Options{Backup: backup}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a write over a backup left behind: %v, want it refused", err)
	}
	if restored, err := Restore(fx.path, backup, Options{Sync: true}); !restored || err != nil {
		t.Fatalf("restored %v, %v", restored, err)
	}
	for _, p := range fx.same {
		if got := read(t, p); got != oldBytes {
			t.Errorf("%s: %q", filepath.Base(p), got)
		}
		if info, _ := os.Stat(p); !os.SameFile(fx.before[p], info) {
			t.Errorf("%s was replaced by another file", filepath.Base(p))
		}
	}
	if _, err := os.Stat(backup); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the backup is still there: %v", err)
	}
}

// A file of an owner or group that the writer could not give a new file
// is written in place, so that it keeps them.
func TestAFileOfAnotherOwnerIsWrittenInPlace(t *testing.T) {
	saved := ids
	t.Cleanup(func() { ids = saved })
	for _, tt := range []struct {
		name string
		// the writer's user and groups, from the file's owner and group
		euid, egid, group int
		method            Method
		why               string
	}{
		{"another user", 1, 0, 0, InPlace, "belongs to user %[1]d"},
		{"a group not the writer's", 0, 1, 2, InPlace, "belongs to group %[2]d, not one of this user's"},
		{"one of the writer's groups", 0, 1, 0, Rename, ""},
		{"the writer's own", 0, 0, 0, Rename, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			writeFile(t, path, oldBytes, 0o640)
			uid, gid := os.Geteuid(), os.Getegid()
			if uid == 0 { // a writer of the file's owner must not be root
				uid, gid = 4321, 4322
				if err := os.Chown(path, uid, gid); err != nil {
					t.Fatal(err)
				}
			}
			ids.euid = func() int { return uid + tt.euid }
			ids.egid = func() int { return gid + tt.egid }
			ids.groups = func() ([]int, error) { return []int{gid + tt.group}, nil }
			before, _ := os.Stat(path)
			why := ""
			if tt.why != "" {
				why = fmt.Sprintf(tt.why, uid, gid)
			}
			plan, err := PlanFor(path)
			if err != nil || plan.Method != tt.method || plan.Why != why {
				t.Fatalf("plan %v %q, %v; want %v %q", plan.Method, plan.Why, err, tt.method, why)
			}
			if os.Geteuid() != 0 && tt.method == Rename {
				return // the file's group may be one a user cannot give
			}
			if err := Write(path, []byte("new\n"), Options{}); err != nil {
				t.Fatal(err)
			}
			after, _ := os.Stat(path)
			if same := os.SameFile(before, after); same != (tt.method == InPlace) {
				t.Errorf("the same file afterwards: %v", same)
			}
		})
	}
}

// A file that belongs to another user, written by a user who may write it
// but could not give a new file its owner, is written in place and keeps
// its owner: a real writer of a third user. Only root can set this up.
func TestAnotherUsersFileKeepsItsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another user and run a writer as a third")
	}
	dir := t.TempDir()
	for d := filepath.Dir(filepath.Dir(dir)); d != filepath.Dir(d); d = filepath.Dir(d) {
		if info, err := os.Stat(d); err != nil || info.Mode().Perm()&0o001 == 0 {
			t.Skipf("user 65534 cannot reach the temporary folder: %s is not open to others", d)
		}
	}
	// The other user must reach the folder and run a copy of this binary.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "writer.test")
	writeFile(t, bin, string(self), 0o755)
	path := filepath.Join(dir, "shared")
	writeFile(t, path, oldBytes, 0o666)
	if err := os.Chown(path, 4321, 4321); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(path)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), writeHelperEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the writer as user 65534: %v: %s", err, out)
	}
	after, _ := os.Stat(path)
	st := after.Sys().(*syscall.Stat_t)
	if st.Uid != 4321 || st.Gid != 4321 || !os.SameFile(before, after) || after.Mode().Perm() != 0o666 {
		t.Errorf("owner %d:%d mode %04o, same file %v; want 4321:4321 0666, the same file", st.Uid, st.Gid, after.Mode().Perm(), os.SameFile(before, after))
	}
	if got := read(t, path); got != "written by another user\n" {
		t.Errorf("content %q", got)
	}
}

// Root keeps another owner's file's owner on a rename too.
func TestARenameKeepsTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another owner to set this up")
	}
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, oldBytes, 0o640)
	if err := os.Chown(path, 4321, 4322); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new\n"), Options{}); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	st := info.Sys().(*syscall.Stat_t)
	if st.Uid != 4321 || st.Gid != 4322 || info.Mode().Perm() != 0o640 {
		t.Errorf("owner %d:%d mode %04o, want 4321:4322 0640", st.Uid, st.Gid, info.Mode().Perm())
	}
}

// Staged writes commit together: a file that cannot be staged leaves the
// others as they were, and Discard removes what was written beside them.
func TestStageThenCommitOrDiscard(t *testing.T) {
	fx := newFixture(t, "one link")
	s, err := Stage(fx.path, []byte("new\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.InPlace() {
		t.Fatal("a file with one link is staged in place")
	}
	if got := read(t, fx.path); got != oldBytes {
		t.Fatalf("staging changed the file: %q", got)
	}
	s.Discard()
	if entries, _ := os.ReadDir(fx.dir); len(entries) != 1 {
		t.Fatalf("Discard left %v", entries)
	}
	if _, err := Stage(filepath.Join(fx.dir, "no", "such", "folder"), []byte("x"), Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("staging into a missing folder: %v", err)
	}
}
