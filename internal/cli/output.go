package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"miotool/internal/report"
)

// OutputFlags are the flags that choose where and how a result is written
// and change nothing about what is checked: a suite's checks may not set
// them, since the suite sets them itself (ResultArgs), and a checklist's
// Command column leaves them out.
var OutputFlags = []string{"--format", "--junit", "--no-progress"}

// ResultArgs end the command line of a miotool child whose result is read
// back: one miotool/result JSON document on its standard output, and no
// progress drawn on its standard error.
func ResultArgs() []string { return []string{"--format", string(report.JSON), "--no-progress"} }

// CheckOutputFile checks, before any work is done, that path (the value of
// flag, e.g. "--junit") can be written: its folder exists and takes new
// files, and the path is not a folder. A long run must not end in a result
// that cannot be saved. It creates and removes a file of its own in the
// folder, since permission bits alone do not say (ACLs, read-only mounts,
// root); a file already at path is left as it is.
func CheckOutputFile(flag, path string) error {
	if info, err := os.Stat(path); err == nil {
		if info.IsDir() {
			return UsageErrorf("%s %s: is a folder; give a file name", flag, path)
		}
		// An existing file is opened for writing without truncation, so it
		// is unchanged until the result replaces it.
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return UsageErrorf("%s %s: cannot be written: %v", flag, path, unwrapPath(err))
		}
		return f.Close()
	}
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return UsageErrorf("%s %s: the folder %s does not exist", flag, path, dir)
	case err != nil:
		return UsageErrorf("%s %s: %v", flag, path, err)
	case !info.IsDir():
		return UsageErrorf("%s %s: %s is not a folder", flag, path, dir)
	}
	probe, err := os.CreateTemp(dir, ".miotool-write-check-*")
	if err != nil {
		return UsageErrorf("%s %s: the folder %s cannot be written: %v", flag, path, dir, unwrapPath(err))
	}
	name := probe.Name()
	probe.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("%s: removing the write check %s: %w", flag, name, err)
	}
	return nil
}

// unwrapPath drops the path an *fs.PathError repeats (the probe's name).
func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
