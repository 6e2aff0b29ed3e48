package amd

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"miotool/internal/dl"
	"miotool/internal/hip/gpulib"
)

// hiprtcErrorCompilation is HIPRTC_ERROR_COMPILATION: the source itself is
// wrong.
const hiprtcErrorCompilation = 6

// hiprtcLib is hiprtc as found (or not) in this process.
type hiprtcLib struct {
	*gpulib.Compiler
	code gpulib.RTCOutput // hiprtcGetCodeSize / hiprtcGetCode: the code object
}

// hiprtcSonames lists hiprtc's sonames, the one of the same HIP major as
// the runtime that loaded (its file name ends .so.6 or .so.7) first.
func hiprtcSonames(runtimePath string) []string {
	names := []string{"libhiprtc.so.7", "libhiprtc.so.6"}
	if strings.HasSuffix(runtimePath, ".so.6") {
		names[0], names[1] = names[1], names[0]
	}
	return names
}

// hiprtcSearch looks for hiprtc on the loader's path, then beside the
// runtime that loaded, then where the runtime itself is looked for.
func hiprtcSearch(runtimePath string) dl.SearchSpec {
	var dirs []string
	if filepath.IsAbs(runtimePath) {
		dirs = append(dirs, filepath.Dir(runtimePath))
	}
	return dl.SearchSpec{
		Name:    "libhiprtc",
		Sonames: hiprtcSonames(runtimePath),
		Dirs:    append(dirs, rocmLibDirs()...),
	}
}

var (
	hiprtcMu     sync.Mutex
	hiprtcByPath = map[string]*hiprtcLib{}
)

// defaultHIPRTC loads hiprtc once per runtime library.
func defaultHIPRTC(runtimePath string) *hiprtcLib {
	hiprtcMu.Lock()
	defer hiprtcMu.Unlock()
	if n, ok := hiprtcByPath[runtimePath]; ok {
		return n
	}
	n := loadHIPRTC(hiprtcSearch(runtimePath))
	hiprtcByPath[runtimePath] = n
	return n
}

// loadHIPRTC opens and binds hiprtc; a failure is recorded, not returned,
// so that a device without its compiler still opens (memory, streams and
// capture work; ModuleLoad says why it cannot).
func loadHIPRTC(spec dl.SearchSpec) *hiprtcLib {
	n := &hiprtcLib{code: gpulib.RTCOutput{Kind: "code", SizeSym: "hiprtcGetCodeSize"}}
	n.Compiler = gpulib.OpenCompiler(spec, "hiprtc", n.outputSymbols()...)
	return n
}

// outputSymbols binds the calls that fetch the code object.
func (n *hiprtcLib) outputSymbols() []dl.Symbol {
	return []dl.Symbol{
		{Name: "hiprtcGetCodeSize", Addr: &n.code.SizeFn},
		{Name: "hiprtcGetCode", Addr: &n.code.GetFn},
	}
}

// compileOptions builds for one architecture at full optimisation.
func compileOptions(arch string) []string { return []string{"--offload-arch=" + arch, "-O3"} }

// modules is how a device builds kernels with n: a code object for the
// device's base architecture (gfx942), which loads whatever target features
// (sramecc, xnack) the device has on. hiprtc is the only way; HIP has no
// precompiled fallback.
func (n *hiprtcLib) modules() gpulib.ModuleBuilder {
	return gpulib.ModuleBuilder{
		Compiler: n.Compiler,
		Name:     "hiprtc",
		Suffix:   ".hip",
		Target: func(arch string) (gpulib.BuildTarget, error) {
			return gpulib.BuildTarget{Target: arch, Options: compileOptions(arch), Output: n.code}, nil
		},
		SourceErrorStatus: hiprtcErrorCompilation,
		Backend:           backendName,
	}
}

// HIPRTCVersion reports the version ("7.1") of the hiprtc this process
// finds beside its HIP runtime, or why none can be used.
func HIPRTCVersion() (string, error) {
	rt, err := defaultRuntime()
	if err != nil {
		return "", err
	}
	n := defaultHIPRTC(rt.Lib.Loaded)
	if !n.Available() {
		return "", rt.Unavailable(fmt.Sprintf("hiprtc: %v", n.Err), n.Lib)
	}
	return n.Version, nil
}
