package dl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"miotool/internal/hip"
	"miotool/internal/words"
)

// SearchSpec says where to look for one shared library.
//
// Candidates are tried location by location: first every soname through the
// dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache, the default
// directories), then every soname in each directory of Dirs. Within a
// location, sonames are tried in the order given, so list the newest first.
type SearchSpec struct {
	Name    string   // the report label, e.g. "libcuda"
	Sonames []string // file names, most preferred first
	// Dirs are tried after the loader's search, in order. An entry may be a
	// glob pattern; its matches are tried newest version first (by the
	// numbers in their names), unversioned names last. Empty entries and
	// directories already tried (after resolving symlinks) are skipped.
	Dirs []string
	// SkipLoaderPath leaves out the loader's search.
	SkipLoaderPath bool
}

// Candidate is one path a search will try.
type Candidate struct {
	Path string
	// ViaLoader is true for a bare soname handed to the dynamic loader.
	ViaLoader bool
}

// Candidates lists the paths Open would try, in order.
func (s SearchSpec) Candidates() []Candidate {
	var out []Candidate
	if !s.SkipLoaderPath {
		for _, n := range s.Sonames {
			out = append(out, Candidate{Path: n, ViaLoader: true})
		}
	}
	for _, dir := range ExpandDirs(s.Dirs) {
		for _, n := range s.Sonames {
			out = append(out, Candidate{Path: filepath.Join(dir, n)})
		}
	}
	return out
}

// ExpandDirs expands glob patterns (newest version first), drops empty
// entries and removes directories that resolve to one already listed.
func ExpandDirs(dirs []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		key := filepath.Clean(d)
		if real, err := filepath.EvalSymlinks(d); err == nil {
			key = real
		}
		if seen[key] {
			return
		}
		seen[key] = true
		out = append(out, filepath.Clean(d))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if !hasGlobMeta(d) {
			add(d)
			continue
		}
		matches, err := filepath.Glob(d)
		if err != nil {
			continue // a malformed pattern matches nothing
		}
		SortNewestFirst(matches)
		for _, m := range matches {
			add(m)
		}
	}
	return out
}

func hasGlobMeta(p string) bool { return strings.ContainsAny(p, "*?[") }

// SortNewestFirst orders paths by the numbers in the part where they
// differ, highest first (so cuda-13.0 before cuda-12.6 before cuda-12), with
// paths holding no number there last; ties keep lexical order.
func SortNewestFirst(paths []string) {
	cut := versionedPart(paths)
	sort.SliceStable(paths, func(i, j int) bool {
		a, b := versionOf(paths[i][cut:]), versionOf(paths[j][cut:])
		if (len(a) == 0) != (len(b) == 0) {
			return len(a) > 0
		}
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] > b[k]
			}
		}
		if len(a) != len(b) {
			return len(a) > len(b)
		}
		return paths[i] < paths[j]
	})
}

// versionedPart is the length of the paths' common prefix, cut back to just
// after a separator so that no number is split.
func versionedPart(paths []string) int {
	if len(paths) < 2 {
		return 0
	}
	n := len(paths[0])
	for _, p := range paths[1:] {
		i := 0
		for i < n && i < len(p) && p[i] == paths[0][i] {
			i++
		}
		n = i
	}
	for n > 0 && strings.IndexByte("/-._", paths[0][n-1]) < 0 {
		n--
	}
	return n
}

// versionOf extracts the digit groups of a path, e.g. [13 0] from
// /usr/local/cuda-13.0/lib64 (the 64 of lib64 is ignored because it follows
// letters directly: only groups that start a path element or follow a
// separator such as '-', '.' or '_' count).
func versionOf(p string) []int {
	var out []int
	for i := 0; i < len(p); {
		c := p[i]
		if c < '0' || c > '9' {
			i++
			continue
		}
		j := i
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		if i == 0 || strings.IndexByte("/-._", p[i-1]) >= 0 {
			if n, err := strconv.Atoi(p[i:j]); err == nil {
				out = append(out, n)
			}
		}
		i = j
	}
	return out
}

// NotFoundError says that no candidate of a search loaded.
type NotFoundError struct {
	Library hip.Library
	Sonames []string
}

func (e *NotFoundError) Error() string {
	want := strings.Join(e.Sonames, ", ")
	if want == "" {
		want = e.Library.Name
	}
	return fmt.Sprintf("%s not found (tried %s)", want, FormatAttempts(e.Library.Tried))
}

// FormatAttempts renders attempts on one line: "path: why; path: why".
func FormatAttempts(tried []hip.PathAttempt) string {
	if len(tried) == 0 {
		return "nothing"
	}
	parts := make([]string, len(tried))
	for i, a := range tried {
		if a.Err == "" {
			parts[i] = a.Path + ": loaded"
		} else {
			parts[i] = a.Path + ": " + a.Err
		}
	}
	return strings.Join(parts, "; ")
}

// DlopenMode is the mode libraries are opened with: resolve everything now
// (a broken install fails here, not at the first call) and keep the symbols
// private to the handle.
const DlopenMode = purego.RTLD_NOW | purego.RTLD_LOCAL

// Open tries the candidates of spec in order and returns the handle of the
// first that loads, with the record of every attempt. Candidates that are
// absolute paths and do not exist are recorded as "not found" without a
// dlopen. On failure the error is a *NotFoundError carrying the same record.
func Open(spec SearchSpec) (uintptr, hip.Library, error) {
	lib := hip.Library{Name: spec.Name}
	for _, c := range spec.Candidates() {
		if !c.ViaLoader {
			if _, err := os.Stat(c.Path); err != nil {
				why := "not found"
				if !errors.Is(err, fs.ErrNotExist) {
					why = err.Error()
				}
				lib.Tried = append(lib.Tried, hip.PathAttempt{Path: c.Path, Err: why})
				continue
			}
		}
		h, err := OpenPath(c.Path, DlopenMode)
		if err != nil {
			// dlerror repeats the path; the attempt already names it.
			why := strings.TrimPrefix(words.OneLine(err.Error()), c.Path+": ")
			if why == "" {
				why = dlopenNoMessage
			}
			lib.Tried = append(lib.Tried, hip.PathAttempt{Path: c.Path, Err: why})
			continue
		}
		lib.Tried = append(lib.Tried, hip.PathAttempt{Path: c.Path})
		lib.Loaded = c.Path
		if real := LoadedPath(h); real != "" {
			lib.Loaded = real
		}
		return h, lib, nil
	}
	return 0, lib, &NotFoundError{Library: lib, Sonames: spec.Sonames}
}

// dlopenNoMessage records a failed dlopen whose dlerror said nothing, so
// that a failed attempt never reads as one that loaded.
const dlopenNoMessage = "the dynamic loader refused it without a message"

// OpenPath opens path with mode on one OS thread throughout: dlerror's
// message is per thread, and a goroutine moved to another thread between
// dlopen and dlerror reads that thread's message, or none (then a failed
// open looked as if it had loaded). A failure dlerror said nothing about
// still carries a message. Use DlopenMode unless the library must lend its
// symbols to libraries opened after it.
func OpenPath(path string, mode int) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, mode)
	if err != nil && err.Error() == "" {
		return 0, errors.New(dlopenNoMessage)
	}
	return h, err
}

// rtldDILinkmap is dlinfo's request for the library's struct link_map.
const rtldDILinkmap = 2

var dlinfoAddr = sync.OnceValue(func() uintptr {
	p, err := purego.Dlsym(purego.RTLD_DEFAULT, "dlinfo")
	if err != nil {
		return 0
	}
	return p
})

// LoadedPath asks the dynamic loader which file a handle came from, so a
// library found through the loader's search is reported by its real path.
// It returns "" where that cannot be told.
func LoadedPath(handle uintptr) string {
	fn := dlinfoAddr()
	if fn == 0 || handle == 0 {
		return ""
	}
	var linkMap uintptr
	if Call(fn, handle, rtldDILinkmap, uintptr(unsafe.Pointer(&linkMap))) != 0 || linkMap == 0 {
		return ""
	}
	// struct link_map { ElfW(Addr) l_addr; char *l_name; ... }
	name := *(*uintptr)(unsafe.Add(pointerAt(linkMap), unsafe.Sizeof(uintptr(0))))
	s := GoString(name)
	if !filepath.IsAbs(s) {
		return ""
	}
	return s
}
