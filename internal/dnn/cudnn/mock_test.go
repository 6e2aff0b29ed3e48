package cudnn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// The ABI tests run the binding against testdata/mockcudnn.c, built here
// with gcc into <tmp>/libcudnn.so.9. The stand-in logs each call with its
// arguments and computes on host memory, so a test passes Go buffers as
// device pointers and checks both the log and the numbers. Without gcc the
// tests skip.

var stand struct {
	once sync.Once
	dir  string
	path string
	err  error

	log, logReset, failNext, setCompute, setVersion, ctxRetains, currentCtx, perfLayout, ctxSetCurrent uintptr
}

func TestMain(m *testing.M) {
	code := m.Run()
	if stand.dir != "" {
		os.RemoveAll(stand.dir)
	}
	os.Exit(code)
}

func buildStandIn(t testing.TB) {
	t.Helper()
	stand.once.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			stand.err = err
			return
		}
		if stand.dir, stand.err = os.MkdirTemp("", "miotool-mockcudnn-"); stand.err != nil {
			return
		}
		stand.path = filepath.Join(stand.dir, Soname)
		out, err := exec.Command(gcc, "-shared", "-fPIC", "-O1", "-Wall", "-o", stand.path, "testdata/mockcudnn.c", "-lpthread").CombinedOutput()
		if err != nil {
			stand.err = fmt.Errorf("building the stand-in: %v\n%s", err, out)
			stand.path = ""
			return
		}
		h, err := purego.Dlopen(stand.path, gpulib.DlopenMode)
		if err != nil {
			stand.err = err
			return
		}
		stand.err = gpulib.Bind(gpulib.Lookup(h), "stand-in libcudnn", []gpulib.Symbol{
			{Name: "mock_log", Addr: &stand.log},
			{Name: "mock_log_reset", Addr: &stand.logReset},
			{Name: "mock_fail_next", Addr: &stand.failNext},
			{Name: "mock_set_compute", Addr: &stand.setCompute},
			{Name: "mock_set_version", Addr: &stand.setVersion},
			{Name: "mock_ctx_retains", Addr: &stand.ctxRetains},
			{Name: "mock_current_ctx", Addr: &stand.currentCtx},
			{Name: "mock_perf_layout", Addr: &stand.perfLayout},
			{Name: "cuCtxSetCurrent", Addr: &stand.ctxSetCurrent},
		})
	})
	if stand.path == "" {
		t.Skipf("stand-in libcudnn not built (no C compiler?): %v", stand.err)
	}
	if stand.err != nil {
		t.Fatalf("stand-in libcudnn: %v", stand.err)
	}
}

func standInSpec() gpulib.SearchSpec {
	return gpulib.SearchSpec{Name: LibraryName, Sonames: []string{Soname}, Dirs: []string{stand.dir}, SkipLoaderPath: true}
}

// openStandIn builds and opens the stand-in and clears its log.
func openStandIn(t *testing.T) *Library {
	t.Helper()
	buildStandIn(t)
	l, err := Open(standInSpec())
	if err != nil {
		t.Fatal(err)
	}
	gpulib.Call(stand.logReset)
	return l
}

func standInLog() string {
	buf := make([]byte, 1<<18)
	n := gpulib.Call(stand.log, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	return string(buf[:n])
}

// logLines returns the log lines that start with call.
func logLines(call string) []string {
	var out []string
	for _, l := range strings.Split(standInLog(), "\n") {
		if strings.HasPrefix(l, call+" ") {
			out = append(out, l)
		}
	}
	return out
}

func failNext(call string, status Status) {
	name := gpulib.CString(call)
	gpulib.Call(stand.failNext, uintptr(unsafe.Pointer(&name[0])), uintptr(status))
}

// lockContext locks the test goroutine to its OS thread for the rest of
// the test and makes the stand-in's device 0 context current there.
func lockContext(t *testing.T) *Context {
	t.Helper()
	ctx, err := OpenContext(stand.path, 0)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	t.Cleanup(func() {
		_ = ctx.Close()
		runtime.UnlockOSThread()
	})
	if err := ctx.MakeCurrent(); err != nil {
		t.Fatal(err)
	}
	return ctx
}

func devPtr(v []float32) hip.DevPtr { return hip.DevPtr(uintptr(unsafe.Pointer(&v[0]))) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantStatus(t *testing.T, err error, want Status, what string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Status != want {
		t.Fatalf("%s: got %v, want status %s", what, err, want)
	}
	return e
}
