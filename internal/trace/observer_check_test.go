package trace

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// fakeLinker makes this test binary, run as the fake compiler's last
// step, write the library the compile was asked for: a minimal ELF shared
// object carrying the observer's marker for the source ID it was given.
const fakeLinker = "MIOTOOL_TRACE_TEST_FAKE_LINKER"

func init() {
	if os.Getenv(fakeLinker) == "" {
		return
	}
	out, source := "", "unknown"
	args := os.Args[1:]
	for i, a := range args {
		if a == "-o" && i+1 < len(args) {
			out = args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "-DMT_SOURCE_ID="); ok {
			source = strings.Trim(v, `"`)
		}
	}
	if err := os.WriteFile(out, fakeObserverELF(elfMachines[runtime.GOARCH], "miotool-observer wire="+ObserverWire+" source="+source), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// fakeObserverELF is an ELF64 shared object for machine whose only
// section besides the name table is the observer's marker: enough for
// the checks, nothing a loader could run.
func fakeObserverELF(machine elf.Machine, marker string) []byte {
	return fakeELF(machine, observerSection, marker)
}

// fakeELF is such an object with data in the section named section.
func fakeELF(machine elf.Machine, section, marker string) []byte {
	names := "\x00" + section + "\x00.shstrtab\x00"
	data := marker + "\x00"
	const headerSize, sectionSize = 64, 64
	namesAt := uint64(headerSize)
	dataAt := namesAt + uint64(len(names))
	sectionsAt := (dataAt + uint64(len(data)) + 7) &^ 7
	var b bytes.Buffer
	h := elf.Header64{Type: uint16(elf.ET_DYN), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Shoff: sectionsAt, Ehsize: headerSize, Shentsize: sectionSize, Shnum: 3, Shstrndx: 2}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS], h.Ident[elf.EI_DATA], h.Ident[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	_ = binary.Write(&b, binary.LittleEndian, h)
	b.WriteString(names)
	b.WriteString(data)
	b.Write(make([]byte, sectionsAt-uint64(b.Len())))
	sections := []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC), Off: dataAt, Size: uint64(len(data)), Addralign: 1},
		{Name: uint32(2 + len(section)), Type: uint32(elf.SHT_STRTAB), Off: namesAt, Size: uint64(len(names)), Addralign: 1},
	}
	for _, s := range sections {
		_ = binary.Write(&b, binary.LittleEndian, s)
	}
	return b.Bytes()
}

func writeFile(t *testing.T, dir, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckObserver: each kind of file that is not this miotool's
// observer is refused with what it is.
func TestCheckObserver(t *testing.T) {
	dir := t.TempDir()
	here := elfMachines[runtime.GOARCH]
	other := elf.EM_AARCH64
	if here == other {
		other = elf.EM_X86_64
	}
	good := writeFile(t, dir, "good.so", fakeObserverELF(here, "miotool-observer wire="+ObserverWire+" source=x"), 0o644)
	real, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "nope.so"), "no such file"},
		{"a directory", dir, "is a directory"},
		{"a text file", writeFile(t, dir, "notes.txt", []byte("not a library\n"), 0o644), "not an ELF file (14 bytes)"},
		{"an empty file", writeFile(t, dir, "empty.so", nil, 0o644), "not an ELF file (0 bytes)"},
		{"truncated", writeFile(t, dir, "cut.so", real[:100], 0o644), "truncated or damaged"},
		{"another machine", writeFile(t, dir, "arm.so", fakeObserverELF(other, "miotool-observer wire="+ObserverWire+" source=x"), 0o644), "not for this machine"},
		{"another version", writeFile(t, dir, "old.so", fakeObserverELF(here, "miotool-observer wire=1 source=x"), 0o644), "another version (record format 1"},
		{"a damaged marker", writeFile(t, dir, "odd.so", fakeObserverELF(here, "miotool-observer"), 0o644), "damaged observer"},
		{"an executable", exe, "not a shared library"},
		{"a shared library that is no observer", writeFile(t, dir, "other.so", fakeELF(here, ".data", "x"), 0o644), "not miotool's trace observer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckObserver(c.path)
			var oe *ObserverError
			if !errors.As(err, &oe) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Fatalf("CheckObserver(%s) = %v, want an *ObserverError naming the file and saying %q", c.path, err, c.want)
			}
		})
	}
	if err := CheckObserver(good); err != nil {
		t.Errorf("a library with the marker: %v", err)
	}
}

// TestCheckObserverOnTheRealLibrary: the built observer passes, carries
// this source's ID, and a copy cut short fails.
func TestCheckObserverOnTheRealLibrary(t *testing.T) {
	k := standIns(t)
	id, err := ReadObserverIdentity(k.observer)
	if err != nil {
		t.Fatal(err)
	}
	src, err := ObserverSource()
	if err != nil {
		t.Fatal(err)
	}
	if id.Wire != ObserverWire || id.Source != sourceID(src) {
		t.Errorf("identity %+v, want wire %s and source %s", id, ObserverWire, sourceID(src))
	}
	data, err := os.ReadFile(k.observer)
	if err != nil {
		t.Fatal(err)
	}
	cut := writeFile(t, t.TempDir(), ObserverLibrary, data[:len(data)/2], 0o755)
	if err := CheckObserver(cut); err == nil || !strings.Contains(err.Error(), "truncated or damaged") {
		t.Errorf("half the observer: %v", err)
	}
}

// TestBuildRebuildsADamagedCache: a cached library that fails the check
// (cut short, replaced) is built again, not used.
func TestBuildRebuildsADamagedCache(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	cache := t.TempDir()
	o := BuildOptions{CC: fakeCompiler(t, log, "12.2.0", false), CacheDir: cache}
	ctx := context.Background()
	lib, err := Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for i, damage := range []func() error{
		func() error { return os.Truncate(lib, 10) },
		func() error { return os.WriteFile(lib, []byte("#!/bin/sh\n"), 0o755) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		again, err := Build(ctx, o)
		if err != nil || again != lib || compiles(t, log) != i+2 {
			t.Fatalf("damage %d: %s %v after %d compiles, want %s built again", i, again, err, compiles(t, log), lib)
		}
		if err := CheckObserver(again); err != nil {
			t.Fatalf("damage %d: the rebuilt library: %v", i, err)
		}
	}
}

// TestBuildWithoutACompilerUsesTheCache: with no compiler on PATH, a
// library of this source that another compiler built serves; one of
// another source does not.
func TestBuildWithoutACompilerUsesTheCache(t *testing.T) {
	t.Setenv("CC", "")
	log := filepath.Join(t.TempDir(), "log")
	cache := t.TempDir()
	ctx := context.Background()
	built, err := Build(ctx, BuildOptions{CC: fakeCompiler(t, log, "12.2.0", false), CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	none := BuildOptions{Path: t.TempDir(), CacheDir: cache}
	got, err := Build(ctx, none)
	if err != nil || got != built {
		t.Fatalf("no compiler, a cached library: %s %v, want %s", got, err, built)
	}
	src, err := ObserverSource()
	if err != nil {
		t.Fatal(err)
	}
	changed := map[string][]byte{}
	for k, v := range src {
		changed[k] = v
	}
	changed["observer.c"] = append([]byte("/* another */\n"), src["observer.c"]...)
	var nc *NoCompilerError
	if _, err := build(ctx, none, changed); !errors.As(err, &nc) {
		t.Errorf("no compiler, only a library of another source: %v, want a *NoCompilerError", err)
	}
	if err := os.Truncate(built, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(ctx, none); !errors.As(err, &nc) {
		t.Errorf("no compiler, a damaged cached library: %v, want a *NoCompilerError", err)
	}
}

// TestCheckProgram: a set-user-ID program of another owner is refused, a
// statically linked one explained (also behind a #! line), a dynamically
// linked one and a script of one pass.
func TestCheckProgram(t *testing.T) {
	gcc := gccOrSkip(t)
	dir := t.TempDir()
	src := writeFile(t, dir, "p.c", []byte("int main(void) { return 0; }\n"), 0o644)
	dynamic, static := filepath.Join(dir, "dynamic"), filepath.Join(dir, "static")
	if out, err := exec.Command(gcc, "-o", dynamic, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	staticBuilt := exec.Command(gcc, "-static", "-o", static, src).Run() == nil
	env := []string{"PATH=" + dir}
	script := writeFile(t, dir, "script", []byte("#!"+dynamic+" -x\n"), 0o755)
	if p := CheckProgram(dynamic, env); p != nil {
		t.Errorf("a dynamically linked program: %v", p)
	}
	if p := CheckProgram(script, env); p != nil {
		t.Errorf("a script of a dynamically linked interpreter: %v", p)
	}
	if staticBuilt {
		viaEnv := writeFile(t, dir, "envscript", []byte("#!/usr/bin/env static\n"), 0o755)
		for _, path := range []string{static, viaEnv} {
			p := CheckProgram(path, env)
			if p == nil || p.Kind != ProgramStatic || p.Refuse || p.Program != static || !strings.Contains(p.Reason, "statically linked") {
				t.Errorf("%s: %+v, want the static interpreter explained, not refused", path, p)
			}
		}
	} else {
		t.Log("no static libc: the statically linked case is not checked")
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the set-user-ID case needs a file of another owner")
		return
	}
	setuid := filepath.Join(dir, "setuid")
	data, err := os.ReadFile(dynamic)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "setuid", data, 0o755)
	if err := os.Chown(setuid, 65534, 65534); err != nil {
		t.Skipf("chown: %v", err)
	}
	if err := os.Chmod(setuid, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	p := CheckProgram(setuid, env)
	if p == nil || p.Kind != ProgramSetID || !p.Refuse || !strings.Contains(p.Reason, "set-user-ID (owner uid 65534)") ||
		!strings.Contains(p.Reason, "LD_PRELOAD") {
		t.Errorf("a set-user-ID program of uid 65534: %+v", p)
	}
	// Set-user-ID to oneself gains nothing: the loader is not in secure mode.
	if err := os.Chown(setuid, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(setuid, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if p := CheckProgram(setuid, env); p != nil {
		t.Errorf("set-user-ID to its own user: %v", p)
	}
}

// TestObserverEnv: the observer goes first in LD_PRELOAD, the program's
// own entries follow in their order; a program's own injection library is
// moved, never dropped; an outer trace's sockets are kept and its
// observer not preloaded twice.
func TestObserverEnv(t *testing.T) {
	dir := t.TempDir()
	here := elfMachines[runtime.GOARCH]
	outerObs := writeFile(t, dir, "outer.so", fakeObserverELF(here, "miotool-observer wire="+ObserverWire+" source=o"), 0o644)
	obs := "/cache/libmiotool-observer.so"
	cases := []struct {
		name string
		env  []string
		want map[string]string // "" : must be absent
	}{
		{"a plain environment", []string{"PATH=/bin", "HOME=/h"},
			map[string]string{"LD_PRELOAD": obs, "CUDA_INJECTION64_PATH": obs, EnvSocket: "/s/ev", EnvInjection: "", "PATH": "/bin"}},
		{"the program's own preloads", []string{"LD_PRELOAD=/a.so /b.so:/c.so"},
			map[string]string{"LD_PRELOAD": obs + ":/a.so:/b.so:/c.so"}},
		{"the program's own injection library", []string{"CUDA_INJECTION64_PATH=/opt/prof/libinject.so"},
			map[string]string{"CUDA_INJECTION64_PATH": obs, EnvInjection: "/opt/prof/libinject.so"}},
		{"an outer trace", []string{EnvSocket + "=/outer/ev", "CUDA_INJECTION64_PATH=" + outerObs,
			"LD_PRELOAD=" + outerObs + ":/a.so", EnvInjection + "=/opt/prof/libinject.so"},
			map[string]string{EnvSocket: "/s/ev:/outer/ev", "CUDA_INJECTION64_PATH": obs, "LD_PRELOAD": obs + ":/a.so",
				EnvInjection: "/opt/prof/libinject.so"}},
		{"the same observer again", []string{"CUDA_INJECTION64_PATH=" + obs, "LD_PRELOAD=" + obs, EnvSocket + "=/s/ev"},
			map[string]string{"LD_PRELOAD": obs, EnvSocket: "/s/ev", EnvInjection: ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := slices.Clone(c.env)
			got, err := ObserverEnv(c.env, obs, "/s/ev")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(before, c.env) {
				t.Errorf("the given environment changed: %v", c.env)
			}
			for k, want := range c.want {
				n := 0
				for _, kv := range got {
					if strings.HasPrefix(kv, k+"=") {
						n++
					}
				}
				if v := lookupEnv(got, k); v != want || n > 1 {
					t.Errorf("%s=%q (%d settings), want %q in %v", k, v, n, want, got)
				}
			}
		})
	}
	for _, bad := range [][2]string{{"/with space/obs.so", "/s/ev"}, {"/a:b/obs.so", "/s/ev"}, {obs, "/odd:dir/ev"}} {
		if _, err := ObserverEnv(nil, bad[0], bad[1]); err == nil {
			t.Errorf("ObserverEnv(%q, %q): no error", bad[0], bad[1])
		}
	}
}

// TestSetIDNeedsAnotherOwner holds setIDProblem's reading of the bits on
// a file this process owns: no secure mode, no problem.
func TestSetIDNeedsAnotherOwner(t *testing.T) {
	p := writeFile(t, t.TempDir(), "f", []byte("x"), 0o755)
	if err := syscall.Chmod(p, 0o6755); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if prob := setIDProblem(p, st); prob != nil {
		t.Errorf("a set-ID file of this process's own user and group: %v", prob)
	}
}
