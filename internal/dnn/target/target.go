// Package target is one interface over the vendor DNN libraries a scenario
// can run against instead of miotool's own mechanisms (MIOpen through
// libMIOpen on the hip backend, cuDNN through libcudnn on the cuda
// backend), the way internal/hip is one interface over the runtimes.
package target

import (
	"errors"
	"fmt"
	"strings"

	"miotool/internal/conv"
	"miotool/internal/dnn/cudnn"
	"miotool/internal/dnn/miopen"
	"miotool/internal/hip"
)

// Name names what a scenario runs against.
type Name string

// Names of the targets.
const (
	// Builtin is miotool's own mechanisms: no library.
	Builtin Name = "builtin"
	// MIOpen is AMD's libMIOpen on the hip backend.
	MIOpen Name = "miopen"
	// CUDNN is NVIDIA's libcudnn on the cuda backend.
	CUDNN Name = "cudnn"
)

// Names lists every target.
var Names = []Name{Builtin, MIOpen, CUDNN}

// ParseName accepts builtin, miopen and cudnn.
func ParseName(s string) (Name, error) {
	for _, t := range Names {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("unknown target %q (want builtin, miopen or cudnn)", s)
}

// Backend is the backend a library target runs on ("" for builtin, which
// runs on every backend).
func (n Name) Backend() hip.BackendName {
	switch n {
	case MIOpen:
		return hip.BackendHIP
	case CUDNN:
		return hip.BackendCUDA
	}
	return ""
}

// UnavailableError says why a library target cannot run here: its library
// is missing or unusable, or the device is on another backend (NeedsBackend
// is then the one it runs on). It unwraps to a *hip.UnavailableError, so
// the commands report it as SKIP (exit 4) like a missing backend.
type UnavailableError struct {
	Target       Name
	Reason       string
	NeedsBackend hip.BackendName
	Libraries    []hip.Library
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("target %s unavailable: %s", e.Target, e.Reason)
}

func (e *UnavailableError) Unwrap() error {
	return &hip.UnavailableError{Backend: string(e.Target), Reason: e.Reason, Libraries: e.Libraries}
}

// Available loads the library of t and says why it cannot be used: nil for
// builtin and for a library that loaded. A library that is missing, lacks a
// symbol or has the wrong major version gives an *UnavailableError listing
// every path tried. Loading MIOpen sets MIOPEN_USER_DB_PATH to a fresh
// temporary folder first (see Cleanup).
func Available(t Name) error {
	var loadErr error
	var rec hip.Library
	switch t {
	case Builtin:
		return nil
	case MIOpen:
		_, loadErr = miopen.Default()
		var oe *miopen.OpenError
		if errors.As(loadErr, &oe) {
			rec = oe.Library
		}
	case CUDNN:
		_, loadErr = cudnn.Default()
		var oe *cudnn.OpenError
		if errors.As(loadErr, &oe) {
			rec = oe.Library
		}
	default:
		_, err := ParseName(string(t))
		return err
	}
	if loadErr == nil {
		return nil
	}
	u := &UnavailableError{Target: t, Reason: loadErr.Error()}
	if rec.Name != "" {
		u.Libraries = []hip.Library{rec}
	}
	return u
}

// Supports says whether dev's backend can run t: MIOpen needs the hip
// backend and cuDNN the cuda backend (the simulator runs neither); builtin
// runs everywhere. A mismatch is an *UnavailableError with NeedsBackend set.
func Supports(t Name, dev hip.Device) error {
	if _, err := ParseName(string(t)); err != nil {
		return err
	}
	want := t.Backend()
	if want == "" {
		return nil
	}
	if got := dev.Props().Backend; got != string(want) {
		return &UnavailableError{Target: t, NeedsBackend: want,
			Reason: fmt.Sprintf("it runs on the %s backend, and the device is %s", want, dev.Props())}
	}
	return nil
}

// Libraries is where each library target's library was found and its
// version, or every path tried, for doctor. It loads the libraries, and
// removes again the temporary user find-db folder loading MIOpen makes.
func Libraries() []hip.Library {
	libs := []hip.Library{miopen.Locate(), cudnn.Locate()}
	_ = Cleanup() // a left temporary folder is not worth failing for
	return libs
}

// LibraryNames are the names Libraries reports, by target.
var LibraryNames = map[Name]string{MIOpen: miopen.LibraryName, CUDNN: cudnn.LibraryName}

// Cleanup removes the temporary MIOpen user find-db folder made when the
// library was loaded. Call it when the process is done with MIOpen.
func Cleanup() error {
	l, err := miopen.Default()
	if err != nil {
		return nil
	}
	return l.RemoveUserDB()
}

// Algo is one way a library offered to compute a convolution.
type Algo struct {
	// Name is the library's name for it: a cuDNN algorithm
	// (IMPLICIT_PRECOMP_GEMM), an MIOpen algorithm
	// (miopenConvolutionFwdAlgoDirect) or immediate-mode solution.
	Name string
	// ID is the algorithm's enum value or, for Immediate, the solver id.
	ID        int64
	Immediate bool
	// TimeMs is find's measured time; heuristic answers report their own
	// (cuDNN -1, MIOpen a synthetic ranking time).
	TimeMs         float64
	WorkspaceBytes int64
	// OK is false for an entry find reported as unable to run.
	OK   bool
	Note string // status, determinism, math type
}

func (a Algo) String() string {
	if a.Name == "" {
		return "-"
	}
	return a.Name
}

// Buffers are the device memory of one convolution.
type Buffers struct {
	X, W, Y        hip.DevPtr
	Workspace      hip.DevPtr
	WorkspaceBytes int64
}

// Target is a vendor library as the scenarios drive it.
type Target interface {
	// Describe names the library, e.g. "libcudnn 9.14.0 (/usr/lib/...)".
	Describe() string
	// Notes are settings worth printing with the result.
	Notes() []string
	// BindThread makes the device current on the calling OS thread, which
	// its goroutine has locked.
	BindThread() error
	// NewSession makes a library handle whose work goes to s.
	NewSession(s hip.Stream) (Session, error)
	Close() error
}

// Session is one library handle; it is used from one OS thread.
type Session interface {
	// FindWorkspace is the workspace find needs for p (0 when the library
	// allocates its own).
	FindWorkspace(p conv.Problem) (int64, error)
	// Find benchmarks p's algorithms and returns them best first; it may
	// write b.Y.
	Find(p conv.Problem, b Buffers) ([]Algo, error)
	// Choose picks an algorithm without benchmarking.
	Choose(p conv.Problem) (Algo, error)
	// Workspace is what a needs for p.
	Workspace(p conv.Problem, a Algo) (int64, error)
	// Forward enqueues b.Y = conv(b.X, b.W) with a.
	Forward(p conv.Problem, a Algo, b Buffers) error
	// Scale enqueues y *= alpha for p's output.
	Scale(p conv.Problem, y hip.DevPtr, alpha float32) error
	Close() error
}

// Opener opens the library of a target for a device; Open is the real one,
// and tests put a stand-in in the scenarios' options.
type Opener func(dev hip.Device, t Name) (Target, error)

// Open calls o, or Open when o is nil.
func (o Opener) Open(dev hip.Device, t Name) (Target, error) {
	if o == nil {
		return Open(dev, t)
	}
	return o(dev, t)
}

// Open opens the library of t for dev: the library must load (Available)
// and dev's backend run it (Supports), else the error is an
// *UnavailableError.
func Open(dev hip.Device, t Name) (Target, error) {
	if err := Available(t); err != nil {
		return nil, err
	}
	if err := Supports(t, dev); err != nil {
		return nil, err
	}
	switch t {
	case CUDNN:
		l, _ := cudnn.Default()
		return NewCUDNN(l, dev)
	case MIOpen:
		l, _ := miopen.Default()
		return NewMIOpen(l, dev)
	}
	return nil, fmt.Errorf("target %s is not a library target", t)
}

// CheckProblem refuses what the library bindings do not describe.
func CheckProblem(p conv.Problem) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Groups != 1 {
		return fmt.Errorf("the library targets run group_count 1 only, got %d", p.Groups)
	}
	return nil
}

// keepFirst collects the first error of a sequence of cleanups.
type keepFirst struct{ err error }

func (k *keepFirst) add(err error) {
	if err != nil && k.err == nil {
		k.err = err
	}
}

// AlgoList is a compact rendering of a ranking, e.g.
// "IMPLICIT_PRECOMP_GEMM 0.031 ms, GEMM 0.044 ms, FFT (not supported)".
func AlgoList(as []Algo) string {
	parts := make([]string, 0, len(as))
	for _, a := range as {
		switch {
		case !a.OK:
			parts = append(parts, fmt.Sprintf("%s (%s)", a.Name, a.Note))
		case a.TimeMs >= 0:
			parts = append(parts, fmt.Sprintf("%s %.3g ms", a.Name, a.TimeMs))
		default:
			parts = append(parts, a.Name)
		}
	}
	return strings.Join(parts, ", ")
}

// ReadFloats copies n floats from device memory at p.
func ReadFloats(dev hip.Device, p hip.DevPtr, n int) ([]float32, error) {
	buf := make([]byte, 4*n)
	if err := dev.MemcpyDtoH(buf, p); err != nil {
		return nil, err
	}
	return conv.BytesFloat32(buf)
}

// NotesFor are the settings t runs with on dev (cuDNN's math type, the
// MIOpen environment), for a result's notes; none when the library cannot
// be opened for dev. open is target.Open when nil.
func NotesFor(open Opener, dev hip.Device, t Name) []string {
	lib, err := open.Open(dev, t)
	if err != nil {
		return nil
	}
	defer lib.Close()
	return lib.Notes()
}
