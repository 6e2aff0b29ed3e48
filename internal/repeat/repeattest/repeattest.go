// Package repeattest builds the programs the repeat tests run, with gcc:
// flaky, which passes, fails, crashes or hangs on the runs its seed picks
// (internal/repeat/testdata/progs/flaky.c), libflaky, the same crash in a
// library that crash_ctypes.py calls through ctypes, and libcache_race,
// the model-cache race of the GPU section (testdata/gpu), which
// cache_race.py drives from two Python threads. Only tests import it; the
// repeat package's tests and the repeat command's share it.
package repeattest

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

// Limit bounds every wait of the repeat tests: wide for a loaded machine.
const Limit = 2 * time.Minute

// Kit is the built programs, in one folder.
type Kit struct {
	Dir string
	// Flaky is flaky.c, linked -rdynamic so that its functions have
	// dynamic symbols.
	Flaky string
	// Library is libflaky.so, and Script crash_ctypes.py, which loads it.
	Library, Script string
	// CacheRace is libcache_race.so, and RaceScript cache_race.py.
	CacheRace, RaceScript string
}

// Source is the folder of the programs' source, testdata: progs/ the
// test programs, gpu/ the GPU section's.
func Source(t testing.TB) string {
	t.Helper()
	return filepath.Join(testutil.ModuleRoot(t), "internal", "repeat", "testdata")
}

// Build compiles the kit from src into dir with gcc.
func Build(ctx context.Context, gcc, src, dir string) (*Kit, error) {
	progs, gpu := filepath.Join(src, "progs"), filepath.Join(src, "gpu")
	k := &Kit{Dir: dir, Flaky: filepath.Join(dir, "flaky"), Library: filepath.Join(dir, "libflaky.so"),
		Script: filepath.Join(progs, "crash_ctypes.py"), CacheRace: filepath.Join(dir, "libcache_race.so"),
		RaceScript: filepath.Join(gpu, "cache_race.py")}
	warn := []string{"-std=gnu11", "-O0", "-g", "-Wall", "-Wextra", "-Werror"}
	for _, s := range [][]string{
		{"-rdynamic", "-o", k.Flaky, filepath.Join(progs, "flaky.c")},
		{"-shared", "-fPIC", "-o", k.Library, filepath.Join(progs, "flakylib.c")},
		{"-shared", "-fPIC", "-o", k.CacheRace, filepath.Join(gpu, "cache_race.c"), "-ldl", "-pthread"},
	} {
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
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not on PATH: the repeat tests build their programs with it")
	}
	src := Source(t)
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "miotool-repeat-kit-")
		if err != nil {
			shared.err = err
			return
		}
		shared.dir = dir
		ctx, cancel := context.WithTimeout(context.Background(), Limit)
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

// Python is a CPython 3 to run crash_ctypes.py with: the interpreter
// python3 on PATH runs (not a launcher script in front of it, which would
// cost every run its start), else one of pyenv's; t is skipped without one.
func Python(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("python3"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), Limit)
		defer cancel()
		out, err := exec.CommandContext(ctx, p, "-c", "import sys; print(sys.executable)").Output()
		if exe := strings.TrimSpace(string(out)); err == nil && exe != "" {
			return exe
		}
	}
	home, _ := os.UserHomeDir()
	found, _ := filepath.Glob(filepath.Join(home, ".pyenv", "versions", "3.*", "bin", "python3"))
	if len(found) > 0 {
		return found[len(found)-1]
	}
	t.Skip("no python3 on PATH or under ~/.pyenv: the ctypes crash test needs CPython 3")
	return ""
}
