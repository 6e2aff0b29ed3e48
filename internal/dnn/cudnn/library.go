// Package cudnn binds the parts of NVIDIA's cuDNN 9 (libcudnn.so.9) that
// miotool's library target needs: a handle on a stream, 4-D tensor and
// filter descriptors, a 2-D convolution descriptor, find and heuristic
// algorithm selection, the forward convolution and tensor scaling. Calls go
// through purego with no cgo.
//
// cuDNN runs on the CUDA context current on the calling OS thread (the
// runtime API adopts a context the driver API made current). Context makes
// a device's primary context, the one miotool's CUDA backend uses, current
// there; every call of a Handle must come from a goroutine locked to such a
// thread. A Handle is not safe for concurrent use: give each thread its own,
// as cuDNN asks.
package cudnn

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/hip"
)

// LibraryName is the report label of the library.
const LibraryName = "libcudnn"

// Soname is the cuDNN 9 library. cuDNN 8 has other status codes and is not
// supported; the shim libcudnn.so.9 loads its sub-libraries
// (libcudnn_cnn.so.9, libcudnn_ops.so.9, ...) from its own folder on demand.
const Soname = "libcudnn.so.9"

// EnvCUDNNPath names a cuDNN install searched after the loader's path, as
// NVIDIA's tarball instructions and several build systems use it.
const EnvCUDNNPath = "CUDNN_PATH"

// Search finds libcudnn.so.9 through the dynamic loader, then under
// $CUDNN_PATH, the distribution's library folder and the CUDA toolkit's.
func Search() dl.SearchSpec {
	var dirs []string
	if root := os.Getenv(EnvCUDNNPath); root != "" {
		dirs = append(dirs, filepath.Join(root, "lib"), filepath.Join(root, "lib64"))
	}
	if root := os.Getenv("CUDA_PATH"); root != "" {
		dirs = append(dirs, filepath.Join(root, "lib64"))
	}
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64", "/usr/local/cuda-*/lib64")
	return dl.SearchSpec{Name: LibraryName, Sonames: []string{Soname}, Dirs: dirs}
}

// api holds the address of every entry point the package calls.
type api struct {
	getVersion, getCudartVersion, getErrorString, getLastErrorString uintptr

	create, destroy, setStream, getStream uintptr

	createTensor, setTensor4d, destroyTensor                          uintptr
	createFilter, setFilter4d, destroyFilter                          uintptr
	createConv, setConv2d, setConvMathType, destroyConv, getOutputDim uintptr

	getFwdMaxCount, findFwd, getFwdV7, getFwdWorkspace, convForward, scaleTensor uintptr
}

func (a *api) symbols() []dl.Symbol {
	return []dl.Symbol{
		{Name: "cudnnGetVersion", Addr: &a.getVersion},
		{Name: "cudnnGetCudartVersion", Addr: &a.getCudartVersion, Optional: true},
		{Name: "cudnnGetErrorString", Addr: &a.getErrorString},
		{Name: "cudnnGetLastErrorString", Addr: &a.getLastErrorString, Optional: true},

		{Name: "cudnnCreate", Addr: &a.create},
		{Name: "cudnnDestroy", Addr: &a.destroy},
		{Name: "cudnnSetStream", Addr: &a.setStream},
		{Name: "cudnnGetStream", Addr: &a.getStream},

		{Name: "cudnnCreateTensorDescriptor", Addr: &a.createTensor},
		{Name: "cudnnSetTensor4dDescriptor", Addr: &a.setTensor4d},
		{Name: "cudnnDestroyTensorDescriptor", Addr: &a.destroyTensor},
		{Name: "cudnnCreateFilterDescriptor", Addr: &a.createFilter},
		{Name: "cudnnSetFilter4dDescriptor", Addr: &a.setFilter4d},
		{Name: "cudnnDestroyFilterDescriptor", Addr: &a.destroyFilter},
		{Name: "cudnnCreateConvolutionDescriptor", Addr: &a.createConv},
		{Name: "cudnnSetConvolution2dDescriptor", Addr: &a.setConv2d},
		{Name: "cudnnSetConvolutionMathType", Addr: &a.setConvMathType},
		{Name: "cudnnDestroyConvolutionDescriptor", Addr: &a.destroyConv},
		{Name: "cudnnGetConvolution2dForwardOutputDim", Addr: &a.getOutputDim},

		{Name: "cudnnGetConvolutionForwardAlgorithmMaxCount", Addr: &a.getFwdMaxCount},
		{Name: "cudnnFindConvolutionForwardAlgorithm", Addr: &a.findFwd},
		{Name: "cudnnGetConvolutionForwardAlgorithm_v7", Addr: &a.getFwdV7},
		{Name: "cudnnGetConvolutionForwardWorkspaceSize", Addr: &a.getFwdWorkspace},
		{Name: "cudnnConvolutionForward", Addr: &a.convForward},
		{Name: "cudnnScaleTensor", Addr: &a.scaleTensor},
	}
}

// Library is libcudnn loaded and bound.
type Library struct {
	api    api
	core   dnnlib.Core[Status]
	cudart int
}

// Version is cuDNN's version, e.g. 9.14.0.
type Version = dnnlib.Version

// ParseVersion splits what cudnnGetVersion returns: major*10000 +
// minor*100 + patch since cuDNN 9 (91400 is 9.14.0); major*1000 +
// minor*100 + patch before (8907 is 8.9.7).
func ParseVersion(v int) Version {
	if v >= 90000 {
		return Version{Major: v / 10000, Minor: v % 10000 / 100, Patch: v % 100}
	}
	return Version{Major: v / 1000, Minor: v % 1000 / 100, Patch: v % 100}
}

// Open loads the first library spec finds and binds its symbols. A missing
// library is a *dl.NotFoundError, a missing symbol a
// *dl.MissingSymbolError, and a library that is not cuDNN 9 an error
// naming its version; each carries the search record (see Info).
func Open(spec dl.SearchSpec) (*Library, error) {
	l := &Library{}
	rec, err := dnnlib.Load(spec, l.api.symbols(), "not cuDNN 9?")
	if err != nil {
		return nil, err
	}
	l.core = dnnlib.NewCore[Status](LibraryName, rec, l.lastError)
	l.core.SetVersion(ParseVersion(int(dl.CallPtr(l.api.getVersion))))
	if v := l.core.Version(); v.Major != 9 {
		return nil, &OpenError{Library: l.core.Info(), Err: fmt.Errorf("%s is cuDNN %s; miotool needs cuDNN 9", rec.Loaded, v)}
	}
	if l.api.getCudartVersion != 0 {
		l.cudart = int(dl.CallPtr(l.api.getCudartVersion))
	}
	return l, nil
}

// OpenError is a failed Open with the record of every path tried.
type OpenError = dnnlib.OpenError

var defaultLib = dnnlib.NewOnce(LibraryName, func() (*Library, error) { return Open(Search()) })

// Default loads the library Search finds, once per process.
func Default() (*Library, error) { return defaultLib.Get() }

// Locate is the search record of Default's library, for reports: where it
// loaded from and its version, or every path tried.
func Locate() hip.Library { return defaultLib.Locate() }

// Info is where the library loaded from and its version.
func (l *Library) Info() hip.Library { return l.core.Info() }

// Version is the library's version.
func (l *Library) Version() Version { return l.core.Version() }

// CudartVersion is the CUDA runtime version cuDNN was built with (12080
// for 12.8), 0 when the library does not say.
func (l *Library) CudartVersion() int { return l.cudart }

// String names the library for reports: "libcudnn 9.14.0 (/usr/lib/...)".
func (l *Library) String() string { return l.core.String() }

// lastError is cuDNN 9's text for the most recent failure on this thread,
// on one line, "" when the library cannot say.
func (l *Library) lastError(int32) string {
	if l.api.getLastErrorString == 0 {
		return ""
	}
	buf := make([]byte, 512)
	dl.Call(l.api.getLastErrorString, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	return strings.Join(strings.Fields(cString(buf)), " ")
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
