package cli

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// writeOutputFiles writes every file or none: each is first written beside
// its target and renamed over it only once all are written, so that a run
// that cannot save one of its files (a full disk) leaves every target as it
// was, and no file says PASS of a run that exits 3. A target that a rename
// would replace by another file (one with other hard links, a device such
// as /dev/null, a FIFO, a dangling symlink) is written in place instead,
// before the renames; a symlink to a regular file is followed, and the file
// it leads to replaced.
func writeOutputFiles(files []outputFile) error {
	type staged struct{ flag, path, target, temp string }
	var renames []staged
	var inPlace []outputFile
	removeTemps := func(from int) {
		for _, s := range renames[from:] {
			os.Remove(s.temp)
		}
	}
	for _, f := range files {
		target, ok := renameTarget(f.path)
		if !ok {
			inPlace = append(inPlace, f)
			continue
		}
		temp, err := writeTemp(target, f.data)
		if err != nil {
			removeTemps(0)
			return fmt.Errorf("%s %s: %w", f.flag, f.path, unwrapPath(err))
		}
		renames = append(renames, staged{f.flag, f.path, target, temp})
	}
	for _, f := range inPlace {
		if err := os.WriteFile(f.path, f.data, 0o666); err != nil {
			removeTemps(0)
			return fmt.Errorf("%s %s: %w", f.flag, f.path, unwrapPath(err))
		}
	}
	for i, s := range renames {
		if err := os.Rename(s.temp, s.target); err != nil {
			removeTemps(i)
			return fmt.Errorf("%s %s: %w", s.flag, s.path, unwrapPath(err))
		}
	}
	return nil
}

// renameTarget is the file that writing path replaces, and whether a
// rename may replace it: it is absent, or a regular file with no other
// hard link (reached through path's symlinks, if any).
func renameTarget(path string) (string, bool) {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		if info, lerr := os.Lstat(path); lerr == nil && info.Mode()&fs.ModeSymlink != 0 {
			return path, false // a dangling link: writing through it creates its target
		}
		target = path
	}
	info, err := os.Stat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return target, true
	case err != nil, !info.Mode().IsRegular(), linkCount(info) > 1:
		return path, false
	}
	return target, true
}

// writeTemp writes data to a new file beside target and returns its name.
// It gets target's permissions when target exists, and a new file's
// (0666 less the umask) otherwise.
func writeTemp(target string, data []byte) (string, error) {
	dir, base := filepath.Split(target)
	perm, keep := fs.FileMode(0o666), false
	if info, err := os.Stat(target); err == nil {
		perm, keep = info.Mode().Perm(), true
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, "."+base+"."+rand.Text()[:10]+".tmp")
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && try < 5 {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if err == nil && keep {
			err = f.Chmod(perm) // the umask took bits the old file had
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
			return "", err
		}
		return name, nil
	}
}
