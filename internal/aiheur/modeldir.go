package aiheur

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Embedded holds model files compiled into the binary (a flat directory
// of *.tn.model / *.ktn.model files), used when no model directory is
// found. It is nil until a build fills it in.
var Embedded fs.FS

// Sources ModelDir reports; SourceFlag is the caller's override, which the
// caller's command line spells.
const (
	SourceFlag     = "flag"
	SourceEmbedded = "embedded"
	SourceNone     = "none"
)

// ModelDir picks the directory to load MIOpen's model files from and says
// where the choice came from:
//
//  1. override (the caller's own setting), used as given;
//  2. $MIOPEN_SYSTEM_DB_PATH, MIOpen's own override of its db directory;
//  3. $ROCM_PATH/share/miopen/db;
//  4. /opt/rocm/share/miopen/db, then the newest /opt/rocm-*/share/miopen/db;
//  5. <dir of a libMIOpen.so found on $LD_LIBRARY_PATH or in a ROCm
//     lib dir>/../share/miopen/db (how MIOpen itself finds it);
//  6. /opt/rocm/miopen/share/miopen/db (ROCm 5.2 and older).
//
// Candidates 2-6 count only when they hold at least one *.tn.model file.
// With none, dir is "" and source is SourceEmbedded (or SourceNone when
// nothing is embedded either).
func ModelDir(override string) (dir string, source string) {
	return findModelDir(override, os.Getenv, "/opt")
}

// findModelDir is ModelDir with the environment and the /opt root
// injectable for tests.
func findModelDir(override string, getenv func(string) string, opt string) (string, string) {
	if override != "" {
		return override, SourceFlag
	}
	type candidate struct{ dir, source string }
	var cands []candidate
	if v := getenv("MIOPEN_SYSTEM_DB_PATH"); v != "" {
		cands = append(cands, candidate{v, "$MIOPEN_SYSTEM_DB_PATH"})
	}
	rocmPath := getenv("ROCM_PATH")
	if rocmPath != "" {
		cands = append(cands, candidate{filepath.Join(rocmPath, "share", "miopen", "db"), "$ROCM_PATH"})
	}
	rocm := filepath.Join(opt, "rocm")
	cands = append(cands, candidate{filepath.Join(rocm, "share", "miopen", "db"), rocm})
	versioned, _ := filepath.Glob(filepath.Join(opt, "rocm-*"))
	sort.Sort(sort.Reverse(sort.StringSlice(versioned))) // newest first, roughly
	for _, v := range versioned {
		cands = append(cands, candidate{filepath.Join(v, "share", "miopen", "db"), v})
	}
	for _, dir := range cands {
		if hasTunaNetFiles(dir.dir) {
			return dir.dir, dir.source
		}
	}
	libDirs := filepath.SplitList(getenv("LD_LIBRARY_PATH"))
	if rocmPath != "" {
		libDirs = append(libDirs, filepath.Join(rocmPath, "lib"))
	}
	libDirs = append(libDirs, filepath.Join(rocm, "lib"))
	for _, v := range versioned {
		libDirs = append(libDirs, filepath.Join(v, "lib"))
	}
	for _, lib := range libDirs {
		if lib == "" {
			continue
		}
		so := filepath.Join(lib, "libMIOpen.so")
		real, err := filepath.EvalSymlinks(so)
		if err != nil {
			continue
		}
		db := filepath.Join(filepath.Dir(real), "..", "share", "miopen", "db")
		if hasTunaNetFiles(db) {
			return filepath.Clean(db), "libMIOpen.so at " + real
		}
	}
	if legacy := filepath.Join(rocm, "miopen", "share", "miopen", "db"); hasTunaNetFiles(legacy) {
		return legacy, rocm + "/miopen"
	}
	if Embedded != nil {
		return "", SourceEmbedded
	}
	return "", SourceNone
}

func hasTunaNetFiles(dir string) bool {
	matches, err := filepath.Glob(filepath.Join(dir, "*.tn.model"))
	return err == nil && len(matches) > 0
}

// ModelFS opens the models ModelDir chose: the directory, or Embedded
// when dir is "".
func ModelFS(dir string) (fs.FS, error) {
	if dir != "" {
		info, err := os.Stat(dir)
		if err != nil {
			return nil, fmt.Errorf("model directory: %w", err)
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("model directory %s is not a directory", dir)
		}
		return os.DirFS(dir), nil
	}
	if Embedded != nil {
		return Embedded, nil
	}
	return nil, ErrNoModels
}

// ErrNoModels is ModelFS's error when no model directory was found and the
// build embeds no models. It names where ModelDir looked; the caller adds
// how its user gives a directory.
var ErrNoModels = errors.New("no MIOpen model directory was found (none under MIOPEN_SYSTEM_DB_PATH, ROCM_PATH, /opt/rocm or beside a libMIOpen.so) and this build embeds no models")

// ModelFiles lists the model files in fsys, sorted.
func ModelFiles(fsys fs.FS) ([]string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".tn.model") || strings.HasSuffix(e.Name(), ".ktn.model")) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
