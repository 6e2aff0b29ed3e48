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

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// nvrtcErrorCompilation is NVRTC_ERROR_COMPILATION: the source itself is
// wrong, so no fallback can help.
const nvrtcErrorCompilation = 6

// nvrtcLib is NVRTC as found (or not) in this process.
type nvrtcLib struct {
	*gpulib.Compiler
	ptx   gpulib.RTCOutput
	cubin gpulib.RTCOutput // zero where NVRTC cannot emit CUBIN
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
func nvrtcSearch() dl.SearchSpec {
	var dirs []string
	if home := os.Getenv("CUDA_HOME"); home != "" {
		dirs = append(dirs, filepath.Join(home, "lib64"), filepath.Join(home, targetsDir()))
	}
	dirs = append(dirs, "/usr/local/cuda*/lib64", filepath.Join("/usr/local/cuda*", targetsDir()))
	return dl.SearchSpec{
		Name:    "libnvrtc",
		Sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"},
		Dirs:    dirs,
	}
}

// EnvNVRTC set to "off" makes the backend behave as on a machine without
// NVRTC: kernels come from their precompiled PTX. It is how the PTX
// fallback is checked on a machine that has NVRTC.
const EnvNVRTC = "MIOTOOL_NVRTC"

var defaultNVRTC = sync.OnceValue(func() *nvrtcLib {
	if os.Getenv(EnvNVRTC) == "off" {
		return disabledNVRTC()
	}
	return loadNVRTC(nvrtcSearch())
})

// disabledNVRTC is NVRTC switched off by EnvNVRTC.
func disabledNVRTC() *nvrtcLib {
	n := &nvrtcLib{}
	n.Compiler = &gpulib.Compiler{Prefix: "nvrtc", Lib: hip.Library{Name: "libnvrtc"},
		Err: fmt.Errorf("NVRTC switched off with %s=off", EnvNVRTC)}
	return n
}

// loadNVRTC opens and binds NVRTC; a failure is recorded in Err, not
// returned, because kernels can still come from precompiled PTX.
func loadNVRTC(spec dl.SearchSpec) *nvrtcLib {
	n := &nvrtcLib{
		ptx:   gpulib.RTCOutput{Kind: "ptx", SizeSym: "nvrtcGetPTXSize"},
		cubin: gpulib.RTCOutput{Kind: "cubin", SizeSym: "nvrtcGetCUBINSize"},
	}
	n.Compiler = gpulib.OpenCompiler(spec, "nvrtc", n.outputSymbols()...)
	if n.cubin.SizeFn == 0 || n.cubin.GetFn == 0 {
		n.cubin = gpulib.RTCOutput{}
	}
	if n.Available() {
		preloadBuiltins(n.Lib.Loaded)
	}
	return n
}

// outputSymbols binds the calls that fetch PTX and, from NVRTC 11.1 on,
// CUBIN.
func (n *nvrtcLib) outputSymbols() []dl.Symbol {
	return []dl.Symbol{
		{Name: "nvrtcGetPTXSize", Addr: &n.ptx.SizeFn},
		{Name: "nvrtcGetPTX", Addr: &n.ptx.GetFn},
		{Name: "nvrtcGetCUBINSize", Addr: &n.cubin.SizeFn, Optional: true},
		{Name: "nvrtcGetCUBIN", Addr: &n.cubin.GetFn, Optional: true},
	}
}

// preloadBuiltins opens the libnvrtc-builtins that sits beside NVRTC, so
// that NVRTC's own by-name dlopen of it succeeds when that folder is not on
// the loader's path. A failure here is left for NVRTC to report.
func preloadBuiltins(nvrtcPath string) {
	if !filepath.IsAbs(nvrtcPath) {
		return
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(nvrtcPath), "libnvrtc-builtins.so.*"))
	dl.SortNewestFirst(matches)
	for _, m := range matches {
		if _, err := dl.OpenPath(m, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			return
		}
	}
}

// modules is how a device builds kernels with n: CUBIN for the device's
// own sm_XY where NVRTC can make it (no driver JIT, no PTX-version
// mismatch), else PTX for compute_XY, and the source's precompiled PTX
// where NVRTC cannot build at all.
func (n *nvrtcLib) modules() gpulib.ModuleBuilder {
	return gpulib.ModuleBuilder{
		Compiler:          n.Compiler,
		Name:              "NVRTC",
		Suffix:            programSuffix,
		Target:            n.target,
		SourceErrorStatus: nvrtcErrorCompilation,
		UsesPTX:           true,
		Backend:           backendName,
	}
}

const programSuffix = ".cu"

func (n *nvrtcLib) target(arch string) (gpulib.BuildTarget, error) {
	if n.cubin.SizeFn != 0 {
		return gpulib.BuildTarget{Target: arch, Options: compileOptions(arch), Output: n.cubin}, nil
	}
	return n.ptxTarget(arch)
}

func (n *nvrtcLib) ptxTarget(arch string) (gpulib.BuildTarget, error) {
	v, err := virtualArch(arch)
	if err != nil {
		return gpulib.BuildTarget{}, err
	}
	return gpulib.BuildTarget{Target: v, Options: compileOptions(v), Output: n.ptx}, nil
}

func compileOptions(target string) []string { return []string{"--gpu-architecture=" + target} }

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
	n := defaultNVRTC()
	t, err := n.ptxTarget(arch)
	if err != nil {
		return "", err
	}
	if !n.Available() {
		return "", unavailable(n.Err.Error(), n.Lib)
	}
	code, err := n.CompileCached(gpulib.Programs, src.Text, gpulib.ProgramName(src, programSuffix), t.Target, t.Options, t.Output)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(code), "\x00"), nil
}

// NVRTCVersion reports the version ("13.0") of the NVRTC this process
// finds, or why none can be used.
func NVRTCVersion() (string, error) {
	n := defaultNVRTC()
	if !n.Available() {
		return "", unavailable(n.Err.Error(), n.Lib)
	}
	return n.Version, nil
}

// unavailable is the backend's error where NVRTC is asked for without a
// driver loaded.
func unavailable(reason string, libs ...hip.Library) error {
	return &hip.UnavailableError{Backend: backendName, Reason: reason, Libraries: libs}
}
