package trace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The observer's C source, built on first use by the system C compiler.
//
//go:embed observer/mt_abi.h observer/mt_python.h observer/observer.h observer/observer.c observer/python.c observer/crash.c observer/cuda.c observer/hip.c
var observerSources embed.FS

// observerFiles are the embedded files, headers first; the .c ones are
// compiled.
var observerFiles = []string{"mt_abi.h", "mt_python.h", "observer.h", "observer.c", "python.c", "crash.c", "cuda.c", "hip.c"}

// compileFlags build the observer: a shared library with only its entry
// points visible, warnings as errors.
var compileFlags = []string{"-shared", "-fPIC", "-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror",
	"-fvisibility=hidden", "-pthread"}

var linkFlags = []string{"-ldl"}

// ObserverLibrary is the built library's file name.
const ObserverLibrary = "libmiotool-observer.so"

// BuildOptions say how to build the observer.
type BuildOptions struct {
	// CC is the compiler command (a name or path, optionally with
	// arguments, as $CC is); "" means $CC, else the first of cc, gcc and
	// clang found.
	CC string
	// Path is the search path for it; "" means $PATH.
	Path string
	// CacheDir is where built libraries are kept; "" means the user cache
	// directory's miotool/trace.
	CacheDir string
}

// NoCompilerError says that no C compiler was found to build the observer.
type NoCompilerError struct {
	Tried []string
}

func (e *NoCompilerError) Error() string {
	return fmt.Sprintf("no C compiler to build the trace observer with (tried %s): install one "+
		"(for example: apt-get install gcc)", strings.Join(e.Tried, ", "))
}

// BuildError is a compiler that failed on the observer's source.
type BuildError struct {
	Command []string
	Output  string
	Err     error
}

func (e *BuildError) Error() string {
	out := strings.TrimSpace(e.Output)
	if out != "" {
		out = ":\n" + out
	}
	return fmt.Sprintf("building the trace observer (%s): %v%s", strings.Join(e.Command, " "), e.Err, out)
}

func (e *BuildError) Unwrap() error { return e.Err }

// ObserverSource is the embedded source, file by file, for tests and for
// building it by hand.
func ObserverSource() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, name := range observerFiles {
		data, err := observerSources.ReadFile("observer/" + name)
		if err != nil {
			return nil, err
		}
		out[name] = data
	}
	return out, nil
}

// Build returns the observer library for this source and compiler, built
// into the cache on first use. The cache is keyed by the SHA-256 of the
// source, the compiler (its path and version) and the flags, so a changed
// source or compiler builds anew; the library is compiled into a
// temporary folder and renamed into place, so a concurrent or interrupted
// build never leaves a partial file where it is looked for. A cached
// library is checked before it is used (CheckObserver, built from this
// source) and built again when it fails the check (a truncated or
// replaced file). With no compiler, a library of this source already in
// the cache (built by another compiler) serves; only when there is none
// is the error a *NoCompilerError.
func Build(ctx context.Context, o BuildOptions) (string, error) {
	src, err := ObserverSource()
	if err != nil {
		return "", err
	}
	return build(ctx, o, src)
}

func build(ctx context.Context, o BuildOptions, src map[string][]byte) (string, error) {
	cache := o.CacheDir
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory for the trace observer: %w", err)
		}
		cache = filepath.Join(base, "miotool", "trace")
	}
	id := sourceID(src)
	cc, err := findCompiler(o)
	if err != nil {
		if lib := cachedObserver(cache, id); lib != "" {
			return lib, nil
		}
		return "", err
	}
	key := buildKey(id, cc, compilerVersion(ctx, cc, cache))
	dir := filepath.Join(cache, key)
	lib := filepath.Join(dir, ObserverLibrary)
	if st, err := os.Stat(lib); err == nil && st.Mode().IsRegular() && checkBuilt(lib, id) == nil {
		return lib, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("trace observer cache: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", fmt.Errorf("trace observer cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	var sources []string
	for _, name := range observerFiles {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, src[name], 0o644); err != nil {
			return "", fmt.Errorf("trace observer cache: %w", err)
		}
		if strings.HasSuffix(name, ".c") {
			sources = append(sources, p)
		}
	}
	out := filepath.Join(tmp, ObserverLibrary)
	flags := append(compileFlags[:len(compileFlags):len(compileFlags)], `-DMT_SOURCE_ID="`+id+`"`)
	args := append(append(append(append(cc[1:len(cc):len(cc)], flags...), "-o", out), sources...), linkFlags...)
	cmd := exec.CommandContext(ctx, cc[0], args...)
	cmd.Dir = tmp
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return "", &BuildError{Command: append([]string{cc[0]}, args...), Output: output.String(), Err: err}
	}
	if err := checkBuilt(out, id); err != nil {
		return "", &BuildError{Command: append([]string{cc[0]}, args...), Output: output.String(), Err: err}
	}
	if err := os.Rename(out, lib); err != nil {
		return "", fmt.Errorf("trace observer cache: %w", err)
	}
	return lib, nil
}

// findCompiler is the compiler command to use, its program resolved.
func findCompiler(o BuildOptions) ([]string, error) {
	path := o.Path
	if path == "" {
		path = os.Getenv("PATH")
	}
	cc := o.CC
	if cc == "" {
		cc = os.Getenv("CC")
	}
	var candidates [][]string
	if f := strings.Fields(cc); len(f) > 0 {
		candidates = [][]string{f}
	} else {
		candidates = [][]string{{"cc"}, {"gcc"}, {"clang"}}
	}
	var tried []string
	for _, c := range candidates {
		if p := lookPath(c[0], path); p != "" {
			return append([]string{p}, c[1:]...), nil
		}
		name := c[0]
		if o.CC == "" && cc != "" {
			name = "$CC=" + cc
		}
		tried = append(tried, name)
	}
	return nil, &NoCompilerError{Tried: tried}
}

// lookPath finds an executable file by name in path (or as given, when the
// name has a slash); "" when there is none.
func lookPath(name, path string) string {
	executable := func(p string) bool {
		st, err := os.Stat(p)
		return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
	}
	if strings.Contains(name, "/") {
		if executable(name) {
			if abs, err := filepath.Abs(name); err == nil {
				return abs
			}
			return name
		}
		return ""
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue // the current directory is never searched
		}
		if p := filepath.Join(dir, name); executable(p) {
			return p
		}
	}
	return ""
}

// compilerVersion is what the compiler says of its version, "" when it
// says nothing. Asking runs the compiler's driver, a millisecond or more
// before every traced program starts, so the answer is kept in the cache
// beside the libraries, for the command and the identity of its program
// file: an upgrade that replaces or rewrites the file asks again. A
// wrapper (ccache) whose compiler changes behind it keeps the old answer,
// and with it the library built before, which is still checked against
// this source before it is used.
func compilerVersion(ctx context.Context, cc []string, cache string) string {
	stamp := ""
	if st, err := os.Stat(cc[0]); err == nil {
		stamp = fileStamp(st)
	}
	record := filepath.Join(cache, "compiler-"+hashText(strings.Join(cc, "\x00"))[:32])
	if data, err := os.ReadFile(record); err == nil && stamp != "" {
		if was, version, ok := strings.Cut(strings.TrimSuffix(string(data), "\n"), "\t"); ok && was == stamp {
			return version
		}
	}
	out, err := exec.CommandContext(ctx, cc[0], append(cc[1:len(cc):len(cc)], "-dumpfullversion", "-dumpversion")...).Output()
	if err != nil {
		return ""
	}
	version := strings.TrimSpace(string(out))
	if stamp != "" && !strings.ContainsAny(version, "\t\n") {
		keepRecord(record, stamp+"\t"+version+"\n")
	}
	return version
}

// keepRecord writes a cache record whole (a file renamed into place), or
// not at all: the cache only saves time.
func keepRecord(path, text string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".record-")
	if err != nil {
		return
	}
	_, werr := f.WriteString(text)
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
		_ = os.Remove(f.Name())
	}
}

// fileStamp tells one version of a file from another: its device and
// inode (a package upgrade renames a new file into place), size and
// modification and change times (a file rewritten in place).
func fileStamp(st os.FileInfo) string {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", s.Dev, s.Ino, s.Size, s.Mtim.Sec, s.Mtim.Nsec, s.Ctim.Sec, s.Ctim.Nsec)
	}
	return fmt.Sprintf("%d:%d", st.Size(), st.ModTime().UnixNano())
}

func hashText(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// sourceID is the SHA-256 of the observer's source, which the library
// carries in its marker (MT_SOURCE_ID) so that a cached one can be told
// from a library of another source.
func sourceID(src map[string][]byte) string {
	h := sha256.New()
	for _, name := range observerFiles {
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(src[name]))
		h.Write(src[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// buildKey names a library's folder in the cache: the source (by its ID),
// the compiler command and version, and the flags.
func buildKey(source string, cc []string, version string) string {
	return hashText(fmt.Sprintf("source\x00%s\x00cc\x00%s\x00%s\x00flags\x00%s\x00%s", source,
		strings.Join(cc, " "), version, strings.Join(compileFlags, " "), strings.Join(linkFlags, " ")))
}
