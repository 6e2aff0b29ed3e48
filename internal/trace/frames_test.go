package trace

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestDemangle(t *testing.T) {
	for raw, want := range map[string]string{
		"_ZN3c104cuda18device_synchronizeEv":        "c10::cuda::device_synchronize",
		"_ZNK3c104cuda10CUDAStream5queryEv":         "c10::cuda::CUDAStream::query",
		"_ZN6miopen6Handle3RunENS_6KernelEPvS2_mb":  "miopen::Handle::Run",
		"cudaDeviceSynchronize":                     "cudaDeviceSynchronize",
		"miotool/internal/streams.(*Tracker).Query": "miotool/internal/streams.(*Tracker).Query",
		"_Znot-a-mangled-name":                      "_Znot-a-mangled-name",
	} {
		if got := Demangle(raw); got != want {
			t.Errorf("Demangle(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestFrameNames(t *testing.T) {
	named := Frame{Module: "/usr/lib/libc10_cuda.so", Symbol: "c10::cuda::device_synchronize", Offset: 0x10}
	bare := Frame{Module: "/opt/bin/miotool", Offset: 0x146af8}
	unknown := Frame{Module: "?", Offset: 0x7f0012}
	for _, c := range []struct{ got, want string }{
		{named.String(), "libc10_cuda.so(c10::cuda::device_synchronize)"},
		{named.Name(), "c10::cuda::device_synchronize"},
		{bare.String(), "miotool+0x146af8"},
		{unknown.Name(), "?+0x7f0012"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	fs := []Frame{bare, {Symbol: "a"}, {Symbol: "a"}, {Symbol: "b"}, {Symbol: "c"}}
	if got := CallerSummary(fs, 2); got != "a ← b" {
		t.Errorf("CallerSummary = %q", got)
	}
	if got := CallerSummary([]Frame{bare}, 2); got != "" {
		t.Errorf("CallerSummary of nameless frames = %q", got)
	}
}

// mapStart is where the running executable's first page is mapped, as the
// observer's dladdr reports it.
func mapStart(t *testing.T, exe string) uint64 {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 6 && fields[5] == exe && fields[2] == "00000000" {
			start, err := strconv.ParseUint(strings.SplitN(fields[0], "-", 2)[0], 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return start
		}
	}
	t.Skipf("no mapping of %s at offset 0", exe)
	return 0
}

// TestSymbolizerNamesGoFrames: frames of a Go binary (miotool has no
// dynamic symbols) are named from its symbol table, and from its pclntab
// when the symbol table was stripped.
func TestSymbolizerNamesGoFrames(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		t.Skip(err)
	}
	pc := uint64(reflect.ValueOf(BaseName).Pointer())
	// A return address a few bytes into the function.
	offset := pc + 4 - mapStart(t, exe)
	want := "miotool/internal/trace.BaseName"
	f := NewSymbolizer().Frames([]RawFrame{{Module: exe, Offset: offset}})[0]
	// A test binary's symbol table may lack Go's functions; its pclntab
	// has them.
	if f.Symbol != want || (f.Source != "elf" && f.Source != "go") {
		t.Errorf("frame %+v (%s), want %s from the symbol table or the pclntab", f, f.Source, want)
	}
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Skip("objcopy is not on PATH: the stripped case is not checked")
	}
	stripped := filepath.Join(t.TempDir(), "stripped")
	if out, err := exec.Command(objcopy, "--strip-all", exe, stripped).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, out)
	}
	f = NewSymbolizer().Frames([]RawFrame{{Module: stripped, Offset: offset}})[0]
	if f.Symbol != want || f.Source != "go" {
		t.Errorf("stripped frame %+v, want %s from the pclntab", f, want)
	}
	// The dynamic symbol the observer sent wins; nothing is read for it.
	f = NewSymbolizer().Frames([]RawFrame{{Module: "/nonexistent", Symbol: "_ZN3c104cuda18device_synchronizeEv"}})[0]
	if f.Symbol != "c10::cuda::device_synchronize" || f.Raw != "_ZN3c104cuda18device_synchronizeEv" || f.Source != "dynamic" {
		t.Errorf("frame %+v", f)
	}
	if f := NewSymbolizer().Frames([]RawFrame{{Module: "/nonexistent", Offset: 5}})[0]; f.Symbol != "" {
		t.Errorf("a frame of a missing file was named %+v", f)
	}
}
