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
		// Cython: cdef functions, def functions and their wrappers.
		"__pyx_f_13cupy_backends_4cuda_3api_7runtime_malloc":         "cupy_backends.cuda.api.runtime.malloc",
		"__pyx_pw_4cupy_5_core_4core_7ndarray_15get":                 "cupy._core.core.ndarray.get",
		"__pyx_pf_13cupy_backends_4cuda_3api_7runtime_12memcpyAsync": "cupy_backends.cuda.api.runtime.memcpyAsync",
		"__pyx_pw_4cupy_4cuda_6stream_6Stream_5synchronize":          "cupy.cuda.stream.Stream.synchronize",
		"__pyx_module_is_main_cupy":                                  "__pyx_module_is_main_cupy",
		"__pyx_f_":                                                   "__pyx_f_",
		"__pyx_f_malloc":                                             "__pyx_f_malloc",
		"__pyx_pw_4cupy_4cuda_6memory_6Memory_1__init__":             "cupy.cuda.memory.Memory.__init__",
		// Cython compiled as C++: the static function is also C++-mangled
		// (CuPy 13's runtime extension on the H200).
		"_ZL50__pyx_f_13cupy_backends_4cuda_3api_7runtime_mallocmi":                                                                         "cupy_backends.cuda.api.runtime.malloc",
		"_ZL55__pyx_f_13cupy_backends_4cuda_3api_7runtime_mallocArraylmmiP62__pyx_opt_args_13cupy_backends_4cuda_3api_7runtime_mallocArray": "cupy_backends.cuda.api.runtime.mallocArray",
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
	if got := ReadableCallers(fs).Summary(2); got != "a ← b" {
		t.Errorf("Summary = %q, want the named frames", got)
	}
	if got := ReadableCallers([]Frame{bare}).Summary(2); got != "miotool+0x146af8" {
		t.Errorf("Summary of a nameless frame = %q, want its object and offset", got)
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

// TestReadableCallers: the frames a person looks for are the ones outside
// the runtime, the observer and the C library; the runtime's entry point
// is named from its own frames where they have a name.
func TestReadableCallers(t *testing.T) {
	f := func(module, symbol string) Frame {
		return Frame{Module: module, Raw: symbol, Symbol: Demangle(symbol), Offset: 0x40}
	}
	cupy := "/site-packages/cupy_backends/cuda/api/runtime.cpython-312-x86_64-linux-gnu.so"
	cases := []struct {
		name    string
		frames  []Frame
		entry   string
		outside []string
		summary string
	}{
		{"PyTorch: the driver, the CUDA runtime's entry, then PyTorch",
			[]Frame{f("/usr/lib/libcuda.so.1", ""), f("/x/nvidia/cu13/lib/libcudart.so.13", ""),
				f("/x/nvidia/cu13/lib/libcudart.so.13", "cudaDeviceSynchronize"),
				f("/x/torch/lib/libc10_cuda.so", "_ZN3c104cuda18device_synchronizeEv"),
				f("/x/torch/lib/libtorch_python.so", "THCPModule_cudaSynchronize"),
				f("/lib/x86_64-linux-gnu/libc.so.6", "start_thread")},
			"cudaDeviceSynchronize", []string{"c10::cuda::device_synchronize", "THCPModule_cudaSynchronize"},
			"cudaDeviceSynchronize ← c10::cuda::device_synchronize"},
		{"CuPy: a statically linked CUDA runtime has hashed names, Cython names read as Python",
			[]Frame{f(cupy, "libcudart_static_53829f2a1b"), f(cupy, "libcudart_static_f74e0c11aa"),
				f(cupy, "cudaMalloc"), f(cupy, "_ZL50__pyx_f_13cupy_backends_4cuda_3api_7runtime_mallocmi"), f("/usr/bin/python3.12", "")},
			"cudaMalloc", []string{"cupy_backends.cuda.api.runtime.malloc", "python3.12+0x40"},
			"cudaMalloc ← cupy_backends.cuda.api.runtime.malloc"},
		{"a function named like the runtime's API, called by the program, is a caller",
			[]Frame{f("/usr/lib/libcuda.so.1", ""), f("/opt/app/libwrap.so", "cudaMallocTracked"), f("/opt/app/bin/app", "main")},
			"", []string{"cudaMallocTracked", "main"}, "cudaMallocTracked ← main"},
		{"HIP: libamdhip64 and HSA are the runtime, the observer too",
			[]Frame{f("/cache/libmiotool-observer.so", "hipStreamQuery"), f("/opt/rocm/lib/libhsa-runtime64.so.1", ""),
				f("/opt/rocm/lib/libamdhip64.so.6", "hipStreamQuery"), f("/opt/rocm/lib/libMIOpen.so.1", "_ZN6miopen6Handle3RunENS_6KernelEPvS2_mb")},
			"hipStreamQuery", []string{"miopen::Handle::Run"}, "hipStreamQuery ← miopen::Handle::Run"},
		{"an unsymbolized frame is its object and offset",
			[]Frame{f("/usr/lib/libcudart.so.12", "cudaMalloc"), f("/opt/app/bin/app", "")},
			"cudaMalloc", []string{"app+0x40"}, "cudaMalloc ← app+0x40"},
		{"a wheel's hashed copy of the runtime is the runtime",
			[]Frame{f("/x/libcudart-d0da41ae.so.11.0", "cudaStreamQuery"), f("/x/libfoo.so", "foo")},
			"cudaStreamQuery", []string{"foo"}, "cudaStreamQuery ← foo"},
		{"only runtime frames", []Frame{f("/usr/lib/libcuda.so.1", "cuInit")}, "", nil, ""},
	}
	for _, c := range cases {
		got := ReadableCallers(c.frames)
		var outside []string
		for _, fr := range got.Frames {
			outside = append(outside, fr.Name())
		}
		if got.Entry != c.entry || strings.Join(outside, ",") != strings.Join(c.outside, ",") || got.Summary(2) != c.summary ||
			got.Skipped != len(c.frames)-len(c.outside) {
			t.Errorf("%s: entry %q, outside %q, summary %q, %d skipped; want %q, %q, %q", c.name, got.Entry, outside,
				got.Summary(2), got.Skipped, c.entry, c.outside, c.summary)
		}
	}
}
