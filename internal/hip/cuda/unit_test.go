package cuda

import (
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

func TestSymbolTableUsesVersionedNames(t *testing.T) {
	var l driverLib
	names := dl.SymbolNames(l.symbols())
	for _, want := range []string{
		"cuMemAlloc_v2", "cuMemFree_v2", "cuStreamBeginCapture_v2", "cuGraphInstantiateWithFlags",
		"cuStreamDestroy_v2", "cuEventDestroy_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2",
		"cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemsetD8_v2",
		"cuDevicePrimaryCtxRelease_v2", "cuDeviceTotalMem_v2", "cuStreamGetCaptureInfo_v3",
		"cuMemHostAlloc", "cuMemFreeHost", "cuMemHostRegister_v2", "cuMemHostUnregister",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("the table lacks %s", want)
		}
	}
	// The plain exports keep old argument lists: binding any is a bug.
	for _, legacy := range []string{
		"cuMemAlloc", "cuMemFree", "cuStreamBeginCapture", "cuGraphInstantiate", "cuStreamDestroy",
		"cuEventDestroy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
		"cuMemcpyDtoDAsync", "cuMemsetD8", "cuDevicePrimaryCtxRelease", "cuDeviceTotalMem",
		"cuStreamGetCaptureInfo", "cuCtxCreate", "cuCtxDestroy", "cuGraphInstantiate_v2",
		"cuMemHostRegister", // the pre-6.5 export: cuda.h maps the name to _v2
	} {
		if slices.Contains(names, legacy) {
			t.Errorf("the table binds the legacy name %s", legacy)
		}
	}
	gputest.CheckBinding(t, l.symbols(), &l.Funcs)
}

func TestRegistered(t *testing.T) { gputest.CheckRegistered(t, "cuda", 20) }

// TestOpenWithoutDriver runs where libcuda.so.1 is absent (CI, laptops).
func TestOpenWithoutDriver(t *testing.T) {
	if _, err := defaultDriver(); err == nil {
		t.Skip("libcuda.so.1 loads on this machine; the GPU tests cover Open")
	}
	// Only libcuda.so.1: the bare libcuda.so may be the toolkit's stub.
	gputest.OpenUnavailable(t, "cuda", "libcuda", "libcuda.so.1")
}

func TestNVRTCSearch(t *testing.T) {
	home := t.TempDir()
	t.Setenv("CUDA_HOME", home)
	spec := nvrtcSearch()
	if !slices.Equal(spec.Sonames, []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
		t.Fatalf("sonames %q", spec.Sonames)
	}
	want := []string{
		filepath.Join(home, "lib64"), filepath.Join(home, targetsDir()),
		"/usr/local/cuda*/lib64", filepath.Join("/usr/local/cuda*", targetsDir()),
	}
	if !slices.Equal(spec.Dirs, want) {
		t.Fatalf("dirs %q, want %q", spec.Dirs, want)
	}
	t.Setenv("CUDA_HOME", "")
	if dirs := nvrtcSearch().Dirs; len(dirs) != 2 || strings.HasPrefix(dirs[0], "lib64") {
		t.Fatalf("an empty CUDA_HOME must add nothing: %q", dirs)
	}
}

// TestNVRTCFromCUDAHome puts a file that is not a library where NVRTC 13
// would be, and checks that the attempt is recorded with its failure.
func TestNVRTCFromCUDAHome(t *testing.T) {
	home := t.TempDir()
	fake := filepath.Join(home, "lib64", "libnvrtc.so.13")
	must(t, os.MkdirAll(filepath.Dir(fake), 0o755))
	must(t, os.WriteFile(fake, []byte("not a library"), 0o644))
	t.Setenv("CUDA_HOME", home)
	spec := nvrtcSearch()
	spec.SkipLoaderPath = true
	spec.Dirs = spec.Dirs[:2] // leave out the machine's own installs
	n := loadNVRTC(spec)
	if n.Available() {
		t.Fatal("a text file loaded as NVRTC")
	}
	var tried *hip.PathAttempt
	for i := range n.Lib.Tried {
		if n.Lib.Tried[i].Path == fake {
			tried = &n.Lib.Tried[i]
		}
	}
	if tried == nil || tried.Err == "" || tried.Err == "not found" {
		t.Fatalf("attempt for %s: %+v (all: %+v)", fake, tried, n.Lib.Tried)
	}
}

func TestVirtualArch(t *testing.T) {
	tests := []struct{ in, want string }{
		{"sm_90", "compute_90"}, {"compute_80", "compute_80"}, {"sm_100a", "compute_100a"}, {"sm_120", "compute_120"},
	}
	for _, tt := range tests {
		if got, err := virtualArch(tt.in); err != nil || got != tt.want {
			t.Errorf("virtualArch(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "90", "sm90", "gfx942", "sm_9", "compute_90;rm"} {
		if _, err := virtualArch(bad); err == nil || !strings.Contains(err.Error(), "sm_XY") {
			t.Errorf("virtualArch(%q) accepted or unclear: %v", bad, err)
		}
	}
}

func TestCompilePTXRejectsBadInput(t *testing.T) {
	if _, err := CompilePTX(nil, "sm_90"); err == nil {
		t.Error("nil source accepted")
	}
	if _, err := CompilePTX(&hip.KernelSource{Text: "x"}, "gfx942"); err == nil || !strings.Contains(err.Error(), "gfx942") {
		t.Errorf("bad arch: %v", err)
	}
}

func TestFormatCUDAVersion(t *testing.T) {
	for v, want := range map[int32]string{13000: "13.0", 12080: "12.8", 12060: "12.6", 11020: "11.2"} {
		if got := formatCUDAVersion(v); got != want {
			t.Errorf("formatCUDAVersion(%d) = %q, want %q", v, got, want)
		}
	}
}

// TestCodeKeyNamesTheCompilerFile: two NVRTC libraries of one version in
// one process (a toolkit's and another) must not share cached code.
func TestCodeKeyNamesTheCompilerFile(t *testing.T) {
	a := &nvrtcLib{Compiler: &gpulib.Compiler{Prefix: "nvrtc", Version: "13.0", Lib: hip.Library{Loaded: "/usr/local/cuda-13.0/lib64/libnvrtc.so.13"}}}
	b := &nvrtcLib{Compiler: &gpulib.Compiler{Prefix: "nvrtc", Version: "13.0", Lib: hip.Library{Loaded: "/opt/other/libnvrtc.so.13"}}}
	key := func(n *nvrtcLib, arch string) gpulib.CodeKey {
		return n.CodeKey(arch, "cubin", "src", compileOptions(arch))
	}
	if key(a, "sm_90") == key(b, "sm_90") {
		t.Fatal("different NVRTC files share a cache key")
	}
	if key(a, "sm_90") == key(a, "sm_80") {
		t.Fatal("different architectures share a cache key")
	}
	if !strings.Contains(key(a, "sm_90").Compiler, "nvrtc 13.0 ") {
		t.Fatalf("key %+v does not name the compiler and its version", key(a, "sm_90"))
	}
}

// TestBuildTarget: CUBIN for the device's own architecture where NVRTC
// makes it, else PTX for the virtual one; an architecture NVRTC cannot
// name is refused.
func TestBuildTarget(t *testing.T) {
	n := &nvrtcLib{
		ptx:   gpulib.RTCOutput{Kind: "ptx", SizeFn: 1, GetFn: 2},
		cubin: gpulib.RTCOutput{Kind: "cubin", SizeFn: 3, GetFn: 4},
	}
	m := n.modules()
	if m.Name != "NVRTC" || m.Suffix != ".cu" || !m.UsesPTX || m.SourceErrorStatus != nvrtcErrorCompilation {
		t.Fatalf("builder %+v", m)
	}
	bt, err := m.Target("sm_90")
	if err != nil || bt.Target != "sm_90" || bt.Output.Kind != "cubin" || !slices.Equal(bt.Options, []string{"--gpu-architecture=sm_90"}) {
		t.Fatalf("with CUBIN: %+v, %v", bt, err)
	}
	n.cubin = gpulib.RTCOutput{}
	bt, err = m.Target("sm_90")
	if err != nil || bt.Target != "compute_90" || bt.Output.Kind != "ptx" || !slices.Equal(bt.Options, []string{"--gpu-architecture=compute_90"}) {
		t.Fatalf("without CUBIN: %+v, %v", bt, err)
	}
	if _, err := m.Target("gfx942"); err == nil || !strings.Contains(err.Error(), "gfx942") {
		t.Fatalf("an AMD architecture: %v", err)
	}
}
