package finddb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The lock helper is this test binary run again: it takes a lock the way
// another program does and holds it until its stdin closes.
const (
	lockHelperEnv = "MIOTOOL_FINDDB_TEST_LOCK"      // the file to lock
	lockKindEnv   = "MIOTOOL_FINDDB_TEST_LOCK_KIND" // "fcntl" (MIOpen's) or "flock" (miotool's)
)

// lockHelper takes the lock and says "locked" on stdout, then holds it
// until stdin closes. MIOpen's lock is a classic (per-process) fcntl
// record lock of the whole file taken with F_SETLKW, as
// boost::interprocess::file_lock takes it.
func lockHelper() int {
	path := os.Getenv(lockHelperEnv)
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch os.Getenv(lockKindEnv) {
	case "fcntl":
		lk := syscall.Flock_t{Type: syscall.F_WRLCK}
		err = syscall.FcntlFlock(f.Fd(), syscall.F_SETLKW, &lk)
	case "flock":
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	default:
		err = fmt.Errorf("unknown lock kind %q", os.Getenv(lockKindEnv))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// heldLock is a lock held by a helper process.
type heldLock struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error
}

// holdLock starts a helper process holding a lock of kind on path and
// returns once it holds it. The process is killed at the end of the test.
func holdLock(t *testing.T, path, kind string) *heldLock {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+path, lockKindEnv+"="+kind)
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
	h := &heldLock{cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
		h.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-h.done
	})
	select {
	case l := <-line:
		if l != "locked\n" {
			t.Fatalf("the lock helper said %q, not that it holds the lock", l)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the lock helper did not take its lock within 30 s")
	}
	return h
}

func (h *heldLock) pid() int { return h.cmd.Process.Pid }

// release ends the helper, which releases its lock.
func (h *heldLock) release(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("the lock helper: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the lock helper did not exit within 30 s of its stdin closing")
	}
}

// startStore runs Store on its own goroutine and returns the channel of
// its outcome. At the end of the test (before the files are removed) it
// cancels the write's context and waits for it to return, so a failing
// test leaves no writer behind.
func startStore(t *testing.T, ctx context.Context, path string, r Record, opts StoreOptions) <-chan storeOutcome {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan storeOutcome, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		st, err := Store(ctx, path, r, opts)
		out <- storeOutcome{st, err}
	}()
	t.Cleanup(func() {
		cancel()
		// A store blocked where no cancellation reaches (an open of a
		// FIFO) fails the test instead of hanging it; its goroutine is
		// left behind.
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Errorf("the store of %s was still running 30 s after the test ended", path)
		}
	})
	return out
}

type storeOutcome struct {
	st  Stored
	err error
}

// A write waits for a lock another process holds, MIOpen's or miotool's,
// says at once that it waits, for whom and how long at most, and
// proceeds when the lock is released.
func TestStoreWaitsForALockHeldByAnotherProcess(t *testing.T) {
	for _, kind := range []string{"fcntl", "flock"} {
		t.Run(kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.ufdb.txt")
			writeFile(t, path, "a=X:1,0,x\n", 0o644)
			lock, owner, pid := path+".lock", "miotool's", 0
			if kind == "fcntl" {
				var err error
				if lock, err = MIOpenLockFile(path, ""); err != nil {
					t.Fatal(err)
				}
				owner = "MIOpen's"
			}
			held := holdLock(t, lock, kind)
			if kind == "fcntl" {
				pid = held.pid() // a classic record lock names its holder
			}
			waits := make(chan LockWait, 4)
			const timeout = 10 * time.Minute
			done := startStore(t, context.Background(), path, rec("k", "S", 1), StoreOptions{LockTimeout: timeout, OnWait: func(w LockWait) { waits <- w }})
			var w LockWait
			select {
			case w = <-waits:
			case o := <-done:
				t.Fatalf("the write did not wait for the %s lock: %+v, %v", kind, o.st, o.err)
			case <-time.After(60 * time.Second):
				t.Fatal("no word of the wait within 60 s")
			}
			if w.Lock != lock || w.Owner != owner || w.HolderPID != pid || w.Max <= 0 || w.Max > timeout {
				t.Errorf("wait %+v; want lock %s of %s held by %d, at most %v", w, lock, owner, pid, timeout)
			}
			if !strings.Contains(w.String(), lock) || !strings.Contains(w.String(), "at most 10m0s") || pid > 0 && !strings.Contains(w.String(), fmt.Sprintf("process %d", pid)) {
				t.Errorf("the notice reads %q", w)
			}
			// The helper still holds the lock: the write has not happened.
			if got, _ := os.ReadFile(path); string(got) != "a=X:1,0,x\n" {
				t.Errorf("written while the %s lock was held: %q", kind, got)
			}
			held.release(t)
			o := <-done
			if o.err != nil || !o.st.Written || len(o.st.Waited) != 1 || o.st.Waited[0] != w {
				t.Fatalf("after the release: %+v, %v", o.st, o.err)
			}
			if got, _ := os.ReadFile(path); string(got) != "a=X:1,0,x\nk=S:1,0,algo\n" {
				t.Fatalf("file %q", got)
			}
		})
	}
}

// A lock held past the timeout fails the write with an error naming the
// lock and its holder; the file is unchanged.
func TestStoreGivesUpOnALockHeldPastTheTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ufdb.txt")
	writeFile(t, path, "a=X:1,0,x\n", 0o644)
	lock, err := MIOpenLockFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	held := holdLock(t, lock, "fcntl")
	_, err = Store(context.Background(), path, rec("k", "S", 1), StoreOptions{LockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrLockTimeout) || !strings.Contains(err.Error(), lock) || !strings.Contains(err.Error(), fmt.Sprintf("by process %d", held.pid())) {
		t.Fatalf("want a lock timeout naming %s and process %d, got %v", lock, held.pid(), err)
	}
	if got, _ := os.ReadFile(path); string(got) != "a=X:1,0,x\n" {
		t.Fatalf("file %q", got)
	}
}

// A wait for a lock ends when the caller's context ends.
func TestStoreStopsWaitingWhenTheContextEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ufdb.txt")
	lock, err := MIOpenLockFile(path, "")
	if err != nil {
		t.Fatal(err)
	}
	holdLock(t, lock, "fcntl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waits := make(chan LockWait, 1)
	done := startStore(t, ctx, path, rec("k", "S", 1), StoreOptions{LockTimeout: 10 * time.Minute, OnWait: func(w LockWait) { waits <- w }})
	select {
	case <-waits:
	case o := <-done:
		t.Fatalf("the write did not wait: %+v, %v", o.st, o.err)
	}
	cancel()
	select {
	case o := <-done:
		if !errors.Is(o.err, context.Canceled) || !strings.Contains(o.err.Error(), lock) {
			t.Fatalf("want the context's end, naming the lock, got %v", o.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the write still waits for the lock 60 s after its context ended")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the db was written: %v", err)
	}
}

// MIOpen's lock file is named as src/lock_file.cpp names it: the md5 of
// the db's parent folder, "_", the db's name, ".lock", in
// miopen-lockfiles under the first of TMPDIR, TMP, TEMP, TEMPDIR set.
func TestMIOpenLockFile(t *testing.T) {
	tmp, other := t.TempDir(), t.TempDir()
	for _, tt := range []struct {
		name, db, dir string
		env           map[string]string
		want          string
	}{
		{"TMPDIR", "/home/u/.config/miopen/gfx942130.HIP.3_3_0.ufdb.txt", "", map[string]string{"TMPDIR": tmp, "TMP": other},
			filepath.Join(tmp, "miopen-lockfiles", "57f310773664e83556efac823dbaa3f7_gfx942130.HIP.3_3_0.ufdb.txt.lock")},
		{"TMP when TMPDIR is unset", "/home/u/.config/miopen/x.ufdb.txt", "", map[string]string{"TMPDIR": "", "TMP": tmp, "TEMP": other},
			filepath.Join(tmp, "miopen-lockfiles", "57f310773664e83556efac823dbaa3f7_x.ufdb.txt.lock")},
		{"TEMPDIR last", "/home/u/.config/miopen/x.ufdb.txt", "", map[string]string{"TMPDIR": "", "TMP": "", "TEMP": "", "TEMPDIR": tmp},
			filepath.Join(tmp, "miopen-lockfiles", "57f310773664e83556efac823dbaa3f7_x.ufdb.txt.lock")},
		{"a file in the root", "/x.ufdb.txt", "/locks", nil, "/locks/6666cd76f96956469e7be39d750cc7d9_x.ufdb.txt.lock"},
		{"no folder: the md5 of the empty string", "x.ufdb.txt", "/locks", nil, "/locks/d41d8cd98f00b204e9800998ecf8427e_x.ufdb.txt.lock"},
		{"relative", "rel/dir/x.ufdb.txt", "/locks", nil, "/locks/48732aa501f37739d64fe40f7970b43b_x.ufdb.txt.lock"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			got, err := MIOpenLockFile(tt.db, tt.dir)
			if err != nil || got != tt.want {
				t.Fatalf("MIOpenLockFile(%s) = %s, %v; want %s", tt.db, got, err, tt.want)
			}
		})
	}
}

// The lock folder and file are created as MIOpen creates them, with all
// permissions whatever the umask; an existing folder keeps its mode.
func TestMIOpenLockIsCreatedAsMIOpenCreatesIt(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	path := filepath.Join(t.TempDir(), "x.ufdb.txt")
	if _, err := storeFile(path, rec("k", "S", 1), time.Second); err != nil {
		t.Fatal(err)
	}
	lock, _ := MIOpenLockFile(path, "")
	for p, want := range map[string]os.FileMode{filepath.Dir(lock): os.ModeDir | 0o777, lock: 0o777} {
		if info, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		} else if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode(), want)
		}
	}
	// An existing lock folder is MIOpen's or the user's: left as it is.
	tmp2 := t.TempDir()
	t.Setenv("TMPDIR", tmp2)
	if err := os.Mkdir(filepath.Join(tmp2, "miopen-lockfiles"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := storeFile(path, rec("k", "S", 2), time.Second); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(tmp2, "miopen-lockfiles")); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("an existing lock folder: %v, %v; want it left 0700", info, err)
	}
}

// A written store reports the malformed items it replaced, and drops the
// warnings about them; what it did not write, it does not report.
func TestStoreReportsWhatItReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ufdb.txt")
	writeFile(t, path, "k=X:1,0,x;S:bad,0,a;T:bad,0,b\n", 0o644)
	st, err := storeFile(path, rec("k", "S", 1), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Written || len(st.Replaced) != 1 || st.Replaced[0].Old != "S:bad,0,a" || st.Replaced[0].Line != 1 {
		t.Fatalf("stored %+v", st)
	}
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0].Msg, "T:bad") {
		t.Fatalf("warnings %v: want only the one about T's item, still in the file", st.Warnings)
	}
	if got, _ := os.ReadFile(path); string(got) != "k=X:1,0,x;S:1,0,algo;T:bad,0,b\n" {
		t.Fatalf("file %q", got)
	}
	// Read-only: nothing written, nothing replaced.
	writeFile(t, path, "k=S:bad,0,a\n", 0o444)
	st, err = storeFile(path, rec("k", "S", 1), time.Second)
	if !errors.Is(err, ErrReadOnly) || st.Written || st.Replaced != nil {
		t.Fatalf("read-only: %+v, %v", st, err)
	}
}
