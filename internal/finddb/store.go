package finddb

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"miotool/internal/userfile"
)

// Errors a caller may want to tell apart.
var (
	// ErrNotAFolder: the user-db folder, or a path component above it, is
	// a file.
	ErrNotAFolder = errors.New("not a folder")
	// ErrReadOnly: the find-db file is not writable, so it is not replaced.
	ErrReadOnly = errors.New("read-only")
	// ErrNotRegular: the find-db (or a lock file) is not a regular file: a
	// FIFO, a socket, a device or a folder. It is neither read nor written.
	ErrNotRegular = errors.New("not a regular file: not read or written")
	// ErrLockTimeout: another writer held a find-db lock for the whole
	// lock timeout.
	ErrLockTimeout = errors.New("timed out waiting for the lock")
)

// newFileMode is the mode of a find-db miotool creates, as MIOpen's are.
const newFileMode = 0o644

// tmpSuffix names the one temporary file a writer uses. Writers hold the
// lock while it exists, so a leftover one belongs to a killed writer: the
// next writer replaces it, and at most one can ever be left.
const tmpSuffix = ".miotool-tmp"

// backupSuffix names the copy of the db's old bytes that a writer keeps
// while it rewrites the db in place (a db with other hard links, or one
// reached through a symbolic link). One left behind belongs to a writer
// killed part-way: it is the db, and the next writer puts it back.
const backupSuffix = ".miotool-backup"

// Load reads the find-db at path; a missing file is an empty db, and one
// that is not a regular file is not read (ErrNotRegular). It takes no
// lock. While a writer rewrites the db in place (see Store), or after one
// was killed doing so, the db's last complete bytes are in its backup:
// Load reads those when the backup is there before or after it reads the
// db, and reads again when the db changed while it read.
func Load(path string) (*DB, error) {
	backup := path + backupSuffix
	for try := 1; ; try++ {
		if data, ok, err := userfile.ReadBackup(backup); err == nil && ok {
			return Parse(path, data), nil
		}
		before, _ := os.Stat(path)
		data, _, err := readRegular(path, path)
		after, _ := os.Stat(path)
		if data, ok, err := userfile.ReadBackup(backup); err == nil && ok {
			return Parse(path, data), nil
		}
		if changedWhileRead(before, after) && try < loadTries {
			continue
		}
		if errors.Is(err, fs.ErrNotExist) {
			return Parse(path, nil), nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the find-db: %w", err)
		}
		return Parse(path, data), nil
	}
}

// loadTries bounds Load's reads of a db that keeps changing under it.
const loadTries = 5

// changedWhileRead reports whether a file's status differs across a read:
// another file, another size or another change time.
func changedWhileRead(before, after fs.FileInfo) bool {
	if before == nil || after == nil {
		return before != after
	}
	if !os.SameFile(before, after) || before.Size() != after.Size() || !before.ModTime().Equal(after.ModTime()) {
		return true
	}
	b, okb := before.Sys().(*syscall.Stat_t)
	a, oka := after.Sys().(*syscall.Stat_t)
	return okb && oka && b.Ctim != a.Ctim
}

// CheckDir reports a user-db folder that can never be one: the path, or
// the nearest existing path above it, is not a folder, or is a symlink
// loop. A folder that does
// not exist yet, or cannot be written, is not this error: the first is
// created and the second is a warning when the db is written.
func CheckDir(dir string) error {
	p := filepath.Clean(dir)
	for {
		info, err := os.Stat(p)
		switch {
		case err == nil && !info.IsDir():
			if p == filepath.Clean(dir) {
				return fmt.Errorf("%s: %w", dir, ErrNotAFolder)
			}
			return fmt.Errorf("%s: %s is %w", dir, p, ErrNotAFolder)
		case err == nil:
			return nil
		case errors.Is(err, syscall.ELOOP) && p == filepath.Clean(dir):
			return fmt.Errorf("%s: %w: %w", dir, ErrNotAFolder, syscall.ELOOP)
		case errors.Is(err, syscall.ELOOP):
			return fmt.Errorf("%s: %w: %s: %w", dir, ErrNotAFolder, p, syscall.ELOOP)
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return nil
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}

// writeBody writes the new file's bytes; tests replace it to fail a write
// half way.
var writeBody = func(f *os.File, data []byte) error {
	_, err := f.Write(data)
	return err
}

// DefaultLockTimeout bounds the wait for another writer's lock, as
// MIOpen's own file lock does.
const DefaultLockTimeout = 60 * time.Second

// StoreOptions configure Store.
type StoreOptions struct {
	// LockTimeout bounds the wait for the locks, both together
	// (DefaultLockTimeout when zero).
	LockTimeout time.Duration
	// OnWait, when set, is told at once, before the wait begins, that a
	// lock is held by another writer: once per lock the write waits for.
	OnWait func(LockWait)
	// LockDir is the folder of MIOpen's lock files; empty is MIOpen's
	// own (see MIOpenLockFile).
	LockDir string
}

// Stored is what Store did.
type Stored struct {
	// Warnings are the lines and items of the file as read that miotool
	// keeps but does not use.
	Warnings []Warning
	// Written: the file was given the merged record (false when the
	// record was there already, byte for byte).
	Written bool
	// Restored: a writer killed while it rewrote the db in place had left
	// the db's old bytes in its backup, and they were put back first (a
	// Warning says so too).
	Restored bool
	// Replaced are the malformed items of rec's solvers that the merge
	// replaced in place (see DB.Merge).
	Replaced []Replaced
	// Waited are the locks the write found held and waited for.
	Waited []LockWait
}

// Store merges rec into the find-db at path (see DB.Merge). Under two
// exclusive locks, miotool's (a flock of path + ".lock") and MIOpen's (an
// fcntl record lock of MIOpenLockFile), it re-reads the file, merges and
// writes it, so that concurrent writers, MIOpen among them, do not lose
// each other's records, and the db stays the user's file (userfile):
//
//   - a db with one link, reached by its own name, is replaced by a
//     complete temporary file with its mode and owner (0644 for a new
//     file) renamed over it: a reader without the lock and a writer killed
//     at any moment see either the old or the new file;
//   - a db with other hard links, one reached through a symbolic link, or
//     one of an owner the new file could not have is rewritten in place,
//     so that every name keeps leading to it. Its old bytes are first
//     written whole to path + ".miotool-backup" and removed once the new
//     ones are on disk. MIOpen reads the db under its lock, which the
//     write holds; Load reads the backup while it exists; a failed write
//     puts the old bytes back at once, and the next Store puts back those
//     a killed writer left (Stored.Restored).
//
// A path that is not a regular file (a FIFO, a socket, a device) is
// neither read nor written (ErrNotRegular), nor is a file that is not
// writable (ErrReadOnly). Waiting for a lock ends when ctx ends or after
// the lock timeout (ErrLockTimeout).
func Store(ctx context.Context, path string, rec Record, opts StoreOptions) (Stored, error) {
	var out Stored
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return out, fmt.Errorf("create the find-db folder: %w", explainPathError(dir, err))
	}
	waiter := lockWaiter{ctx: ctx, deadline: time.Now().Add(timeout), timeout: timeout, onWait: func(w LockWait) {
		out.Waited = append(out.Waited, w)
		if opts.OnWait != nil {
			opts.OnWait(w)
		}
	}}
	unlock, err := waiter.flock(path + ".lock")
	if err != nil {
		return out, err
	}
	defer unlock()
	miopenLock, err := MIOpenLockFile(path, opts.LockDir)
	if err != nil {
		return out, err
	}
	unlockMIOpen, err := waiter.recordLock(miopenLock)
	if err != nil {
		return out, err
	}
	defer unlockMIOpen()

	// A symlinked db is written where it points, and stays a symlink.
	target := path
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		target = resolved
	}
	name := path
	if target != path {
		name = fmt.Sprintf("%s (a link to %s)", path, target)
	}
	data, info, err := readRegular(target, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return out, fmt.Errorf("read the find-db: %w", err)
	case info.Mode().Perm()&0o222 == 0 || syscall.Access(target, 2 /* W_OK */) != nil:
		out.Warnings = Parse(path, data).Warnings
		return out, fmt.Errorf("%s is %w (mode %04o): not replaced", path, ErrReadOnly, info.Mode().Perm())
	}
	// Only beside a regular file (or none yet): nothing is removed or
	// restored beside what Store refuses.
	write := userfile.Options{NewMode: newFileMode, Temp: path + tmpSuffix, Backup: path + backupSuffix, Sync: true, WriteFunc: writeBody}
	removeStaleTemps(path)
	if target != path {
		removeStaleTemps(target) // earlier versions wrote theirs beside the link's target
	}
	restored, err := userfile.Restore(path, write.Backup, write)
	if err != nil {
		return out, fmt.Errorf("the find-db %s: putting back the old bytes a killed writer left in %s: %w", path, write.Backup, err)
	}
	if restored {
		out.Restored = true
		if data, _, err = readRegular(target, name); err != nil {
			return out, fmt.Errorf("read the find-db: %w", err)
		}
	}
	db := Parse(path, data)
	out.Warnings = db.Warnings
	if restored {
		out.Warnings = append([]Warning{{Path: path, Msg: fmt.Sprintf(
			"put back from %s, where a writer stopped while it rewrote the db in place had kept it; that writer's record is not in it",
			filepath.Base(write.Backup))}}, out.Warnings...)
	}
	changed, replaced := db.Merge(rec)
	if !changed {
		return out, nil
	}
	if err := userfile.Write(path, db.Bytes(), write); err != nil {
		return out, fmt.Errorf("write the find-db %s: %w", path, err)
	}
	out.Written, out.Replaced = true, replaced
	out.Warnings = withoutReplaced(out.Warnings, replaced)
	return out, nil
}

// withoutReplaced drops the warnings about items that are no longer in
// the file: a replaced item is reported as Replaced instead.
func withoutReplaced(ws []Warning, replaced []Replaced) []Warning {
	if len(replaced) == 0 {
		return ws
	}
	var out []Warning
	for _, w := range ws {
		gone := false
		for _, r := range replaced {
			gone = gone || w.item != "" && w.Line == r.Line && w.item == r.Old
		}
		if !gone {
			out = append(out, w)
		}
	}
	return out
}

// readRegular reads the file at path, refusing anything but a regular
// file (named name in the error): it opens without blocking (a FIFO's open would wait for a writer
// forever) and checks what it opened, so nothing swapped in between the
// check and the read is read. info is nil when the file does not exist.
func readRegular(path, name string) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		// A socket cannot be opened at all (ENXIO): say what it is.
		if info, serr := os.Stat(path); serr == nil && !info.Mode().IsRegular() {
			return nil, nil, regular(name, info)
		}
		return nil, nil, explainPathError(path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if err := regular(name, info); err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, err
	}
	return data, info, nil
}

// regular is ErrNotRegular, naming what path is, unless it is a regular
// file.
func regular(path string, info fs.FileInfo) error {
	if info.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is %s, %w", path, userfile.Kind(info.Mode()), ErrNotRegular)
}

// explainPathError gives an error about path the cause a user can act
// on: a symlink loop on the way to it (which os.MkdirAll reports as the
// path existing) is ELOOP, naming the path.
func explainPathError(path string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return err
	}
	if _, serr := os.Stat(path); errors.Is(serr, syscall.ELOOP) {
		return fmt.Errorf("%s: %w", path, syscall.ELOOP)
	}
	return err
}

// removeStaleTemps deletes the temporary files of writers that died before
// renaming them: miotool's own, and those of earlier versions, which were
// named path + ".tmp" + digits. The caller holds the lock, so none of them
// is in use.
func removeStaleTemps(path string) {
	os.Remove(path + tmpSuffix)
	base := filepath.Base(path) + ".tmp"
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if rest, ok := strings.CutPrefix(name, base); ok && digits(rest) && e.Type().IsRegular() {
			os.Remove(filepath.Join(filepath.Dir(path), name))
		}
	}
}

// LockWait says that a write waits for another writer's lock.
type LockWait struct {
	// Lock is the lock file.
	Lock string
	// Owner says whose lock it is: "MIOpen's" (the fcntl record lock
	// MIOpen and miotool take) or "miotool's" (miotool's flock).
	Owner string
	// HolderPID is the process holding it, where the lock tells (MIOpen's
	// classic fcntl lock does; an OFD lock or a flock does not): 0 when
	// unknown.
	HolderPID int
	// Max is how long the write waits at most.
	Max time.Duration
}

func (w LockWait) String() string {
	by := "another writer"
	if w.HolderPID > 0 {
		by = fmt.Sprintf("process %d", w.HolderPID)
	}
	return fmt.Sprintf("waiting for the find-db lock %s (%s), held by %s, for at most %s", w.Lock, w.Owner, by, w.Max.Round(time.Second))
}

// lockRetry is how often a held lock is tried again.
const lockRetry = 20 * time.Millisecond

// lockWaiter takes locks within one deadline, telling onWait of each it
// finds held, and gives up when ctx ends.
type lockWaiter struct {
	ctx      context.Context
	deadline time.Time
	timeout  time.Duration
	onWait   func(LockWait)
}

// wait calls try until it takes the lock. holder names the holder's pid
// where known.
func (lw lockWaiter) wait(lock, owner string, try func() (bool, error), holder func() int) error {
	var timer *time.Timer
	for first := true; ; first = false {
		ok, err := try()
		if err != nil {
			return fmt.Errorf("find-db lock %s: %w", lock, err)
		}
		if ok {
			return nil
		}
		if first {
			lw.onWait(LockWait{Lock: lock, Owner: owner, HolderPID: holder(), Max: max(0, time.Until(lw.deadline))})
		}
		if !time.Now().Before(lw.deadline) {
			by := ""
			if pid := holder(); pid > 0 {
				by = fmt.Sprintf(" by process %d", pid)
			}
			return fmt.Errorf("find-db lock %s (%s) still held%s after %s: %w", lock, owner, by, lw.timeout, ErrLockTimeout)
		}
		if timer == nil {
			timer = time.NewTimer(lockRetry)
			defer timer.Stop()
		} else {
			timer.Reset(lockRetry)
		}
		select {
		case <-lw.ctx.Done():
			return fmt.Errorf("waiting for the find-db lock %s (%s): %w", lock, owner, lw.ctx.Err())
		case <-timer.C:
		}
	}
}

// flock takes miotool's own lock, an exclusive flock(2) of path (created
// 0644). It calls flock itself rather than through a library: the
// maintained one (github.com/gofrs/flock) wraps the same call with the
// same non-blocking retry, so it would add a dependency and no
// correctness.
func (lw lockWaiter) flock(path string) (func(), error) {
	f, err := openLockFile(path, newFileMode, false)
	if err != nil {
		return nil, fmt.Errorf("find-db lock: %w", err)
	}
	fd := int(f.Fd())
	err = lw.wait(path, "miotool's", func() (bool, error) {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	}, func() int { return 0 })
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		f.Close()
	}, nil
}

// recordLock takes MIOpen's lock: an exclusive fcntl record lock of the
// whole file, the lock boost::interprocess::file_lock takes for MIOpen. It
// is an open-file-description lock where the system has them (Linux), so
// two goroutines of this process exclude each other too; on Linux it
// conflicts with MIOpen's classic record lock all the same.
func (lw lockWaiter) recordLock(path string) (func(), error) {
	if err := makeMIOpenLockDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	f, err := openLockFile(path, 0o777, true)
	if err != nil {
		return nil, fmt.Errorf("MIOpen's find-db lock: %w", err)
	}
	err = lw.wait(path, "MIOpen's", func() (bool, error) { return tryRecordLock(f) }, func() int { return recordLockHolder(f) })
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		unlockRecord(f)
		f.Close()
	}, nil
}

// openLockFile opens (creating) a lock file read-write without blocking
// and refuses anything but a regular file. A new one gets mode, past the
// umask when chmod is set, as MIOpen gives its lock files all permissions
// so that any user's MIOpen can lock them.
func openLockFile(path string, mode fs.FileMode, chmod bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NONBLOCK, mode)
	created := err == nil
	if errors.Is(err, fs.ErrExist) {
		f, err = os.OpenFile(path, os.O_RDWR|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		if info, serr := os.Stat(path); serr == nil && !info.Mode().IsRegular() {
			return nil, regular(path, info)
		}
		return nil, explainPathError(path, err)
	}
	info, err := f.Stat()
	if err == nil {
		err = regular(path, info)
	}
	if err == nil && created && chmod {
		err = f.Chmod(mode)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// MIOpenLockFile is the lock file MIOpen takes for the db file at dbPath
// (src/lock_file.cpp, LockFilePath): in dir, or in MIOpen's lock folder
// "miopen-lockfiles" under the temporary folder when dir is empty, the
// lowercase hex md5 of dbPath's parent folder, "_", the file's name and
// ".lock". MIOpen hashes the parent as its path names it; dbPath's is
// taken as given, cleaned (filepath.Join gives cleaned paths, as MIOpen's
// own joins do).
func MIOpenLockFile(dbPath, dir string) (string, error) {
	if dir == "" {
		tmp, err := tempDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(tmp, "miopen-lockfiles")
	}
	parent := ""
	if strings.Contains(dbPath, "/") {
		parent = filepath.Dir(filepath.Clean(dbPath))
	}
	sum := md5.Sum([]byte(parent))
	return filepath.Join(dir, hex.EncodeToString(sum[:])+"_"+filepath.Base(dbPath)+".lock"), nil
}

// tempDir is the temporary folder as MIOpen finds it (boost's and
// libstdc++'s temp_directory_path): the first of TMPDIR, TMP, TEMP and
// TEMPDIR that is set, else /tmp; it must be a folder.
func tempDir() (string, error) {
	dir := "/tmp"
	for _, name := range []string{"TMPDIR", "TMP", "TEMP", "TEMPDIR"} {
		if v := os.Getenv(name); v != "" {
			dir = v
			break
		}
	}
	info, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("MIOpen's find-db lock folder: the temporary folder: %w", explainPathError(dir, err))
	}
	if !info.IsDir() {
		return "", fmt.Errorf("MIOpen's find-db lock folder: the temporary folder %s is %s", dir, userfile.Kind(info.Mode()))
	}
	return dir, nil
}

// makeMIOpenLockDir creates MIOpen's lock folder as MIOpen does: with all
// permissions, past the umask, when it does not exist yet.
func makeMIOpenLockDir(dir string) error {
	info, err := os.Stat(dir)
	switch {
	case err == nil && info.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("MIOpen's find-db lock folder %s is %s", dir, userfile.Kind(info.Mode()))
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("MIOpen's find-db lock folder: %w", explainPathError(dir, err))
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("create MIOpen's find-db lock folder: %w", explainPathError(dir, err))
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return fmt.Errorf("MIOpen's find-db lock folder: %w", err)
	}
	return nil
}
