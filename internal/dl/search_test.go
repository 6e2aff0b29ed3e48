package dl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"

	"miotool/internal/hip"
)

func TestCandidatesOrder(t *testing.T) {
	spec := SearchSpec{
		Name:    "libfake",
		Sonames: []string{"libfake.so.13", "libfake.so.12", "libfake.so"},
		Dirs:    []string{"/opt/a/lib64", "", "/opt/b/lib"},
	}
	var got []string
	for _, c := range spec.Candidates() {
		got = append(got, c.Path)
	}
	want := []string{
		"libfake.so.13", "libfake.so.12", "libfake.so",
		"/opt/a/lib64/libfake.so.13", "/opt/a/lib64/libfake.so.12", "/opt/a/lib64/libfake.so",
		"/opt/b/lib/libfake.so.13", "/opt/b/lib/libfake.so.12", "/opt/b/lib/libfake.so",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("candidates:\n got %q\nwant %q", got, want)
	}
	spec.SkipLoaderPath = true
	if c := spec.Candidates(); c[0].Path != "/opt/a/lib64/libfake.so.13" || c[0].ViaLoader {
		t.Fatalf("SkipLoaderPath: first candidate %+v", c[0])
	}
}

func TestExpandDirsGlobNewestFirst(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"cuda", "cuda-9.2", "cuda-12.6", "cuda-13.0", "cuda-12.10"} {
		if err := os.MkdirAll(filepath.Join(root, d, "lib64"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink to a versioned install is the same directory: tried once.
	if err := os.Symlink(filepath.Join(root, "cuda-13.0"), filepath.Join(root, "cuda-current")); err != nil {
		t.Fatal(err)
	}
	explicit := filepath.Join(root, "explicit")
	got := ExpandDirs([]string{explicit, filepath.Join(root, "cuda*", "lib64"), filepath.Join(root, "cuda-12.6", "lib64")})
	var rel []string
	for _, d := range got {
		r, _ := filepath.Rel(root, d)
		rel = append(rel, r)
	}
	want := []string{"explicit", "cuda-13.0/lib64", "cuda-12.10/lib64", "cuda-12.6/lib64", "cuda-9.2/lib64", "cuda/lib64"}
	if !reflect.DeepEqual(rel, want) {
		t.Fatalf("expanded dirs:\n got %q\nwant %q", rel, want)
	}
}

func TestSortNewestFirst(t *testing.T) {
	tests := []struct{ in, want []string }{
		{[]string{"/opt/rocm-6.3.1/lib", "/opt/rocm/lib", "/opt/rocm-7.0.0/lib", "/opt/rocm-6.10.0/lib"},
			[]string{"/opt/rocm-7.0.0/lib", "/opt/rocm-6.10.0/lib", "/opt/rocm-6.3.1/lib", "/opt/rocm/lib"}},
		{[]string{"/x/cuda-12/lib64", "/x/cuda-12.1/lib64"}, []string{"/x/cuda-12.1/lib64", "/x/cuda-12/lib64"}},
		{[]string{"/b", "/a"}, []string{"/a", "/b"}},
	}
	for _, tt := range tests {
		got := append([]string(nil), tt.in...)
		SortNewestFirst(got)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SortNewestFirst(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestOpenRecordsEveryAttempt(t *testing.T) {
	real := realLibrary(t)
	root := t.TempDir()
	notELF := filepath.Join(root, "broken", "libfake.so.1")
	writeFile(t, notELF, "this is not a shared object\n")
	good := filepath.Join(root, "good", "libfake.so.1")
	if err := os.MkdirAll(filepath.Dir(good), 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy, not a link: the loader would otherwise share one load of the
	// file with other tests under whichever name came first.
	data, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, data, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := SearchSpec{
		Name:    "libfake",
		Sonames: []string{"libmiotool-fake-absent.so.1", "libfake.so.1"},
		Dirs:    []string{filepath.Join(root, "missing"), filepath.Join(root, "broken"), filepath.Join(root, "good")},
	}
	h, lib, err := Open(spec)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if h == 0 {
		t.Fatal("Open returned a zero handle")
	}
	wantPaths := []string{
		"libmiotool-fake-absent.so.1", "libfake.so.1",
		filepath.Join(root, "missing", "libmiotool-fake-absent.so.1"), filepath.Join(root, "missing", "libfake.so.1"),
		filepath.Join(root, "broken", "libmiotool-fake-absent.so.1"), notELF,
		filepath.Join(root, "good", "libmiotool-fake-absent.so.1"), good,
	}
	var gotPaths []string
	for _, a := range lib.Tried {
		gotPaths = append(gotPaths, a.Path)
	}
	if !reflect.DeepEqual(gotPaths, wantPaths) {
		t.Fatalf("attempts:\n got %q\nwant %q", gotPaths, wantPaths)
	}
	for i, a := range lib.Tried {
		last := i == len(lib.Tried)-1
		switch {
		case last && a.Err != "":
			t.Errorf("the loading attempt %s has error %q", a.Path, a.Err)
		case !last && a.Err == "":
			t.Errorf("failed attempt %s has no error", a.Path)
		}
	}
	if a := lib.Tried[2]; a.Err != "not found" {
		t.Errorf("missing file recorded as %q, want \"not found\"", a.Err)
	}
	if a := lib.Tried[5]; a.Err == "not found" || a.Err == "" || strings.HasPrefix(a.Err, a.Path) {
		t.Errorf("a file that fails to dlopen should carry the loader's message (without the path again), got %q", a.Err)
	}
	if lib.Loaded == "" || lib.Name != "libfake" {
		t.Errorf("library record %+v", lib)
	}
}

func TestOpenNotFound(t *testing.T) {
	dir := t.TempDir()
	_, lib, err := Open(SearchSpec{Name: "libfake", Sonames: []string{"libmiotool-fake-absent.so.3"}, Dirs: []string{dir}})
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("want *NotFoundError, got %T %v", err, err)
	}
	if len(lib.Tried) != 2 || lib.Loaded != "" {
		t.Fatalf("record %+v", lib)
	}
	msg := err.Error()
	for _, want := range []string{"libmiotool-fake-absent.so.3 not found", filepath.Join(dir, "libmiotool-fake-absent.so.3") + ": not found"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
}

func TestOpenThroughLoaderReportsRealPath(t *testing.T) {
	// libc.so.6 is loaded by the process itself, under its real path.
	_, lib, err := Open(SearchSpec{Name: "libc", Sonames: []string{"libc.so.6"}})
	if err != nil {
		t.Skipf("libc.so.6 does not open by soname here: %v", err)
	}
	if !filepath.IsAbs(lib.Loaded) || filepath.Base(lib.Loaded) != "libc.so.6" {
		t.Fatalf("Loaded = %q, want the absolute path of libc.so.6", lib.Loaded)
	}
	if _, err := os.Stat(lib.Loaded); err != nil {
		t.Fatalf("Loaded path does not exist: %v", err)
	}
	if len(lib.Tried) != 1 || lib.Tried[0].Path != "libc.so.6" {
		t.Fatalf("attempts %+v", lib.Tried)
	}
}

func TestFormatAttempts(t *testing.T) {
	got := FormatAttempts([]hip.PathAttempt{{Path: "a", Err: "not found"}, {Path: "b"}})
	if got != "a: not found; b: loaded" {
		t.Fatalf("got %q", got)
	}
	if FormatAttempts(nil) != "nothing" {
		t.Fatal("empty attempts")
	}
}

// TestOpenFailureReasonSurvivesThreadMoves opens an absent soname from
// many goroutines while others keep the scheduler busy, so that goroutines
// move between OS threads: dlerror's message is per thread, and every
// failed attempt must still carry the loader's own reason for it (an empty
// one reads as "loaded").
func TestOpenFailureReasonSurvivesThreadMoves(t *testing.T) {
	const openers, opens = 8, 150
	stop := make(chan struct{})
	var busy sync.WaitGroup
	for range 4 {
		busy.Add(1)
		go func() {
			defer busy.Done()
			for {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
		}()
	}
	defer func() { close(stop); busy.Wait() }()

	reasons := make(chan string, openers*opens)
	var wg sync.WaitGroup
	for range openers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range opens {
				_, lib, err := Open(SearchSpec{Name: "libfake", Sonames: []string{"libmiotool-fake-absent.so.9"}})
				if err == nil || len(lib.Tried) != 1 {
					reasons <- "unexpected result"
					continue
				}
				reasons <- lib.Tried[0].Err
			}
		}()
	}
	wg.Wait()
	close(reasons)
	counts := map[string]int{}
	for r := range reasons {
		counts[r]++
	}
	if len(counts) != 1 {
		t.Fatalf("reasons differ between attempts of one soname: %v", counts)
	}
	for r := range counts {
		if r == "" || r == dlopenNoMessage || r == "unexpected result" {
			t.Fatalf("failed attempts recorded as %q", r)
		}
	}
}

// TestOpenPath opens a library in both modes callers use and refuses an
// absent one with the loader's reason, from goroutines that move between
// OS threads, so that no failure comes back without its message.
func TestOpenPath(t *testing.T) {
	real := realLibrary(t)
	absent := filepath.Join(t.TempDir(), "libmiotool-absent.so.1")
	for _, tt := range []struct {
		name string
		path string
		mode int
		ok   bool
	}{
		{"local", real, DlopenMode, true},
		{"global", real, purego.RTLD_NOW | purego.RTLD_GLOBAL, true},
		{"absent", absent, DlopenMode, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs := make(chan error, 64)
			var wg sync.WaitGroup
			for range cap(errs) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runtime.Gosched()
					h, err := OpenPath(tt.path, tt.mode)
					switch {
					case tt.ok && (err != nil || h == 0):
						errs <- fmt.Errorf("handle %#x, error %v", h, err)
					case !tt.ok && (err == nil || h != 0):
						errs <- fmt.Errorf("opened: handle %#x, error %v", h, err)
					case !tt.ok && !strings.Contains(err.Error(), tt.path):
						errs <- fmt.Errorf("the reason %q does not name the path", err)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
		})
	}
}
