package trace

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The C tests build, with gcc, into one temporary folder per test binary:
// the observer (through Build, into its own cache), stand-ins of
// libamdhip64, libcuda.so.1 and libcupti.so.13 that apply the capture
// rules and fire CUPTI callbacks, and the test programs of
// testdata/progs, built against HIP and against the CUDA driver API. They
// skip without gcc.

// limit bounds every wait of these tests: wide for a loaded machine.
const limit = 60 * time.Second

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
	err      error
}

var (
	kitOnce sync.Once
	theKit  kit
	kitDir  string
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helper())
	}
	code := m.Run()
	if kitDir != "" {
		os.RemoveAll(kitDir)
	}
	os.Exit(code)
}

func gccOrSkip(t testing.TB) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not on PATH")
	}
	return gcc
}

// standIns builds the kit once and returns it.
func standIns(t testing.TB) *kit {
	t.Helper()
	gcc := gccOrSkip(t)
	kitOnce.Do(func() {
		dir, err := os.MkdirTemp("", "miotool-trace-kit-")
		if err != nil {
			theKit.err = err
			return
		}
		kitDir = dir
		theKit = buildKit(gcc, dir)
	})
	if theKit.err != nil {
		t.Fatal(theKit.err)
	}
	return &theKit
}

func buildKit(gcc, dir string) kit {
	k := kit{dir: dir, lib: filepath.Join(dir, "lib")}
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{k.lib, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return kit{err: err}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	obs, err := Build(ctx, BuildOptions{CC: gcc, CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		return kit{err: err}
	}
	k.observer = obs
	warn := []string{"-std=gnu11", "-O0", "-g", "-Wall", "-Wextra", "-Werror"}
	rpath := "-Wl,-rpath," + k.lib
	hip := filepath.Join(k.lib, "libamdhip64.so")
	cuda := filepath.Join(k.lib, "libcuda.so.1")
	k.cupti = filepath.Join(k.lib, "libcupti.so.13")
	k.hipProg, k.hipNoDyn = filepath.Join(bin, "hipprog"), filepath.Join(bin, "hipprog-nodyn")
	k.cudaProg, k.loader = filepath.Join(bin, "cudaprog"), filepath.Join(bin, "loader")
	k.helper = filepath.Join(k.lib, "libhelper.so")
	steps := [][]string{
		{"-shared", "-fPIC", "-o", hip, "testdata/standin/libamdhip64.c", "-pthread"},
		{"-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", cuda, "testdata/standin/libcuda.c", "-ldl", "-pthread"},
		{"-shared", "-fPIC", "-Wl,-soname,libcupti.so.13", "-o", k.cupti, "testdata/standin/libcupti.c", cuda, rpath},
		{"-rdynamic", "-o", k.hipProg, "testdata/progs/prog.c", "-L" + k.lib, "-lamdhip64", rpath, "-pthread"},
		{"-o", k.hipNoDyn, "testdata/progs/prog.c", "-L" + k.lib, "-lamdhip64", rpath, "-pthread"},
		{"-DUSE_CUDA", "-rdynamic", "-o", k.cudaProg, "testdata/progs/prog.c", cuda, rpath, "-pthread"},
		{"-shared", "-fPIC", "-o", k.helper, "testdata/progs/helper.c", "-L" + k.lib, "-lamdhip64", rpath},
		{"-o", k.loader, "testdata/progs/loader.c", "-ldl"},
	}
	for _, s := range steps {
		args := append(append([]string{}, warn...), s...)
		if out, err := exec.CommandContext(ctx, gcc, args...).CombinedOutput(); err != nil {
			return kit{err: fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)}
		}
	}
	return k
}

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
		Stdout: &stdout, Stderr: &stderr, Timeout: limit, Env: os.Environ()}
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
// helperArgsEnv) and prints "program PID" once it runs.
const (
	helperEnv      = "MIOTOOL_TRACE_TEST_HELPER"
	helperArgsEnv  = "MIOTOOL_TRACE_TEST_HELPER_ARGS"
	helperObserver = "MIOTOOL_TRACE_TEST_HELPER_OBSERVER"
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
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	return 0
}

// live lists the processes of group pgid that have not died (zombies
// have).
func live(t *testing.T, pgid int) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue // it ended while we looked
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if group, _ := strconv.Atoi(f[2]); group == pgid {
			out = append(out, strings.TrimSpace(s[:i+1]))
		}
	}
	return out
}

// wantGone fails t unless, within limit, no process of group pgid is
// alive: a killed process takes a moment to finish dying.
func wantGone(t *testing.T, pgid int) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc to look for processes in: %v", err)
	}
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		l := live(t, pgid)
		if len(l) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d still running after %v: %v", pgid, limit, l)
		}
		<-tick.C
	}
}
