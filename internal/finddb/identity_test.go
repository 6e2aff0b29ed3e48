package finddb

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The db stays the user's file: a db with another hard link, one reached
// through a symbolic link, and one whose link names no file yet get the
// record where they are, keep their mode (0664, which the umask would make
// 0644) and leave nothing beside them.
func TestStoreKeepsEveryNameOfTheDB(t *testing.T) {
	const orig = "# mine\na=X:1,0,x\n"
	const want = orig + "k=S:1,0,algo\n"
	for _, tt := range []struct {
		name string
		// setup makes the db at path and returns the names that must
		// read the new db and stay the files they were.
		setup    func(t *testing.T, dir, path string) []string
		wantMode os.FileMode
	}{
		{"another hard link", func(t *testing.T, dir, path string) []string {
			writeFile(t, path, orig, 0o664)
			other := filepath.Join(dir, "mine.txt")
			if err := os.Link(path, other); err != nil {
				t.Fatal(err)
			}
			return []string{path, other}
		}, 0o664},
		{"a symbolic link", func(t *testing.T, dir, path string) []string {
			real := filepath.Join(dir, "real.txt")
			writeFile(t, real, orig, 0o664)
			symlink(t, "real.txt", path)
			return []string{real}
		}, 0o664},
		{"a symbolic link to a file not there yet", func(t *testing.T, dir, path string) []string {
			symlink(t, "real.txt", path)
			return nil
		}, newFileMode},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "x.ufdb.txt")
			names := tt.setup(t, dir, path)
			before := map[string]fs.FileInfo{}
			for _, n := range names {
				before[n], _ = os.Stat(n)
			}
			st, err := storeFile(path, rec("k", "S", 1), time.Second)
			if err != nil || !st.Written {
				t.Fatalf("stored %+v, %v", st, err)
			}
			wantText := want
			if len(names) == 0 {
				wantText = "k=S:1,0,algo\n"
				names = []string{filepath.Join(dir, "real.txt")}
			}
			for _, n := range names {
				info, err := os.Stat(n)
				if err != nil {
					t.Fatal(err)
				}
				if b := before[n]; b != nil && !os.SameFile(b, info) {
					t.Errorf("%s was replaced by another file", filepath.Base(n))
				}
				if got, _ := os.ReadFile(n); string(got) != wantText || info.Mode().Perm() != tt.wantMode {
					t.Errorf("%s: %q mode %04o, want %q %04o", filepath.Base(n), got, info.Mode().Perm(), wantText, tt.wantMode)
				}
			}
			if info, err := os.Lstat(path); tt.name != "another hard link" && (err != nil || info.Mode()&fs.ModeSymlink == 0) {
				t.Errorf("the symbolic link was replaced: %v", err)
			}
			for _, left := range []string{path + backupSuffix, path + tmpSuffix} {
				if _, err := os.Lstat(left); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s left behind", filepath.Base(left))
				}
			}
		})
	}
}

// An in-place write that fails half way (a full disk) puts the old bytes
// back under every name of the db.
func TestAFailedInPlaceWriteLeavesTheDBAsItWas(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.ufdb.txt")
	orig := "a=X:1,0,x\nb=Y:2,0,y\n"
	writeFile(t, path, orig, 0o644)
	other := filepath.Join(dir, "mine.txt")
	if err := os.Link(path, other); err != nil {
		t.Fatal(err)
	}
	saved := writeBody
	t.Cleanup(func() { writeBody = saved })
	writeBody = func(f *os.File, data []byte) error {
		if _, err := f.Write(data[:len(data)/2]); err != nil {
			return err
		}
		return syscall.ENOSPC
	}
	if _, err := storeFile(path, rec("k", "S", 1), time.Second); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("want the write's error, got %v", err)
	}
	for _, n := range []string{path, other} {
		if got, _ := os.ReadFile(n); string(got) != orig {
			t.Errorf("%s after a failed write: %q", filepath.Base(n), got)
		}
	}
	if _, err := os.Stat(path + backupSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the backup of a failed write that was put back is still there")
	}
}

// The killed-writer helper is this test binary run again: it stores a
// record into the db it is given, which has another hard link, writes half
// the new bytes, says "half" and waits to be killed.
const killedWriterEnv = "MIOTOOL_FINDDB_TEST_KILLED_WRITER"

func killedWriter() int {
	writeBody = func(f *os.File, data []byte) error {
		if _, err := f.Write(data[:len(data)/2]); err != nil {
			return err
		}
		fmt.Println("half")
		_, _ = io.Copy(io.Discard, os.Stdin) // until killed
		return errors.New("stdin closed before the kill")
	}
	if _, err := storeFile(os.Getenv(killedWriterEnv), rec("killed", "S", 1), 30*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return 1
}

// A writer killed half way through rewriting a db in place leaves the old
// db whole: in its backup, which Load reads while the db is cut short and
// the next Store puts back, under every name, before merging its own
// record.
func TestAWriterKilledHalfWayLeavesTheOldDBWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.ufdb.txt")
	var sb strings.Builder
	for i := range 200 {
		fmt.Fprintf(&sb, "old%d=GemmFwd1x1_0_1:0.052681,0,miopenConvolutionFwdAlgoGEMM\n", i)
	}
	orig := sb.String()
	writeFile(t, path, orig, 0o664)
	other := filepath.Join(dir, "mine.txt")
	if err := os.Link(path, other); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killedWriterEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
		waited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		stdin.Close()
		<-waited
	})
	select {
	case l := <-line:
		if l != "half\n" {
			t.Fatalf("the writer said %q, not that it wrote half", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the writer did not write half the db within 60 s")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-waited
	waited <- nil // for the cleanup

	if got, _ := os.ReadFile(other); bytes.Equal(got, []byte(orig)) {
		t.Fatal("the killed writer had not cut the db short: the test proves nothing")
	}
	db, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if db.Len() != 200 || len(db.Warnings) != 0 {
		t.Errorf("Load after the kill: %d keys, warnings %v; want the 200 of the old db", db.Len(), db.Warnings)
	}
	st, err := storeFile(path, rec("k", "S", 1), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Restored || len(st.Warnings) == 0 || !strings.Contains(st.Warnings[0].String(), "put back from x.ufdb.txt"+backupSuffix) {
		t.Errorf("the store does not say it put the old db back: %+v", st)
	}
	for _, n := range []string{path, other} {
		if got, _ := os.ReadFile(n); string(got) != orig+"k=S:1,0,algo\n" {
			t.Errorf("%s: the old db and the new record, not %d bytes ending %q", filepath.Base(n), len(got), got[max(0, len(got)-60):])
		}
	}
	if _, err := os.Stat(path + backupSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Error("the backup is still there after it was put back")
	}
}

// Readers without the lock that read the db with Load while writers
// rewrite it in place (it has another hard link) read complete dbs holding
// every record stored before the read began.
func TestLoadReadsCompleteDBsWhileTheyAreRewrittenInPlace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.ufdb.txt")
	var sb strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&sb, "miopen%d=GemmFwd1x1_0_1:0.052681,0,miopenConvolutionFwdAlgoGEMM\n", i)
	}
	writeFile(t, path, sb.String(), 0o644)
	if err := os.Link(path, filepath.Join(dir, "mine.txt")); err != nil {
		t.Fatal(err)
	}
	reads, err := readWhileWritingWith(path, 4, 10, func(string) ([]byte, error) {
		db, err := Load(path)
		if err != nil {
			return nil, err
		}
		return db.Bytes(), nil
	}, func(read int, data []byte, before []string) error {
		db := Parse(path, data)
		if len(db.Warnings) != 0 || db.Len() < 2000+len(before) {
			return fmt.Errorf("read %d: %d keys, %d stored before it began; warnings %v", read, db.Len(), len(before), db.Warnings)
		}
		for _, k := range before {
			if _, ok := db.Lookup(k); !ok {
				return fmt.Errorf("read %d lacks %s, stored before the read began", read, k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d reads during %d stores", reads, 40)
}
