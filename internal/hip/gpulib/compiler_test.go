package gpulib

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"miotool/internal/dl"
	"miotool/internal/hip"
)

func hipLib(loaded string) hip.Library { return hip.Library{Name: "libfakertc", Loaded: loaded} }

func TestOpenCompilerMissing(t *testing.T) {
	dir := t.TempDir()
	c := OpenCompiler(dl.SearchSpec{Name: "libfakertc", Sonames: []string{"libfakertc.so.9"}, Dirs: []string{dir}, SkipLoaderPath: true}, "fakertc")
	var nf *dl.NotFoundError
	if c.Available() || !errors.As(c.Err, &nf) {
		t.Fatalf("available %v, err %v", c.Available(), c.Err)
	}
	if len(c.Lib.Tried) != 1 || c.Lib.Tried[0].Path != filepath.Join(dir, "libfakertc.so.9") || c.Lib.Name != "libfakertc" {
		t.Fatalf("record %+v", c.Lib)
	}
	if _, err := c.CompileCached(NewCodeCache(), "src", "k", "arch", nil, RTCOutput{Kind: "code"}); !errors.Is(err, c.Err) {
		t.Fatalf("compiling without a compiler: %v", err)
	}
	var none *Compiler
	if none.Available() {
		t.Fatal("a nil compiler is available")
	}
}

func TestOpenCompilerWrongLibrary(t *testing.T) {
	real := realLibrary(t)
	c := OpenCompiler(dl.SearchSpec{Name: "libfakertc", Sonames: []string{filepath.Base(real)}, Dirs: []string{filepath.Dir(real)}, SkipLoaderPath: true}, "fakertc")
	var ms *dl.MissingSymbolError
	if c.Available() || !errors.As(c.Err, &ms) || ms.Symbol != "fakertcCreateProgram" {
		t.Fatalf("err %v", c.Err)
	}
	if c.Lib.Loaded == "" {
		t.Fatal("the library that loaded is not recorded")
	}
}

func TestCompilerCompileCached(t *testing.T) {
	f := fake()
	c := &Compiler{Prefix: "fakertc", RTC: &RTC{Prefix: "fakertc", Funcs: f.funcs}, Version: "13.2", Lib: hipLib("/x/libfakertc.so.13")}
	cache := NewCodeCache()
	opts := []string{"--offload-arch=gfx942", "-O3"}
	code, err := c.CompileCached(cache, "SRC", "k.hip", "gfx942", opts, f.output)
	if err != nil || string(code) != "CODE[--offload-arch=gfx942 -O3]SRC" {
		t.Fatalf("code %q, %v", code, err)
	}
	again, err := c.CompileCached(cache, "SRC", "k.hip", "gfx942", opts, f.output)
	if err != nil || &again[0] != &code[0] {
		t.Fatal("the second request compiled again")
	}
	if hits, misses := cache.Stats(); hits != 1 || misses != 1 {
		t.Fatalf("hits %d misses %d", hits, misses)
	}
	if _, err := c.CompileCached(cache, "#error x", "bad.hip", "gfx942", opts, f.output); err == nil || !strings.Contains(err.Error(), "bad.hip(1): error") {
		t.Fatalf("compile error: %v", err)
	}
	if cache.Len() != 1 {
		t.Fatal("a failed compile was cached")
	}

	other := *c
	other.Lib = hipLib("/y/libfakertc.so.13")
	if c.CodeKey("gfx942", "code", "SRC", opts) == other.CodeKey("gfx942", "code", "SRC", opts) {
		t.Fatal("two compiler files of one version share a key")
	}
	if c.CodeKey("gfx942", "code", "SRC", opts) == c.CodeKey("gfx90a", "code", "SRC", opts) {
		t.Fatal("two architectures share a key")
	}
}
