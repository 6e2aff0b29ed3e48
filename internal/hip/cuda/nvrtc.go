package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/ebitengine/purego"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// nvrtcErrorCompilation is NVRTC_ERROR_COMPILATION: the source itself is
// wrong, so no fallback can help.
const nvrtcErrorCompilation = 6

// nvrtcLib is NVRTC as found (or not) in this process.
type nvrtcLib struct {
	lib     hip.Library
	rtc     *gpulib.RTC
	ptx     gpulib.RTCOutput
	cubin   gpulib.RTCOutput // zero where NVRTC cannot emit CUBIN
	version string
	err     error // why NVRTC cannot be used; nil when it can
}

// targetsDir is the toolkit's per-platform library folder.
func targetsDir() string {
	if runtime.GOARCH == "arm64" {
		return "targets/sbsa-linux/lib"
	}
	return "targets/x86_64-linux/lib"
}

// nvrtcSearch looks for NVRTC 13, then 12, then whatever libnvrtc.so is:
// on the loader's path, under $CUDA_HOME, then under every
// /usr/local/cuda* install, newest first.
func nvrtcSearch() gpulib.SearchSpec {
	var dirs []string
	if home := os.Getenv("CUDA_HOME"); home != "" {
		dirs = append(dirs, filepath.Join(home, "lib64"), filepath.Join(home, targetsDir()))
	}
	dirs = append(dirs, "/usr/local/cuda*/lib64", filepath.Join("/usr/local/cuda*", targetsDir()))
	return gpulib.SearchSpec{
		Name:    "libnvrtc",
		Sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"},
		Dirs:    dirs,
	}
}

var defaultNVRTC = sync.OnceValue(func() *nvrtcLib { return loadNVRTC(nvrtcSearch()) })

// loadNVRTC opens and binds NVRTC; a failure is recorded in err, not
// returned, because kernels can still come from precompiled PTX.
func loadNVRTC(spec gpulib.SearchSpec) *nvrtcLib {
	n := &nvrtcLib{}
	h, lib, err := gpulib.Open(spec)
	n.lib = lib
	if err != nil {
		n.err = err
		return n
	}
	rtc := &gpulib.RTC{Prefix: "nvrtc"}
	n.ptx = gpulib.RTCOutput{Kind: "ptx", SizeSym: "nvrtcGetPTXSize"}
	n.cubin = gpulib.RTCOutput{Kind: "cubin", SizeSym: "nvrtcGetCUBINSize"}
	table := append(rtc.Funcs.Symbols("nvrtc"),
		gpulib.Symbol{Name: "nvrtcGetPTXSize", Addr: &n.ptx.SizeFn},
		gpulib.Symbol{Name: "nvrtcGetPTX", Addr: &n.ptx.GetFn},
		gpulib.Symbol{Name: "nvrtcGetCUBINSize", Addr: &n.cubin.SizeFn, Optional: true},
		gpulib.Symbol{Name: "nvrtcGetCUBIN", Addr: &n.cubin.GetFn, Optional: true},
	)
	if err := gpulib.Bind(gpulib.Lookup(h), lib.Loaded, table); err != nil {
		n.err = err
		return n
	}
	if n.cubin.SizeFn == 0 || n.cubin.GetFn == 0 {
		n.cubin = gpulib.RTCOutput{}
	}
	n.rtc = rtc
	if v, err := rtc.Version(); err == nil {
		n.version = v
		n.lib.Version = v
	}
	preloadBuiltins(lib.Loaded)
	return n
}

// preloadBuiltins opens the libnvrtc-builtins that sits beside NVRTC, so
// that NVRTC's own by-name dlopen of it succeeds when that folder is not on
// the loader's path. A failure here is left for NVRTC to report.
func preloadBuiltins(nvrtcPath string) {
	if !filepath.IsAbs(nvrtcPath) {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(nvrtcPath), "libnvrtc-builtins.so.*"))
	gpulib.SortNewestFirst(matches)
	for _, m := range matches {
		if _, err := purego.Dlopen(m, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return
		}
	}
}

func (n *nvrtcLib) available() bool { return n.err == nil }

// compileForArch builds src for one device architecture (sm_XY): CUBIN
// where NVRTC can make it (no driver JIT, no PTX-version mismatch), else PTX
// for compute_XY. Results are cached for the process.
func (n *nvrtcLib) compileForArch(src *hip.KernelSource, arch string) ([]byte, error) {
	out := n.cubin
	target := arch
	if out.SizeFn == 0 {
		out = n.ptx
		var err error
		if target, err = virtualArch(arch); err != nil {
			return nil, err
		}
	}
	return n.compile(src, target, out)
}

func (n *nvrtcLib) compile(src *hip.KernelSource, target string, out gpulib.RTCOutput) ([]byte, error) {
	opts := compileOptions(target)
	code, _, err := gpulib.Programs.Get(n.codeKey(src.Text, target, out.Kind), func() ([]byte, error) {
		code, _, err := n.rtc.Compile(src.Text, programName(src), opts, out)
		return code, err
	})
	return code, err
}

func compileOptions(target string) []string { return []string{"--gpu-architecture=" + target} }

// codeKey names the compiler by its file as well as its version: two
// NVRTC builds in one process must not share cached code.
func (n *nvrtcLib) codeKey(text, target, output string) gpulib.CodeKey {
	return gpulib.NewCodeKey("nvrtc "+n.version+" "+n.lib.Loaded, target, output, text, compileOptions(target))
}

func programName(src *hip.KernelSource) string {
	if src.Name == "" {
		return "kernel.cu"
	}
	return src.Name + ".cu"
}

var archPattern = regexp.MustCompile(`^(sm|compute)_([0-9]{2,3}[a-z]?)$`)

// virtualArch maps sm_XY or compute_XY to compute_XY.
func virtualArch(arch string) (string, error) {
	m := archPattern.FindStringSubmatch(arch)
	if m == nil {
		return "", fmt.Errorf("architecture %q is not of the form sm_XY or compute_XY (e.g. sm_90)", arch)
	}
	return "compute_" + m[2], nil
}

// CompilePTX compiles src.Text with NVRTC to PTX for arch (sm_XY or
// compute_XY; PTX always targets the virtual compute_XY), for tools that
// generate the precompiled PTX a KernelSource carries. The result has no
// trailing NUL. Compiled code is cached for the process.
func CompilePTX(src *hip.KernelSource, arch string) (string, error) {
	if src == nil || strings.TrimSpace(src.Text) == "" {
		return "", fmt.Errorf("kernel source has no text to compile")
	}
	target, err := virtualArch(arch)
	if err != nil {
		return "", err
	}
	n := defaultNVRTC()
	if !n.available() {
		return "", unavailable(n.err.Error(), n.lib)
	}
	code, err := n.compile(src, target, n.ptx)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(code), "\x00"), nil
}

// NVRTCVersion reports the version ("13.0") of the NVRTC this process
// finds, or why none can be used.
func NVRTCVersion() (string, error) {
	n := defaultNVRTC()
	if !n.available() {
		return "", unavailable(n.err.Error(), n.lib)
	}
	return n.version, nil
}
