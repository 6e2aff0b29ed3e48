package finddb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Errors a caller may want to tell apart.
var (
	// ErrNotAFolder: the user-db folder, or a path component above it, is
	// a file.
	ErrNotAFolder = errors.New("not a folder")
	// ErrReadOnly: the find-db file is not writable, so it is not replaced.
	ErrReadOnly = errors.New("read-only")
)

// newFileMode is the mode of a find-db miotool creates, as MIOpen's are.
const newFileMode = 0o644

// tmpSuffix names the one temporary file a writer uses. Writers hold the
// lock while it exists, so a leftover one belongs to a killed writer: the
// next writer replaces it, and at most one can ever be left.
const tmpSuffix = ".miotool-tmp"

// Load reads the find-db at path; a missing file is an empty db.
func Load(path string) (*DB, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Parse(path, nil), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the find-db: %w", err)
	}
	return Parse(path, data), nil
}

// CheckDir reports a user-db folder that can never be one: the path, or
// the nearest existing path above it, is not a folder. A folder that does
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

// StoreFile merges rec into the find-db at path (see DB.Merge). Under an
// exclusive lock (path + ".lock") it re-reads the file, merges, writes a
// complete temporary file with the original's mode and owner (0644 for a
// new file) and renames it over the original, so a reader without the lock
// and a writer killed at any moment see either the old or the new file,
// and concurrent writers do not lose each other's records. A file that is
// not writable is not replaced (ErrReadOnly). It returns the warnings of
// the file as read.
func StoreFile(path string, rec Record, lockTimeout time.Duration) ([]Warning, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create the find-db folder: %w", err)
	}
	unlock, err := lockFile(path+".lock", lockTimeout)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// A symlinked db is written where it points, and stays a symlink.
	target := path
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		target = resolved
	}
	removeStaleTemps(target)
	data, err := os.ReadFile(target)
	var info fs.FileInfo
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read the find-db: %w", err)
	default:
		if info, err = os.Stat(target); err != nil {
			return nil, fmt.Errorf("read the find-db: %w", err)
		}
		if info.Mode().Perm()&0o222 == 0 || syscall.Access(target, 2 /* W_OK */) != nil {
			db := Parse(path, data)
			return db.Warnings, fmt.Errorf("%s is %w (mode %04o): not replaced", path, ErrReadOnly, info.Mode().Perm())
		}
	}
	db := Parse(path, data)
	if changed, _ := db.Merge(rec); !changed {
		return db.Warnings, nil
	}
	if err := replace(target, db.Bytes(), info); err != nil {
		return db.Warnings, fmt.Errorf("write the find-db %s: %w", path, err)
	}
	return db.Warnings, nil
}

// replace writes data to a temporary file beside path, gives it the mode
// and owner of old (a new file's mode when old is nil), and renames it over
// path; on any failure path is untouched and the temporary file removed.
func replace(path string, data []byte, old fs.FileInfo) (err error) {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	mode := fs.FileMode(newFileMode)
	if old != nil {
		mode = old.Mode().Perm()
		if err := keepOwner(f, old); err != nil {
			return err
		}
	}
	// Chmod after chown: chown may clear set-id bits, and the umask must
	// not decide a shared file's mode.
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := writeBody(f, data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// keepOwner gives f the owner and group of old where they differ.
func keepOwner(f *os.File, old fs.FileInfo) error {
	want, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	have, err := f.Stat()
	if err != nil {
		return err
	}
	got, ok := have.Sys().(*syscall.Stat_t)
	if !ok || got.Uid == want.Uid && got.Gid == want.Gid {
		return nil
	}
	if err := f.Chown(int(want.Uid), int(want.Gid)); err != nil {
		return fmt.Errorf("cannot keep the file's owner %d:%d: %w", want.Uid, want.Gid, err)
	}
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
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

// lockFile takes an exclusive advisory lock, retrying until timeout.
//
// It calls flock(2) itself rather than through a library: the maintained
// one (github.com/gofrs/flock) wraps the same call with the same
// non-blocking retry, so it would add a dependency and no correctness.
func lockFile(path string, timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, newFileMode)
	if err != nil {
		return nil, fmt.Errorf("find-db lock: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("find-db lock %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
