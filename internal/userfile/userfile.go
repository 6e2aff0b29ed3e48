// Package userfile gives a user's file new bytes and keeps everything else
// about it: the name keeps leading to the same file, with its other hard
// links, its symbolic links, its mode and its owner.
//
// A file is replaced by a complete new one renamed over it (Rename) only
// when nobody can tell: it is a regular file reached by its own name, it
// has no other hard link, and the writer can give the new file its owner
// and group. Then a reader, and a writer killed at any moment, see either
// the old bytes or the new. Every other file is rewritten where it is
// (InPlace): a symbolic link is followed and the file it names rewritten,
// a file with other hard links is rewritten under all its names, a
// device or a FIFO is written to, and a file of another owner keeps its
// owner. An in-place write can be seen part-done by a reader that takes
// no lock, and a writer killed part-way leaves the file cut short; a
// caller that must survive that gives a Backup, and Restore puts the old
// bytes back.
package userfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Method is how new bytes reach a file.
type Method int

const (
	// Rename writes a complete new file beside the old one, with its mode
	// and owner, and renames it over the old one.
	Rename Method = iota
	// InPlace truncates the file itself and writes the new bytes into it.
	InPlace
)

func (m Method) String() string {
	if m == InPlace {
		return "in place"
	}
	return "rename"
}

// Plan is how a write of a path goes, decided from what is there now.
type Plan struct {
	// Path is the path as given.
	Path string
	// Method is Rename or InPlace.
	Method Method
	// Why says why the file is written in place ("has 2 hard links", "is
	// a symbolic link to db.txt"); empty for Rename.
	Why string
	// Info describes the file the path leads to, symbolic links followed;
	// nil when there is none yet.
	Info fs.FileInfo
}

// PlanFor decides how writing path keeps the file it names.
func PlanFor(path string) (Plan, error) {
	p := Plan{Path: path}
	link, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil // a new file: renamed into place, never seen part-written
	case err != nil:
		return p, err
	}
	if link.Mode()&fs.ModeSymlink != 0 {
		p.Method = InPlace
		to, _ := os.Readlink(path)
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Writing through it creates the file it names, and the
			// link stays.
			p.Why = fmt.Sprintf("is a symbolic link to %s, which does not exist yet", to)
			return p, nil
		case err != nil:
			return p, err
		}
		p.Info, p.Why = info, fmt.Sprintf("is a symbolic link to %s", to)
		return p, nil
	}
	p.Info = link
	switch {
	case !link.Mode().IsRegular():
		p.Method, p.Why = InPlace, "is "+Kind(link.Mode())
	case linkCount(link) > 1:
		p.Method, p.Why = InPlace, fmt.Sprintf("has %d hard links", linkCount(link))
	default:
		if why := foreignOwner(link); why != "" {
			p.Method, p.Why = InPlace, why
		}
	}
	return p, nil
}

// Kind names a file type for a message: "a folder", "a named pipe (FIFO)".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a plain file"
}

// Options tune a write.
type Options struct {
	// NewMode is the mode a file that does not exist yet gets, past the
	// umask; zero is 0666 less the umask, as os.Create gives.
	NewMode fs.FileMode
	// Temp names the temporary file written beside the file (the new
	// bytes of a Rename, the old bytes on their way to Backup). Empty
	// picks a fresh name. A fixed name is for a writer that holds a lock
	// and has removed what a killed writer left under it: the file is
	// created exclusively and never through a link.
	Temp string
	// Backup, for an in-place write of a regular file, is where the old
	// bytes are kept while the file is rewritten: they are written there
	// whole (through Temp, then renamed) before the file is touched, and
	// removed once the new bytes are written. A write that fails puts them
	// back at once; a writer killed part-way leaves them for Restore. The
	// caller holds a lock that keeps other writers out, and has restored
	// any backup left before (a write refuses to replace one).
	Backup string
	// Sync flushes the new bytes, and the folder after a rename, to the
	// disk before the write returns.
	Sync bool
	// WriteFunc writes the bytes to the open file (nil: f.Write); tests
	// fail it part-way.
	WriteFunc func(f *os.File, data []byte) error
}

func (o Options) write(f *os.File, data []byte) error {
	if o.WriteFunc != nil {
		return o.WriteFunc(f, data)
	}
	_, err := f.Write(data)
	return err
}

// Write gives the file at path the bytes data, by the plan PlanFor makes.
// A failed Rename leaves the file as it was; a failed in-place write
// leaves it as it was when opts has a Backup, and cut short otherwise.
func Write(path string, data []byte, opts Options) error {
	s, err := Stage(path, data, opts)
	if err != nil {
		return err
	}
	if err := s.Commit(); err != nil {
		s.Discard()
		return err
	}
	return nil
}

// Staged is a write made ready: for Rename the new file is written beside
// the old one, for InPlace nothing is written yet. Commit puts the bytes
// in place; Discard drops what Commit did not use. Several files can be
// staged first and committed together, so that one that cannot be
// written leaves the others as they were.
type Staged struct {
	Plan
	data []byte
	opts Options
	temp string
}

// Stage plans the write of path and, for a Rename, writes the new file.
func Stage(path string, data []byte, opts Options) (*Staged, error) {
	plan, err := PlanFor(path)
	if err != nil {
		return nil, err
	}
	s := &Staged{Plan: plan, data: data, opts: opts}
	if plan.Method == Rename {
		if s.temp, err = writeNew(plan.Path, plan.Info, data, opts); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// InPlace reports whether Commit writes into the file itself.
func (s *Staged) InPlace() bool { return s.Method == InPlace }

// Commit puts the new bytes in place.
func (s *Staged) Commit() error {
	if s.Method == InPlace {
		return writeInPlace(s.Plan, s.data, s.opts)
	}
	if err := os.Rename(s.temp, s.Path); err != nil {
		return err
	}
	s.temp = ""
	if s.opts.Sync {
		syncDir(filepath.Dir(s.Path))
	}
	return nil
}

// Discard removes the new file a Commit did not rename.
func (s *Staged) Discard() {
	if s.temp != "" {
		os.Remove(s.temp)
		s.temp = ""
	}
}

// writeNew writes data to a new file beside path and returns its name. It
// gets the mode and owner of old, or a new file's mode when old is nil.
func writeNew(path string, old fs.FileInfo, data []byte, opts Options) (_ string, err error) {
	f, temp, err := createTemp(path, opts, old == nil && opts.NewMode == 0)
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(temp)
		}
	}()
	switch {
	case old != nil:
		if err := keepOwner(f, old); err != nil {
			return "", err
		}
		// Chmod after chown, which may clear set-id bits; and past the
		// umask, which must not decide a file's mode it had before.
		if err := f.Chmod(old.Mode().Perm()); err != nil {
			return "", err
		}
	case opts.NewMode != 0:
		if err := f.Chmod(opts.NewMode); err != nil {
			return "", err
		}
	}
	if err := opts.write(f, data); err != nil {
		return "", err
	}
	if opts.Sync {
		if err := f.Sync(); err != nil {
			return "", err
		}
	}
	return temp, f.Close()
}

// createTemp creates the temporary file beside path: opts.Temp, else a
// fresh name. umasked gives it 0666 less the umask, else 0600 until the
// caller sets its mode.
func createTemp(path string, opts Options, umasked bool) (*os.File, string, error) {
	perm := fs.FileMode(0o600)
	if umasked {
		perm = 0o666
	}
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL | openNoFollow
	if opts.Temp != "" {
		f, err := os.OpenFile(opts.Temp, flags, perm)
		return f, opts.Temp, err
	}
	dir, base := filepath.Split(path)
	for try := 0; ; try++ {
		name := filepath.Join(dir, "."+base+"."+rand.Text()[:10]+".tmp")
		f, err := os.OpenFile(name, flags, perm)
		if errors.Is(err, fs.ErrExist) && try < 5 {
			continue
		}
		return f, name, err
	}
}

// writeInPlace rewrites the file plan names, keeping the old bytes in
// opts.Backup while it does.
func writeInPlace(plan Plan, data []byte, opts Options) error {
	backedUp := false
	if opts.Backup != "" && plan.Info != nil && plan.Info.Mode().IsRegular() {
		if err := backUp(plan, opts); err != nil {
			return fmt.Errorf("keeping the old bytes in %s before rewriting the file in place (it %s): %w", opts.Backup, plan.Why, err)
		}
		backedUp = true
	}
	err := overwrite(plan.Path, data, plan.Info == nil, opts)
	if !backedUp {
		return err
	}
	if err != nil {
		if _, rerr := Restore(plan.Path, opts.Backup, opts); rerr != nil {
			return fmt.Errorf("%w; the old bytes are kept in %s (putting them back failed: %v)", err, opts.Backup, rerr)
		}
		return err
	}
	if err := os.Remove(opts.Backup); err != nil {
		return fmt.Errorf("the file is written, but its old bytes stay in %s: %w", opts.Backup, err)
	}
	if opts.Sync {
		syncDir(filepath.Dir(opts.Backup))
	}
	return nil
}

// backUp writes the file's current bytes to opts.Backup: whole, through a
// temporary file renamed there, so that a backup that exists is complete.
func backUp(plan Plan, opts Options) (err error) {
	if _, err := os.Lstat(opts.Backup); err == nil {
		return fmt.Errorf("%s is there already (%w): restore it first", opts.Backup, fs.ErrExist)
	}
	old, err := readRegular(plan.Path)
	if err != nil {
		return err
	}
	f, name, err := createTemp(opts.Backup, opts, false)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(name)
		}
	}()
	if err := f.Chmod(plan.Info.Mode().Perm()); err != nil {
		return err
	}
	if _, err := f.Write(old); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(name, opts.Backup); err != nil {
		return err
	}
	syncDir(filepath.Dir(opts.Backup))
	return nil
}

// overwrite truncates the file at path (following links; creating it when
// create is set) and writes data into it.
func overwrite(path string, data []byte, create bool, opts Options) error {
	flags, perm := os.O_WRONLY|os.O_TRUNC, fs.FileMode(0o666)
	if create {
		flags |= os.O_CREATE
		if opts.NewMode != 0 {
			perm = 0o600
		}
	}
	f, err := os.OpenFile(path, flags, perm)
	if err != nil {
		return err
	}
	if create && opts.NewMode != 0 {
		if info, serr := f.Stat(); serr == nil && info.Mode().IsRegular() && info.Size() == 0 {
			err = f.Chmod(opts.NewMode)
		}
	}
	if err == nil {
		err = opts.write(f, data)
	}
	if err == nil && opts.Sync {
		if info, serr := f.Stat(); serr == nil && info.Mode().IsRegular() {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Restore puts the bytes a backup holds back into the file at path, in
// place, and removes the backup; restored is false when there is no
// backup. A writer killed while it rewrote path in place (Options.Backup)
// left it: it is the file as it was before that write.
func Restore(path, backup string, opts Options) (restored bool, err error) {
	data, err := readRegular(backup)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, statErr := os.Stat(path)
	opts.WriteFunc = nil // the old bytes go back whole or the backup stays
	if err := overwrite(path, data, errors.Is(statErr, fs.ErrNotExist), opts); err != nil {
		return false, err
	}
	if err := os.Remove(backup); err != nil {
		return true, err
	}
	if opts.Sync {
		syncDir(filepath.Dir(backup))
	}
	return true, nil
}

// ReadBackup reads the backup of a write in progress, or left by a writer
// that was killed: while it exists, it holds the file's last complete
// bytes. ok is false when there is none.
func ReadBackup(backup string) (data []byte, ok bool, err error) {
	data, err = readRegular(backup)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return data, err == nil, err
}

// readRegular reads a regular file (through links), refusing anything
// else without blocking on a FIFO.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is %s, not a regular file", path, Kind(info.Mode()))
	}
	return io.ReadAll(f)
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
