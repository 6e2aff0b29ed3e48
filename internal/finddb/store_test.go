package finddb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// storeFile is Store with no context to end it and only a lock timeout.
func storeFile(path string, r Record, lockTimeout time.Duration) (Stored, error) {
	return Store(context.Background(), path, r, StoreOptions{LockTimeout: lockTimeout})
}

func rec(key string, solver string, ms float64) Record {
	return Record{Key: key, Entries: []Entry{{solver, ms, 0, "algo"}}}
}

func writeFile(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}

func TestStoreFileKeepsTheFileAndItsMode(t *testing.T) {
	for _, tt := range []struct {
		name     string
		existing string // "" with mode 0: no file
		mode     os.FileMode
		want     string
		wantMode os.FileMode
	}{
		{"new file is 0644", "", 0, "k=S:0.25,0,algo\n", 0o644},
		{"0600 stays 0600, garbage stays", "# mine\r\njunk\r\n", 0o600, "# mine\r\njunk\r\nk=S:0.25,0,algo\r\n", 0o600},
		{"0664 stays 0664, other items stay", "k=Miopen:0.0516391234,0,x\n", 0o664, "k=Miopen:0.0516391234,0,x;S:0.25,0,algo\n", 0o664},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db", "x.ufdb.txt")
			if tt.mode != 0 {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, tt.existing, tt.mode)
			}
			if _, err := storeFile(path, rec("k", "S", 0.25), time.Second); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			info, _ := os.Stat(path)
			if string(got) != tt.want || info.Mode().Perm() != tt.wantMode {
				t.Fatalf("file %q mode %04o, want %q %04o", got, info.Mode().Perm(), tt.want, tt.wantMode)
			}
			if _, err := os.Stat(path + ".lock"); err != nil {
				t.Errorf("no lock file beside the db: %v", err)
			}
		})
	}
}

func TestStoreFileKeepsTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another owner to set this up")
	}
	path := filepath.Join(t.TempDir(), "x.ufdb.txt")
	writeFile(t, path, "a=X:1,0,x\n", 0o644)
	if err := os.Chown(path, 4321, 4322); err != nil {
		t.Fatal(err)
	}
	if _, err := storeFile(path, rec("k", "S", 1), time.Second); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(path)
	st := info.Sys().(*syscall.Stat_t)
	if st.Uid != 4321 || st.Gid != 4322 {
		t.Fatalf("owner %d:%d, want 4321:4322", st.Uid, st.Gid)
	}
}

func TestStoreFileLeavesAReadOnlyFileAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ufdb.txt")
	writeFile(t, path, "a=X:1,0,x\n", 0o444)
	_, err := storeFile(path, rec("k", "S", 1), time.Second)
	if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "not replaced") {
		t.Fatalf("want a read-only error, got %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "a=X:1,0,x\n" {
		t.Fatalf("a read-only file changed: %q", got)
	}
}

func TestStoreFileFollowsASymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "elsewhere.txt")
	writeFile(t, real, "a=X:1,0,x\n", 0o640)
	link := filepath.Join(dir, "x.ufdb.txt")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, err := storeFile(link, rec("k", "S", 1), time.Second); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced by a file")
	}
	if got, _ := os.ReadFile(real); string(got) != "a=X:1,0,x\nk=S:1,0,algo\n" {
		t.Fatalf("target %q", got)
	}
}

// Temporary files of writers killed before their rename are removed by the
// next writer: miotool's own, and the numbered ones of earlier versions.
func TestStoreFileRemovesDeadWritersTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.ufdb.txt")
	writeFile(t, path, "a=X:1,0,x\n", 0o644)
	stale := []string{path + tmpSuffix, path + ".tmp123456", path + ".tmp9"}
	for _, s := range stale {
		writeFile(t, s, "half a fi", 0o600)
	}
	others := []string{path + ".tmpl", filepath.Join(dir, "other.ufdb.txt.tmp1"), path + ".temp"}
	for _, s := range others {
		writeFile(t, s, "not ours", 0o600)
	}
	if _, err := storeFile(path, rec("k", "S", 1), time.Second); err != nil {
		t.Fatal(err)
	}
	for _, s := range stale {
		if _, err := os.Stat(s); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind", filepath.Base(s))
		}
	}
	for _, s := range others {
		if _, err := os.Stat(s); err != nil {
			t.Errorf("%s, not a temporary file of this db, was removed", filepath.Base(s))
		}
	}
}

// A write that fails half way (disk full, a crash) leaves the file as it
// was: the new bytes go to a temporary file that replaces the original
// only when complete.
func TestAFailedWriteLeavesTheFileAsItWas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ufdb.txt")
	orig := "a=X:1,0,x\nb=Y:2,0,y\n"
	writeFile(t, path, orig, 0o644)
	saved := writeBody
	t.Cleanup(func() { writeBody = saved })
	writeBody = func(f *os.File, data []byte) error {
		if _, err := f.Write(data[:len(data)/2]); err != nil {
			return err
		}
		return syscall.ENOSPC
	}
	_, err := storeFile(path, rec("k", "S", 1), time.Second)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("want the write's error, got %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != orig {
		t.Fatalf("a failed write changed the file: %q", got)
	}
	if _, err := os.Stat(path + tmpSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Error("the temporary file of a failed write was left behind")
	}
}

// Readers that take no lock (MIOpen, another tool) while miotool writes:
// every read is a complete file holding every record stored before the
// read began, never an empty or cut-short one.
func TestReadersWithoutTheLockSeeCompleteFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ufdb.txt")
	// A file large enough that writing it in place would take long
	// enough to be seen half done.
	var sb strings.Builder
	sb.WriteString("# user's header\n")
	for i := range 2000 {
		fmt.Fprintf(&sb, "miopen%d=GemmFwd1x1_0_1:0.052681,0,miopenConvolutionFwdAlgoGEMM;ConvBinWinogradRxSf3x2:0.103077,0,miopenConvolutionFwdAlgoWinograd\n", i)
	}
	seed := sb.String()
	writeFile(t, path, seed, 0o644)
	const writers, each = 4, 10
	reads, err := readWhileWriting(path, writers, each, func(read int, data []byte, before []string) error {
		if !bytes.HasPrefix(data, []byte(seed)) || !bytes.HasSuffix(data, []byte("\n")) {
			return fmt.Errorf("read %d is cut short or lost the original lines (%d bytes): %q", read, len(data), data[max(0, len(data)-80):])
		}
		db := Parse(path, data[len(seed):]) // the records stored after the seed
		if len(db.Warnings) != 0 {
			return fmt.Errorf("read %d has a torn line: %v", read, db.Warnings)
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
	db, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if db.Len() != 2000+writers*each {
		t.Fatalf("keys = %d, want %d; warnings %v", db.Len(), 2000+writers*each, db.Warnings)
	}
	t.Logf("%d reads during %d stores", reads, writers*each)
}

// writersRunning counts readWhileWriting's writer goroutines still running.
var writersRunning atomic.Int32

// readWhileWriting stores each records from each of writers goroutines
// while the caller's goroutine reads path without the lock and passes each
// read, with the keys stored before it began, to check. It stops at the
// first failure, a check's or a writer's, and returns only once every
// writer has returned: a failing test leaves no writer behind to write
// into a folder being removed.
func readWhileWriting(path string, writers, each int, check func(read int, data []byte, before []string) error) (int, error) {
	return readWhileWritingWith(path, writers, each, os.ReadFile, check)
}

// readWhileWritingWith is readWhileWriting with reads made by read.
func readWhileWritingWith(path string, writers, each int, read func(string) ([]byte, error), check func(read int, data []byte, before []string) error) (int, error) {
	var (
		mu     sync.Mutex
		stored []string
		wg     sync.WaitGroup
		stop   = make(chan struct{})
		errs   = make(chan error, writers)
	)
	for w := range writers {
		writersRunning.Add(1)
		wg.Go(func() {
			defer writersRunning.Add(-1)
			for i := range each {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, i)
				if _, err := storeFile(path, rec(key, "S", float64(i)), 30*time.Second); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				stored = append(stored, key)
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reads := 0
	var failed error
	for finished := false; !finished && failed == nil; {
		select {
		case <-done:
			finished = true
		case err := <-errs:
			failed = err
			continue
		default:
		}
		mu.Lock()
		before := append([]string(nil), stored...)
		mu.Unlock()
		data, err := read(path)
		if err == nil {
			err = check(reads, data, before)
		}
		reads++
		failed = err
	}
	close(stop)
	<-done
	close(errs)
	if failed == nil {
		failed = <-errs // nil when the channel is empty
	}
	return reads, failed
}

// A failing check ends readWhileWriting only after its writers are done.
func TestReadWhileWritingJoinsItsWritersOnFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ufdb.txt")
	writeFile(t, path, "a=X:1,0,x\n", 0o644)
	_, err := readWhileWriting(path, 4, 10, func(int, []byte, []string) error { return errors.New("fails at once") })
	if err == nil || err.Error() != "fails at once" {
		t.Fatalf("want the check's failure, got %v", err)
	}
	if n := writersRunning.Load(); n != 0 {
		t.Fatalf("%d writers still running after readWhileWriting returned", n)
	}
}

func TestStoreFileUnwritableFolder(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	writeFile(t, f, "", 0o644)
	if _, err := storeFile(filepath.Join(f, "x.ufdb.txt"), rec("k", "S", 1), time.Second); err == nil {
		t.Fatal("want an error for a path under a regular file")
	}
	if os.Geteuid() == 0 {
		return // root writes into read-only folders
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	if _, err := storeFile(filepath.Join(dir, "x.ufdb.txt"), rec("k", "S", 1), time.Second); err == nil {
		t.Fatal("want an error for a read-only folder")
	}
}

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, "", 0o644)
	for _, tt := range []struct {
		path      string
		notFolder bool
	}{
		{dir, false},
		{filepath.Join(dir, "new", "deeper"), false},
		{file, true},
		{filepath.Join(file, "db"), true},
		{"/proc/self", false},
	} {
		err := CheckDir(tt.path)
		if errors.Is(err, ErrNotAFolder) != tt.notFolder {
			t.Errorf("CheckDir(%s) = %v, want not-a-folder %v", tt.path, err, tt.notFolder)
		}
	}
}

func TestStoreFileConcurrentWritersLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.ufdb.txt")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := storeFile(path, rec(fmt.Sprintf("k%d", i), "S", float64(i)), 30*time.Second); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	db, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if db.Len() != 16 {
		t.Fatalf("records = %d, want 16", db.Len())
	}
}

// What is not a regular file, as the db or as its lock, is refused at
// once with an error saying what it is: a FIFO's open would block find
// forever, and no signal ends a goroutine blocked in open(2).
func TestWhatIsNotARegularFileIsRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(t *testing.T, path string) // makes path (the db or its lock)
		lock bool                            // path is the db's miotool lock
		want string
	}{
		{"FIFO as the db", mkfifo, false, "named pipe (FIFO)"},
		{"FIFO as the lock", mkfifo, true, "named pipe (FIFO)"},
		{"socket as the db", mksocket, false, "socket"},
		// A device of the test's own: a store that failed to refuse it
		// must not replace a device of the system's.
		{"symlink to a device as the db", func(t *testing.T, path string) {
			dev := filepath.Join(filepath.Dir(path), "null")
			if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
				t.Skipf("cannot make a device node here: %v", err)
			}
			symlink(t, dev, path)
		}, false, "character device"},
		{"symlink to a FIFO as the db", func(t *testing.T, path string) {
			mkfifo(t, path+".fifo")
			symlink(t, path+".fifo", path)
		}, false, "named pipe (FIFO)"},
		{"folder as the db", func(t *testing.T, path string) { mkdir(t, path) }, false, "a folder"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// A short folder: a socket's path must fit in 108 bytes.
			dir, err := os.MkdirTemp("", "fdb")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			db := filepath.Join(dir, "x.ufdb.txt")
			made := db
			if tt.lock {
				made = db + ".lock"
			}
			tt.make(t, made)
			done := startStore(t, context.Background(), db, rec("k", "S", 1), StoreOptions{LockTimeout: time.Second})
			var o storeOutcome
			select {
			case o = <-done:
			case <-time.After(30 * time.Second):
				// Unblock the open so the goroutine ends with the test.
				if f, err := os.OpenFile(made, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				t.Fatalf("the write is still blocked on %s after 30 s", tt.name)
			}
			if !errors.Is(o.err, ErrNotRegular) || !strings.Contains(o.err.Error(), tt.want) || !strings.Contains(o.err.Error(), made) {
				t.Fatalf("want an error naming %s as %s, got %v", made, tt.want, o.err)
			}
			if tt.lock {
				return
			}
			if _, err := Load(db); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load: want not a regular file, got %v", err)
			}
		})
	}
}

// A symlink loop on the way to the db is reported as one, with its path,
// not as "mkdir ...: file exists".
func TestASymlinkLoopIsReportedAsOne(t *testing.T) {
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop")
	symlink(t, loop, loop)
	selfDB := filepath.Join(dir, "self.ufdb.txt")
	symlink(t, selfDB, selfDB)
	for _, db := range []string{filepath.Join(loop, "x.ufdb.txt"), selfDB} {
		_, err := storeFile(db, rec("k", "S", 1), time.Second)
		if !errors.Is(err, syscall.ELOOP) || !strings.Contains(err.Error(), "too many levels of symbolic links") || strings.Contains(err.Error(), "file exists") {
			t.Errorf("%s: want a symlink loop, got %v", db, err)
		}
		if !strings.Contains(fmt.Sprint(err), filepath.Dir(db)) {
			t.Errorf("%s: the error does not name the path: %v", db, err)
		}
	}
	if _, err := Load(selfDB); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Load of a looping db: %v", err)
	}
	// A looping user-db folder can never be one: a usage error at once.
	if err := CheckDir(loop); !errors.Is(err, ErrNotAFolder) || !errors.Is(err, syscall.ELOOP) {
		t.Errorf("CheckDir of a loop: %v", err)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mksocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
}
