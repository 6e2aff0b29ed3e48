// Package tracetest builds what the trace tests run, with gcc: stand-ins
// of libamdhip64, libcuda.so.1 and libcupti.so.13 that apply the capture
// rules and fire CUPTI's callbacks, and the test programs of
// internal/trace/testdata/progs, built against HIP and against the CUDA
// driver API. Only tests import it; the trace package's own tests and the
// trace command's built-binary tests share it.
package tracetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"miotool/internal/testutil"
)

// Kit is the built stand-ins and programs, in one folder.
type Kit struct {
	Dir string
	// Lib holds the stand-in libraries, the programs' run path.
	Lib string
	// HIPProg is testdata/progs/prog.c against HIP, linked -rdynamic so
	// that its own functions have dynamic symbols; HIPNoDyn the same
	// without them.
	HIPProg, HIPNoDyn string
	// CUDAProg is prog.c against the CUDA driver API, -rdynamic.
	CUDAProg string
	// Loader dlopens a library RTLD_LOCAL; Helper is the library it loads,
	// linked to libamdhip64.
	Loader, Helper string
	// CUPTI is the stand-in libcupti.so.13.
	CUPTI string
}

// GCC is gcc's path; t is skipped where there is none.
func GCC(t testing.TB) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not on PATH")
	}
	return gcc
}

// Source is the folder of the programs' and stand-ins' C source.
func Source(t testing.TB) string {
	t.Helper()
	return filepath.Join(testutil.ModuleRoot(t), "internal", "trace", "testdata")
}

// Build compiles the kit from src (the testdata folder) into dir.
func Build(ctx context.Context, gcc, src, dir string) (*Kit, error) {
	k := &Kit{Dir: dir, Lib: filepath.Join(dir, "lib")}
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{k.Lib, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	warn := []string{"-std=gnu11", "-O0", "-g", "-Wall", "-Wextra", "-Werror"}
	rpath := "-Wl,-rpath," + k.Lib
	hip := filepath.Join(k.Lib, "libamdhip64.so")
	cuda := filepath.Join(k.Lib, "libcuda.so.1")
	k.CUPTI = filepath.Join(k.Lib, "libcupti.so.13")
	k.HIPProg, k.HIPNoDyn = filepath.Join(bin, "hipprog"), filepath.Join(bin, "hipprog-nodyn")
	k.CUDAProg, k.Loader = filepath.Join(bin, "cudaprog"), filepath.Join(bin, "loader")
	k.Helper = filepath.Join(k.Lib, "libhelper.so")
	in := func(p string) string { return filepath.Join(src, p) }
	steps := [][]string{
		{"-shared", "-fPIC", "-o", hip, in("standin/libamdhip64.c"), "-pthread"},
		{"-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", cuda, in("standin/libcuda.c"), "-ldl", "-pthread"},
		{"-shared", "-fPIC", "-Wl,-soname,libcupti.so.13", "-o", k.CUPTI, in("standin/libcupti.c"), cuda, rpath},
		{"-rdynamic", "-o", k.HIPProg, in("progs/prog.c"), "-L" + k.Lib, "-lamdhip64", rpath, "-pthread"},
		{"-o", k.HIPNoDyn, in("progs/prog.c"), "-L" + k.Lib, "-lamdhip64", rpath, "-pthread"},
		{"-DUSE_CUDA", "-rdynamic", "-o", k.CUDAProg, in("progs/prog.c"), cuda, rpath, "-pthread"},
		{"-shared", "-fPIC", "-o", k.Helper, in("progs/helper.c"), "-L" + k.Lib, "-lamdhip64", rpath},
		{"-o", k.Loader, in("progs/loader.c"), "-ldl"},
	}
	for _, s := range steps {
		args := append(append([]string{}, warn...), s...)
		if out, err := exec.CommandContext(ctx, gcc, args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return k, nil
}

var shared struct {
	once sync.Once
	kit  *Kit
	dir  string
	err  error
}

// Shared is the kit of this test binary, built on first use into a
// temporary folder that Remove deletes; t is skipped without gcc.
func Shared(t testing.TB) *Kit {
	t.Helper()
	gcc := GCC(t)
	src := Source(t)
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "miotool-trace-kit-")
		if err != nil {
			shared.err = err
			return
		}
		shared.dir = dir
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.kit, shared.err = Build(ctx, gcc, src, dir)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.kit
}

// Remove deletes the shared kit's folder; TestMain calls it after the
// tests.
func Remove() {
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}
