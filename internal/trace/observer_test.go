package trace

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fakeCompiler writes a shell script that logs each compile to log and
// makes the library it is asked for, an ELF shared object with the
// observer's marker for the source it is given (this test binary writes
// it: fakeLinker), or, with fail, says "boom" and fails; it answers
// -dumpversion with version, and logs that it was asked.
func fakeCompiler(t *testing.T, log, version string, fail bool) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	body := `#!` + sh + `
for a in "$@"; do [ "$a" = -dumpversion ] && { echo version >> ` + log + `; echo ` + version + `; exit 0; }; done
echo compile >> ` + log + `
` + map[bool]string{true: "echo boom >&2; exit 1\n", false: fakeLinker + "=1 exec " + os.Args[0] + ` "$@"
`}[fail]
	p := filepath.Join(t.TempDir(), "fakecc")
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func compiles(t *testing.T, log string) int {
	t.Helper()
	return logged(t, log, "compile\n")
}

// logged counts the lines of log that are line.
func logged(t *testing.T, log, line string) int {
	t.Helper()
	data, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), line)
}

// TestBuildCache: a second build of the same source with the same
// compiler is the cached library; a changed source, or another compiler
// version, builds anew beside it.
func TestBuildCache(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	cc := fakeCompiler(t, log, "12.2.0", false)
	cache := t.TempDir()
	o := BuildOptions{CC: cc, CacheDir: cache}
	src, err := ObserverSource()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := build(ctx, o, src)
	if err != nil {
		t.Fatal(err)
	}
	again, err := build(ctx, o, src)
	if err != nil || again != first || compiles(t, log) != 1 {
		t.Fatalf("second build: %s %v after %d compiles, want the cached %s after 1", again, err, compiles(t, log), first)
	}
	if filepath.Dir(filepath.Dir(first)) != cache || filepath.Base(first) != ObserverLibrary {
		t.Errorf("library at %s, want <cache>/<key>/%s", first, ObserverLibrary)
	}
	changed := map[string][]byte{}
	for k, v := range src {
		changed[k] = v
	}
	changed["observer.c"] = append([]byte("/* changed */\n"), src["observer.c"]...)
	other, err := build(ctx, o, changed)
	if err != nil || other == first || compiles(t, log) != 2 {
		t.Fatalf("changed source: %s %v after %d compiles, want a new library", other, err, compiles(t, log))
	}
	newer, err := build(ctx, BuildOptions{CC: fakeCompiler(t, log, "13.1.0", false), CacheDir: cache}, src)
	if err != nil || newer == first || compiles(t, log) != 3 {
		t.Fatalf("another compiler: %s %v after %d compiles, want a new library", newer, err, compiles(t, log))
	}
	// Nothing half-built is left beside the libraries.
	left, _ := filepath.Glob(filepath.Join(cache, "*", ".build-*"))
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// The compiler is asked its version once, not before every trace: the
// answer is kept for its program file, and asked again when the file
// changes (an upgrade), which builds a library of its own.
func TestCompilerVersionIsAskedAgainOnlyWhenTheCompilerChanges(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	cc := fakeCompiler(t, log, "12.2.0", false)
	o := BuildOptions{CC: cc, CacheDir: t.TempDir()}
	src, err := ObserverSource()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := build(ctx, o, src)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if again, err := build(ctx, o, src); err != nil || again != first {
			t.Fatalf("build again: %s %v, want the cached %s", again, err, first)
		}
	}
	if n := logged(t, log, "version\n"); n != 1 {
		t.Errorf("the version was asked %d times in three builds, want once", n)
	}

	// The same path, another compiler: a longer version, so that the
	// file's size tells it apart whatever the clock's resolution.
	upgraded := fakeCompiler(t, log, "13.1.0-upgraded", false)
	body, err := os.ReadFile(upgraded)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cc, body, 0o755); err != nil {
		t.Fatal(err)
	}
	newer, err := build(ctx, o, src)
	if err != nil || newer == first {
		t.Fatalf("after the upgrade: %s %v, want a library of its own", newer, err)
	}
	if n, c := logged(t, log, "version\n"), compiles(t, log); n != 2 || c != 2 {
		t.Errorf("after the upgrade: version asked %d times, %d compiles; want 2 and 2", n, c)
	}
}

// TestBuildWithoutACompiler says what is missing and what to install.
func TestBuildWithoutACompiler(t *testing.T) {
	empty := t.TempDir()
	cases := []struct {
		name  string
		o     BuildOptions
		envCC string
		tried string
	}{
		{"nothing on PATH", BuildOptions{Path: empty}, "", "tried cc, gcc, clang"},
		{"a CC that is not there", BuildOptions{Path: empty}, "gcc-99", "tried $CC=gcc-99"},
		{"a compiler given that is not there", BuildOptions{CC: "/nonexistent/cc"}, "", "tried /nonexistent/cc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CC", c.envCC)
			c.o.CacheDir = t.TempDir()
			_, err := Build(context.Background(), c.o)
			var nc *NoCompilerError
			if !errors.As(err, &nc) || !strings.Contains(err.Error(), c.tried) ||
				!strings.Contains(err.Error(), "apt-get install gcc") {
				t.Fatalf("%v", err)
			}
		})
	}
}

func TestBuildFailureShowsTheCompiler(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	cache := t.TempDir()
	_, err := Build(context.Background(), BuildOptions{CC: fakeCompiler(t, log, "1", true), CacheDir: cache})
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "-Werror") {
		t.Fatalf("%v", err)
	}
	if libs, _ := filepath.Glob(filepath.Join(cache, "*", ObserverLibrary)); len(libs) != 0 {
		t.Errorf("a failed build left %v", libs)
	}
}

// TestObserverExports builds the real observer: it exports its entry
// points, the HIP functions it interposes, the signal functions the crash
// handler interposes, cuptiSubscribe (whose refusals it reports), and
// nothing of its own.
func TestObserverExports(t *testing.T) {
	k := standIns(t)
	f, err := elf.Open(k.observer)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			defined[s.Name] = true
		}
	}
	src, err := ObserverSource()
	if err != nil {
		t.Fatal(err)
	}
	own := []string{"InitializeInjection", "cuptiSubscribe", "sigaction", "signal", "bsd_signal", "sysv_signal"}
	want := append([]string{}, own...)
	for _, m := range regexp.MustCompile(`X\(T\(hipError_t\), (hip\w+),`).FindAllStringSubmatch(string(src["mt_abi.h"]), -1) {
		want = append(want, m[1])
	}
	if len(want) < 30 {
		t.Fatalf("the HIP list has %d functions", len(want)-1)
	}
	for _, name := range want {
		if !defined[name] {
			t.Errorf("the observer does not export %s", name)
		}
	}
	for name := range defined {
		if !strings.HasPrefix(name, "hip") && !slices.Contains(own, name) && !strings.HasPrefix(name, "_") {
			t.Errorf("the observer exports its own %s", name)
		}
	}
	if len(defined) != len(want) {
		t.Errorf("%d functions exported, want %d", len(defined), len(want))
	}
}

// referenceHIP is the HIP 6.3 headers of the shared reference data.
func referenceHIP(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../../shared/reference/hip-6.3/include")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hip", "hip_runtime_api.h")); err != nil {
		t.Skipf("no HIP 6.3 reference headers at %s (../shared/reference is absent)", dir)
	}
	return dir
}

// TestHIPDeclarationsMatchRealHeaders compiles observer/check/hip_check.c
// against HIP 6.3's headers: every function the interposer defines has the
// header's type, and so has every type it names. A wrong declaration must
// fail the check.
func TestHIPDeclarationsMatchRealHeaders(t *testing.T) {
	gcc := gccOrSkip(t)
	include := referenceHIP(t)
	gen := t.TempDir()
	if err := os.MkdirAll(filepath.Join(gen, "hip"), 0o755); err != nil {
		t.Fatal(err)
	}
	version := "#define HIP_VERSION_MAJOR 6\n#define HIP_VERSION_MINOR 3\n#define HIP_VERSION_PATCH 0\n" +
		"#define HIP_VERSION (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)\n"
	if err := os.WriteFile(filepath.Join(gen, "hip", "hip_version.h"), []byte(version), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(extra ...string) (string, error) {
		args := append([]string{"-std=gnu11", "-fsyntax-only", "-Wall", "-Werror", "-D__HIP_PLATFORM_AMD__",
			"-I" + gen, "-isystem", include}, extra...)
		out, err := exec.Command(gcc, append(args, "observer/check/hip_check.c")...).CombinedOutput()
		return string(out), err
	}
	if out, err := check(); err != nil {
		t.Fatalf("the interposer's declarations disagree with HIP 6.3's headers: %v\n%s", err, out)
	}
	out, err := check("-DMIOTOOL_MUST_FAIL")
	if err == nil || !strings.Contains(out, "hipStreamQuery: the interposer declares another type than the real header") {
		t.Fatalf("a wrong declaration of hipStreamQuery passed the check: %v\n%s", err, out)
	}
}

// TestCUPTIDeclarationsMatchRealHeaders compiles
// observer/check/cupti_check.c against an installed CUDA toolkit's cupti.h,
// where there is one.
func TestCUPTIDeclarationsMatchRealHeaders(t *testing.T) {
	gcc := gccOrSkip(t)
	var dirs []string
	for _, root := range []string{os.Getenv("CUDA_HOME"), "/usr/local/cuda"} {
		if root == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "include", "cupti.h")); err == nil {
			dirs = []string{filepath.Join(root, "include")}
		} else if _, err := os.Stat(filepath.Join(root, "extras", "CUPTI", "include", "cupti.h")); err == nil {
			dirs = []string{filepath.Join(root, "include"), filepath.Join(root, "extras", "CUPTI", "include")}
		}
		if dirs != nil {
			break
		}
	}
	if dirs == nil {
		t.Skip("no CUDA toolkit with cupti.h here (CUDA_HOME, /usr/local/cuda)")
	}
	check := func(extra ...string) (string, error) {
		args := []string{"-std=gnu11", "-fsyntax-only", "-Wall", "-Werror"}
		for _, d := range dirs {
			args = append(args, "-I"+d)
		}
		out, err := exec.Command(gcc, append(append(args, extra...), "observer/check/cupti_check.c")...).CombinedOutput()
		return string(out), err
	}
	if out, err := check(); err != nil {
		t.Fatalf("the observer's CUDA declarations disagree with %v: %v\n%s", dirs, err, out)
	}
	if out, err := check("-DMIOTOOL_MUST_FAIL"); err == nil || !strings.Contains(out, "cuStreamQuery_params.hStream is elsewhere") {
		t.Fatalf("a misplaced field passed the check: %v\n%s", err, fmt.Sprint(out))
	}
}
