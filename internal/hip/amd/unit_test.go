package amd

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
	"miotool/internal/hip/gpulib/gputest"
)

// TestSymbolTable pins every name the backend binds to the HIP runtime
// signatures it calls them with.
func TestSymbolTable(t *testing.T) {
	var l runtimeLib
	got := dl.SymbolNames(l.symbols())
	want := []string{
		"hipInit", "hipDriverGetVersion", "hipRuntimeGetVersion", "hipGetErrorName",
		"hipGetDeviceCount", "hipSetDevice", "hipDeviceGetName", "hipDeviceGetAttribute", "hipDeviceTotalMem",
		"hipGetDevicePropertiesR0600", "hipDeviceSynchronize",
		"hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree", "hipHostRegister", "hipHostUnregister",
		"hipMemset", "hipMemsetAsync", "hipMemcpyHtoD", "hipMemcpyDtoH", "hipMemcpyHtoDAsync", "hipMemcpyDtoHAsync", "hipMemcpyDtoDAsync",
		"hipStreamCreateWithFlags", "hipStreamDestroy", "hipStreamQuery", "hipStreamSynchronize", "hipStreamWaitEvent",
		"hipStreamIsCapturing", "hipStreamGetCaptureInfo",
		"hipEventCreateWithFlags", "hipEventRecord", "hipEventQuery", "hipEventSynchronize", "hipEventElapsedTime", "hipEventDestroy",
		"hipModuleLoadData", "hipModuleGetFunction", "hipModuleUnload", "hipModuleLaunchKernel", "hipLaunchHostFunc",
		"hipStreamBeginCapture", "hipStreamEndCapture", "hipThreadExchangeStreamCaptureMode",
		"hipGraphInstantiateWithFlags", "hipGraphLaunch", "hipGraphExecDestroy", "hipGraphDestroy",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("symbols\n got %q\nwant %q", got, want)
	}
	// Same names, other signatures: binding any is a bug.
	for _, wrong := range []string{
		"hipGetDeviceProperties",            // the pre-6.0 struct
		"hipGraphInstantiate",               // five arguments, not three
		"hipStreamGetCaptureInfo_v2",        // six arguments
		"hipStreamCreate", "hipEventCreate", // no flags
	} {
		if slices.Contains(got, wrong) {
			t.Errorf("the table binds %s", wrong)
		}
	}
	for _, s := range l.symbols() {
		if s.Optional || len(s.Alternatives) > 0 {
			t.Errorf("%s: every HIP symbol is required under its one name", s.Name)
		}
	}
	gputest.CheckBinding(t, l.symbols(), &l.Funcs)
}

func TestHIPRTCSymbolTable(t *testing.T) {
	var n hiprtcLib
	var funcs gpulib.RTCFuncs
	got := dl.SymbolNames(append(funcs.Symbols("hiprtc"), n.outputSymbols()...))
	want := []string{"hiprtcCreateProgram", "hiprtcCompileProgram", "hiprtcGetProgramLogSize", "hiprtcGetProgramLog",
		"hiprtcDestroyProgram", "hiprtcGetErrorString", "hiprtcVersion", "hiprtcGetCodeSize", "hiprtcGetCode"}
	if !slices.Equal(got, want) {
		t.Fatalf("symbols\n got %q\nwant %q", got, want)
	}
}

func TestRegistered(t *testing.T) { gputest.CheckRegistered(t, "hip", 10) }

func TestRuntimeSearch(t *testing.T) {
	root := t.TempDir()
	t.Setenv(EnvROCmPath, root)
	spec := runtimeSearch()
	if spec.Name != "libamdhip64" || !slices.Equal(spec.Sonames, []string{"libamdhip64.so.7", "libamdhip64.so.6"}) || spec.SkipLoaderPath {
		t.Fatalf("spec %+v", spec)
	}
	if want := []string{filepath.Join(root, "lib"), "/opt/rocm/lib", "/opt/rocm-*/lib"}; !slices.Equal(spec.Dirs, want) {
		t.Fatalf("dirs %q, want %q", spec.Dirs, want)
	}
	var got []string
	for _, c := range spec.Candidates()[:4] {
		got = append(got, c.Path)
	}
	want := []string{"libamdhip64.so.7", "libamdhip64.so.6", filepath.Join(root, "lib", "libamdhip64.so.7"), filepath.Join(root, "lib", "libamdhip64.so.6")}
	if !slices.Equal(got, want) {
		t.Fatalf("first candidates %q, want %q", got, want)
	}
	t.Setenv(EnvROCmPath, "")
	if dirs := runtimeSearch().Dirs; !slices.Equal(dirs, []string{"/opt/rocm/lib", "/opt/rocm-*/lib"}) {
		t.Fatalf("an empty %s must add nothing: %q", EnvROCmPath, dirs)
	}
}

func TestHIPRTCSearch(t *testing.T) {
	t.Setenv(EnvROCmPath, "")
	for _, tt := range []struct {
		runtime  string
		sonames  []string
		firstDir string
	}{
		{"/opt/rocm-7.1.0/lib/libamdhip64.so.7", []string{"libhiprtc.so.7", "libhiprtc.so.6"}, "/opt/rocm-7.1.0/lib"},
		{"/opt/rocm-6.4.1/lib/libamdhip64.so.6", []string{"libhiprtc.so.6", "libhiprtc.so.7"}, "/opt/rocm-6.4.1/lib"},
		{"", []string{"libhiprtc.so.7", "libhiprtc.so.6"}, "/opt/rocm/lib"},
	} {
		spec := hiprtcSearch(tt.runtime)
		if spec.Name != "libhiprtc" || !slices.Equal(spec.Sonames, tt.sonames) || spec.Dirs[0] != tt.firstDir {
			t.Errorf("runtime %q: spec %+v", tt.runtime, spec)
		}
	}
}

// TestLoadRuntimeRecordsAttempts walks a search through a missing folder,
// a file that is not a library and a library that is not HIP's.
func TestLoadRuntimeRecordsAttempts(t *testing.T) {
	libm := realLibrary(t)
	root := t.TempDir()
	missing, broken, wrong := filepath.Join(root, "missing"), filepath.Join(root, "broken"), filepath.Join(root, "wrong")
	writeFile(t, filepath.Join(broken, "libamdhip64.so.7"), []byte("not a shared object\n"))
	data, err := os.ReadFile(libm)
	must(t, err)
	writeFile(t, filepath.Join(wrong, "libamdhip64.so.6"), data)

	spec := runtimeSearch()
	spec.Dirs, spec.SkipLoaderPath = []string{missing, broken, wrong}, true
	_, err = loadRuntime(spec)
	var ue *hip.UnavailableError
	if !errors.As(err, &ue) || ue.Backend != "hip" || !strings.Contains(ue.Reason, "has no symbol hipInit") {
		t.Fatalf("err %v", err)
	}
	tried := ue.Libraries[0].Tried
	wantPaths := []string{
		filepath.Join(missing, "libamdhip64.so.7"), filepath.Join(missing, "libamdhip64.so.6"),
		filepath.Join(broken, "libamdhip64.so.7"), filepath.Join(broken, "libamdhip64.so.6"),
		filepath.Join(wrong, "libamdhip64.so.7"), filepath.Join(wrong, "libamdhip64.so.6"),
	}
	var paths []string
	for _, a := range tried {
		paths = append(paths, a.Path)
	}
	if !slices.Equal(paths, wantPaths) {
		t.Fatalf("attempts\n got %q\nwant %q", paths, wantPaths)
	}
	if tried[0].Err != "not found" || tried[2].Err == "not found" || tried[2].Err == "" || tried[5].Err != "" {
		t.Fatalf("attempt records %+v", tried)
	}
	if ue.Libraries[0].Loaded == "" {
		t.Fatal("the library that loaded but lacked symbols is not recorded")
	}
}

// TestOpenWithoutROCm runs where no HIP 6 or 7 runtime is installed (CI,
// this machine): Open names the library it wanted and every path it tried,
// or, where a HIP 5 runtime is there (Debian's libamdhip64-5), why that one
// cannot serve.
func TestOpenWithoutROCm(t *testing.T) {
	if _, err := defaultRuntime(); err == nil {
		t.Skip("a HIP runtime loads on this machine; the GPU tests cover Open")
	}
	var ue *hip.UnavailableError
	if _, _, err := hip.Select("hip", hip.OpenOptions{}); errors.As(err, &ue) && ue.Libraries[0].Loaded != "" {
		t.Logf("a HIP 5 runtime is installed: %v", err)
		for _, want := range []string{"is too old: miotool needs HIP 6.0 or newer", ue.Libraries[0].Loaded} {
			if !strings.Contains(ue.Reason, want) {
				t.Errorf("reason %q lacks %q", ue.Reason, want)
			}
		}
		tried := ue.Libraries[0].Tried
		if len(tried) < 3 || tried[0].Path != "libamdhip64.so.7" || tried[1].Path != "libamdhip64.so.6" ||
			filepath.Base(tried[len(tried)-1].Path) != "libamdhip64.so.5" {
			t.Errorf("attempts %+v: the current sonames first, the HIP 5 one last", tried)
		}
	} else {
		ue = gputest.OpenUnavailable(t, "hip", "libamdhip64", "libamdhip64.so.7", "libamdhip64.so.6")
	}
	if !slices.ContainsFunc(ue.Libraries[0].Tried, func(a hip.PathAttempt) bool { return a.Path == "/opt/rocm/lib/libamdhip64.so.7" }) {
		t.Error("the default install /opt/rocm/lib was not tried")
	}
	if _, err := HIPRTCVersion(); !errors.As(err, &ue) {
		t.Errorf("HIPRTCVersion without a runtime: %v", err)
	}
}

func TestFormatHIPVersion(t *testing.T) {
	for v, want := range map[int32]string{60342134: "6.3.42134", 70151234: "7.1.51234", 60000000: "6.0.0", 70200001: "7.2.1", 4: "4", 0: "0"} {
		if got := formatHIPVersion(v); got != want {
			t.Errorf("formatHIPVersion(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestBaseArch(t *testing.T) {
	for in, want := range map[string]string{
		"gfx942:sramecc+:xnack-": "gfx942", "gfx90a:xnack+": "gfx90a", "gfx1100": "gfx1100",
		"gfx950": "gfx950", "gfx1201": "gfx1201", "gfx908:sramecc-": "gfx908",
	} {
		if got, err := baseArch(in); err != nil || got != want {
			t.Errorf("baseArch(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "gfx", "sm_90", "gfx942:", "gfx942:xnack", "gfx942 ", "GFX942", "gfx942;rm -rf"} {
		if _, err := baseArch(bad); err == nil || !strings.Contains(err.Error(), "gfxNNN") {
			t.Errorf("baseArch(%q) accepted or unclear: %v", bad, err)
		}
	}
}

func TestArchFromProps(t *testing.T) {
	put := func(buf []byte, at int, s string) { copy(buf[at:], s+"\x00") }
	tests := []struct {
		name  string
		setup func([]byte)
		want  string
	}{
		{"at its offset", func(b []byte) {
			put(b, 0, "AMD Instinct MI300X")
			put(b, propsGCNArchNameOffset, "gfx942:sramecc+:xnack-")
		}, "gfx942:sramecc+:xnack-"},
		{"moved", func(b []byte) { put(b, 0, "gfx-like name"); put(b, 700, "gfx90a:xnack+") }, "gfx90a:xnack+"},
		{"junk at the offset", func(b []byte) { put(b, propsGCNArchNameOffset, "garbage"); put(b, 1400, "gfx1100") }, "gfx1100"},
		{"inside another string", func(b []byte) { put(b, 10, "xgfx942") }, ""},
		{"none", func([]byte) {}, ""},
		{"no terminator", func(b []byte) { copy(b[len(b)-6:], "gfx942") }, ""},
	}
	for _, tt := range tests {
		buf := make([]byte, propsBufferSize)
		tt.setup(buf)
		if got := archFromProps(buf); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := archFromProps(nil); got != "" {
		t.Errorf("empty buffer: %q", got)
	}
}

// realLibrary finds a shared library every glibc system has, to stand in
// for a library that loads but is not HIP's.
func realLibrary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{
		"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
		"/lib64/libm.so.6", "/usr/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6",
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no libm.so.6 found to stand in for a loadable library")
	return ""
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, data, 0o755))
}
