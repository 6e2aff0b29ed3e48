package trace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"miotool/internal/trace/tracetest"
)

// The C tests build, with gcc, into one temporary folder per test binary:
// the stand-ins and test programs of tracetest, and the observer (through
// Build, into its own cache). They skip without gcc.

// limit bounds every wait of these tests: wide for a loaded machine.
const limit = tracetest.Limit

type kit struct {
	dir      string
	observer string
	lib      string // the stand-in libraries
	hipProg  string // testdata/progs/prog.c against HIP, -rdynamic
	hipNoDyn string // the same without dynamic symbols of its own
	cudaProg string // against the CUDA driver API, -rdynamic
	loader   string // dlopens a library RTLD_LOCAL
	helper   string // the library loader loads, linked to libamdhip64
	cupti    string
}

var (
	kitOnce sync.Once
	theKit  kit
	kitErr  error
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helper())
	}
	code := m.Run()
	tracetest.Remove()
	os.Exit(code)
}

func gccOrSkip(t testing.TB) string {
	t.Helper()
	return tracetest.GCC(t)
}

// standIns builds the kit once and returns it.
func standIns(t testing.TB) *kit {
	t.Helper()
	gcc := gccOrSkip(t)
	tk := tracetest.Shared(t)
	kitOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		obs, err := Build(ctx, BuildOptions{CC: gcc, CacheDir: filepath.Join(tk.Dir, "cache")})
		if err != nil {
			kitErr = err
			return
		}
		theKit = kit{dir: tk.Dir, observer: obs, lib: tk.Lib, hipProg: tk.HIPProg, hipNoDyn: tk.HIPNoDyn,
			cudaProg: tk.CUDAProg, loader: tk.Loader, helper: tk.Helper, cupti: tk.CUPTI}
	})
	if kitErr != nil {
		t.Fatal(kitErr)
	}
	return &theKit
}

// Process helpers, from tracetest.
var (
	killOnCleanup = tracetest.KillOnCleanup
	groupOf       = tracetest.GroupOf
	wantGone      = tracetest.WantGone
	waitForPID    = tracetest.WaitForPID

	wantNoSocketFolder = tracetest.WantNoSocketFolder
)

// traced is one run of a program under the trace.
type traced struct {
	r              *Result
	j              Judgement
	stdout, stderr string
}

type runOpt func(*Options)

func withTimeout(d time.Duration) runOpt { return func(o *Options) { o.Timeout = d } }
func withStdin(s string) runOpt          { return func(o *Options) { o.Stdin = strings.NewReader(s) } }
func withEnv(kv ...string) runOpt        { return func(o *Options) { o.Env = append(o.Env, kv...) } }
func withCUPTI(path string) runOpt       { return func(o *Options) { o.CUPTI = path } }

// trace runs prog with args under the observer and judges it.
func (k *kit) trace(t *testing.T, strict bool, prog string, args []string, opts ...runOpt) traced {
	t.Helper()
	var stdout, stderr bytes.Buffer
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	o := Options{Program: prog, Args: args, Observer: k.observer, CUPTI: k.cupti, Stdin: devnull,
		Stdout: &stdout, Stderr: &stderr, Timeout: limit, Env: os.Environ(),
		Started: func(pid int) { killOnCleanup(t, pid) }}
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*limit)
	defer cancel()
	r, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("Run %s %v: %v", prog, args, err)
	}
	return traced{r: r, j: Judge(r, strict), stdout: stdout.String(), stderr: stderr.String()}
}

// helperEnv makes this test binary, re-executed, a stand-in miotool that
// traces the program the variable names (its arguments follow in
// helperArgsEnv) and prints "program PID" once it runs; with
// helperNoGuard set, without the watcher of its group, so that the
// program's own death signal is all that ends it with the stand-in.
const (
	helperEnv      = "MIOTOOL_TRACE_TEST_HELPER"
	helperArgsEnv  = "MIOTOOL_TRACE_TEST_HELPER_ARGS"
	helperObserver = "MIOTOOL_TRACE_TEST_HELPER_OBSERVER"
	helperNoGuard  = "MIOTOOL_TRACE_TEST_HELPER_NOGUARD"
)

func helper() int {
	// Output to a file, not a pipe of ours: a program writing to a pipe
	// whose reader was killed would die of SIGPIPE, not of the death
	// signal under test.
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	_, err = Run(context.Background(), Options{
		Program: os.Getenv(helperEnv), Args: strings.Fields(os.Getenv(helperArgsEnv)),
		Observer: os.Getenv(helperObserver), Stdin: devnull, Stdout: devnull, Stderr: devnull,
		Started: func(pid int) { fmt.Printf("program %d\n", pid) },
		noGuard: os.Getenv(helperNoGuard) != "",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	return 0
}
