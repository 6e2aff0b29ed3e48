// Package miopen binds the parts of AMD's MIOpen (libMIOpen.so.1) that
// miotool's library target needs: a handle on a HIP stream, 4-D tensor
// descriptors, a 2-D convolution descriptor, Find 1.0, the forward
// convolution by algorithm, immediate mode (solutions and forward by
// solution id) and tensor scaling. Calls go through purego with no cgo.
//
// MIOpen works on the HIP device selected on the calling OS thread
// (hipSetDevice is per host thread); DeviceSelector selects the device of
// miotool's HIP backend there. Every call of a Handle must come from a
// goroutine locked to such a thread. A Handle is not safe for concurrent
// use: give each thread its own.
//
// MIOpen reads MIOPEN_USER_DB_PATH and the find-db switches from the
// environment, so Open sets them before the library loads (purego writes
// os.Setenv through to the C environment).
package miopen

import (
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/hip"
)

// LibraryName is the report label of the library.
const LibraryName = "libMIOpen"

// Soname is MIOpen's library (SOVERSION 1 in every ROCm release so far).
const Soname = "libMIOpen.so.1"

// The environment MIOpen reads that Open sets.
const (
	EnvUserDBPath    = "MIOPEN_USER_DB_PATH"
	EnvDisableFindDB = "MIOPEN_DEBUG_DISABLE_FIND_DB"
	EnvROCmPath      = "ROCM_PATH"
)

// Search finds libMIOpen.so.1 through the dynamic loader, then under
// $ROCM_PATH/lib, /opt/rocm/lib and every /opt/rocm-*/lib, newest first.
func Search() dl.SearchSpec {
	var dirs []string
	if root := os.Getenv(EnvROCmPath); root != "" {
		dirs = append(dirs, filepath.Join(root, "lib"))
	}
	dirs = append(dirs, "/opt/rocm/lib", "/opt/rocm-*/lib")
	return dl.SearchSpec{Name: LibraryName, Sonames: []string{Soname}, Dirs: dirs}
}

// Options configure the library before it loads.
type Options struct {
	// UserDBPath is exported as MIOPEN_USER_DB_PATH. Empty makes a new,
	// empty temporary directory, so that find starts from no records
	// (the condition of ROCm/rocm-libraries#12121); RemoveUserDB deletes it.
	UserDBPath string
	// KeepFindDB leaves the find-db on. By default Open sets
	// MIOPEN_DEBUG_DISABLE_FIND_DB=1 (unless the variable is already set),
	// so that every find benchmarks every solver, naive ones included,
	// instead of answering from the records an earlier find in the same
	// process wrote, and immediate mode always takes its heuristic
	// fallback.
	KeepFindDB bool
}

// api holds the address of every entry point the package calls.
type api struct {
	getVersion, getErrorString uintptr

	createWithStream, setStream, getStream, destroy uintptr

	createTensor, set4dTensor, destroyTensor      uintptr
	createConv, initConv, destroyConv, outputDims uintptr

	fwdWorkspace, findFwd, convFwd uintptr

	solutionCount, getSolution, solutionWorkspace, compileSolution, fwdImmediate uintptr

	scaleTensor uintptr
}

func (a *api) symbols() []dl.Symbol {
	return []dl.Symbol{
		{Name: "miopenGetVersion", Addr: &a.getVersion},
		{Name: "miopenGetErrorString", Addr: &a.getErrorString},

		{Name: "miopenCreateWithStream", Addr: &a.createWithStream},
		{Name: "miopenSetStream", Addr: &a.setStream},
		{Name: "miopenGetStream", Addr: &a.getStream},
		{Name: "miopenDestroy", Addr: &a.destroy},

		{Name: "miopenCreateTensorDescriptor", Addr: &a.createTensor},
		{Name: "miopenSet4dTensorDescriptor", Addr: &a.set4dTensor},
		{Name: "miopenDestroyTensorDescriptor", Addr: &a.destroyTensor},
		{Name: "miopenCreateConvolutionDescriptor", Addr: &a.createConv},
		{Name: "miopenInitConvolutionDescriptor", Addr: &a.initConv},
		{Name: "miopenDestroyConvolutionDescriptor", Addr: &a.destroyConv},
		{Name: "miopenGetConvolutionForwardOutputDim", Addr: &a.outputDims},

		{Name: "miopenConvolutionForwardGetWorkSpaceSize", Addr: &a.fwdWorkspace},
		{Name: "miopenFindConvolutionForwardAlgorithm", Addr: &a.findFwd},
		{Name: "miopenConvolutionForward", Addr: &a.convFwd},

		{Name: "miopenConvolutionForwardGetSolutionCount", Addr: &a.solutionCount},
		{Name: "miopenConvolutionForwardGetSolution", Addr: &a.getSolution},
		{Name: "miopenConvolutionForwardGetSolutionWorkspaceSize", Addr: &a.solutionWorkspace},
		{Name: "miopenConvolutionForwardCompileSolution", Addr: &a.compileSolution},
		{Name: "miopenConvolutionForwardImmediate", Addr: &a.fwdImmediate},

		{Name: "miopenScaleTensor", Addr: &a.scaleTensor},
	}
}

// Library is libMIOpen loaded and bound.
type Library struct {
	api       api
	core      dnnlib.Core[Status]
	userDB    string
	createdDB bool
	env       []string // NAME=value pairs Open set
}

// Version is MIOpen's version, e.g. 3.5.1.
type Version = dnnlib.Version

// OpenError is a failed Open with the record of every path tried.
type OpenError = dnnlib.OpenError

// Open sets the environment opts asks for, then loads the first library
// spec finds and binds its symbols. A missing library is a
// *dl.NotFoundError and a missing symbol a *dl.MissingSymbolError,
// each inside an *OpenError with the search record.
func Open(spec dl.SearchSpec, opts Options) (*Library, error) {
	l := &Library{userDB: opts.UserDBPath}
	if l.userDB == "" {
		dir, err := os.MkdirTemp("", "miotool-miopen-userdb-")
		if err != nil {
			return nil, fmt.Errorf("creating an empty MIOpen user find-db folder: %w", err)
		}
		l.userDB, l.createdDB = dir, true
	}
	if err := l.setenv(EnvUserDBPath, l.userDB); err != nil {
		return nil, err
	}
	if _, set := os.LookupEnv(EnvDisableFindDB); !set && !opts.KeepFindDB {
		if err := l.setenv(EnvDisableFindDB, "1"); err != nil {
			return nil, err
		}
	}
	rec, err := dnnlib.Load(spec, l.api.symbols(), "MIOpen older than 2.0, without immediate mode?")
	if err != nil {
		_ = l.RemoveUserDB()
		return nil, err
	}
	l.core = dnnlib.NewCore[Status](LibraryName, rec, l.errorString)
	var major, minor, patch uint64
	if dl.Call(l.api.getVersion, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor)), uintptr(unsafe.Pointer(&patch))) == 0 {
		l.core.SetVersion(Version{Major: int(major), Minor: int(minor), Patch: int(patch)})
	}
	return l, nil
}

func (l *Library) setenv(name, value string) error {
	if err := os.Setenv(name, value); err != nil {
		return fmt.Errorf("setting %s=%s: %w", name, value, err)
	}
	l.env = append(l.env, name+"="+value)
	return nil
}

var defaultLib = dnnlib.NewOnce(LibraryName, func() (*Library, error) { return Open(Search(), Options{}) })

// Default loads the library Search finds, once per process, with a fresh
// empty user find-db and the find-db off (see Options).
func Default() (*Library, error) { return defaultLib.Get() }

// Locate is the search record of Default's library, for reports.
func Locate() hip.Library { return defaultLib.Locate() }

// Info is where the library loaded from and its version.
func (l *Library) Info() hip.Library { return l.core.Info() }

// Version is the library's version.
func (l *Library) Version() Version { return l.core.Version() }

// UserDBPath is the MIOPEN_USER_DB_PATH the library was loaded with.
func (l *Library) UserDBPath() string { return l.userDB }

// Environment lists the variables Open set, as NAME=value.
func (l *Library) Environment() []string { return append([]string(nil), l.env...) }

// RemoveUserDB deletes the user find-db folder if Open created it; a
// folder the caller named is left alone.
func (l *Library) RemoveUserDB() error {
	if !l.createdDB {
		return nil
	}
	l.createdDB = false
	return os.RemoveAll(l.userDB)
}

// String names the library for reports: "libMIOpen 3.5.1 (/opt/rocm/lib/...)".
func (l *Library) String() string { return l.core.String() }
