package miopen

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

// The ABI tests run the binding against testdata/mockmiopen.c, built here
// with gcc into <tmp>/libMIOpen.so.1. The stand-in logs each call with its
// arguments and computes on host memory, so a test passes Go buffers as
// device pointers and checks both the log and the numbers. Without gcc the
// tests skip.

var stand struct {
	once sync.Once
	dir  string
	path string
	err  error
	lib  *Library // the first Open of the process: it set the environment the stand-in saw at load

	log, logReset, failNext, setCompute, envAtLoad, threadDevice, layout uintptr
}

func TestMain(m *testing.M) {
	// The first Open must find the find-db switch unset to set it itself.
	os.Unsetenv(EnvDisableFindDB)
	code := m.Run()
	if stand.lib != nil {
		stand.lib.RemoveUserDB()
	}
	if stand.dir != "" {
		os.RemoveAll(stand.dir)
	}
	os.Exit(code)
}

// openStandIn builds the stand-in, opens it once per process with the
// default options, and clears its log.
func openStandIn(t testing.TB) *Library {
	t.Helper()
	stand.once.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			stand.err = err
			return
		}
		if stand.dir, stand.err = os.MkdirTemp("", "miotool-mockmiopen-"); stand.err != nil {
			return
		}
		stand.path = filepath.Join(stand.dir, Soname)
		out, err := exec.Command(gcc, "-shared", "-fPIC", "-O1", "-Wall", "-o", stand.path, "testdata/mockmiopen.c", "-lpthread").CombinedOutput()
		if err != nil {
			stand.err = fmt.Errorf("building the stand-in: %v\n%s", err, out)
			stand.path = ""
			return
		}
		if stand.lib, stand.err = Open(standInSpec(), Options{}); stand.err != nil {
			return
		}
		h, err := purego.Dlopen(stand.path, gpulib.DlopenMode)
		if err != nil {
			stand.err = err
			return
		}
		stand.err = gpulib.Bind(gpulib.Lookup(h), "stand-in libMIOpen", []gpulib.Symbol{
			{Name: "mock_log", Addr: &stand.log},
			{Name: "mock_log_reset", Addr: &stand.logReset},
			{Name: "mock_fail_next", Addr: &stand.failNext},
			{Name: "mock_set_compute", Addr: &stand.setCompute},
			{Name: "mock_env_at_load", Addr: &stand.envAtLoad},
			{Name: "mock_thread_device", Addr: &stand.threadDevice},
			{Name: "mock_layout", Addr: &stand.layout},
		})
	})
	if stand.path == "" {
		t.Skipf("stand-in libMIOpen not built (no C compiler?): %v", stand.err)
	}
	if stand.err != nil {
		t.Fatalf("stand-in libMIOpen: %v", stand.err)
	}
	gpulib.Call(stand.logReset)
	return stand.lib
}

func standInSpec() gpulib.SearchSpec {
	return gpulib.SearchSpec{Name: LibraryName, Sonames: []string{Soname}, Dirs: []string{stand.dir}, SkipLoaderPath: true}
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

// lockDevice locks the test goroutine to its OS thread for the rest of the
// test and selects stand-in device ordinal there.
func lockDevice(t *testing.T, ordinal int) *DeviceSelector {
	t.Helper()
	sel, err := OpenDeviceSelector(stand.path, ordinal)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	if err := sel.Select(); err != nil {
		t.Fatal(err)
	}
	return sel
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
