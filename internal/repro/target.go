package repro

// Library targets: the capture and stress scenarios run against a vendor
// library (MIOpen through libMIOpen, cuDNN through libcudnn) instead of
// miotool's own find, tracker and caches. The reclaim-policy axis does not
// apply there: the library does what it does, and a case passes when the
// library behaves correctly.

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"miotool/internal/conv"
	"miotool/internal/dnn/cudnn"
	"miotool/internal/dnn/miopen"
	"miotool/internal/hip"
	"miotool/internal/streams"
)

// Target names what a scenario runs against.
type Target string

// Targets.
const (
	// TargetBuiltin is miotool's own mechanisms (RunCapture, RunReplay).
	TargetBuiltin Target = "builtin"
	// TargetMIOpen is AMD's libMIOpen on the hip backend.
	TargetMIOpen Target = "miopen"
	// TargetCUDNN is NVIDIA's libcudnn on the cuda backend.
	TargetCUDNN Target = "cudnn"
)

// Targets lists every target.
var Targets = []Target{TargetBuiltin, TargetMIOpen, TargetCUDNN}

// ParseTarget accepts builtin, miopen and cudnn.
func ParseTarget(s string) (Target, error) {
	for _, t := range Targets {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("unknown target %q (want builtin, miopen or cudnn)", s)
}

// PolicyLibrary is the Policy of a library target's cases.
const PolicyLibrary streams.Policy = "library"

// backendOf is the backend a library target runs on.
func backendOf(t Target) string {
	switch t {
	case TargetMIOpen:
		return "hip"
	case TargetCUDNN:
		return "cuda"
	}
	return ""
}

// TargetUnavailableError says why a library target cannot run here: its
// library is missing or unusable, or the device is on another backend. It
// unwraps to a *hip.UnavailableError, so the commands report it as SKIP
// (exit 4) like a missing backend.
type TargetUnavailableError struct {
	Target    Target
	Reason    string
	Libraries []hip.Library
}

func (e *TargetUnavailableError) Error() string {
	return fmt.Sprintf("target %s unavailable: %s", e.Target, e.Reason)
}

func (e *TargetUnavailableError) Unwrap() error {
	return &hip.UnavailableError{Backend: string(e.Target), Reason: e.Reason, Libraries: e.Libraries}
}

// TargetAvailable loads the library of target and says why it cannot be
// used: nil for builtin and for a library that loaded. A library that is
// missing, lacks a symbol or has the wrong major version gives a
// *TargetUnavailableError listing every path tried; an unknown name a plain
// error. Loading MIOpen sets MIOPEN_USER_DB_PATH to a fresh temporary
// folder first (see TargetCleanup).
func TargetAvailable(target string) error {
	t, err := ParseTarget(target)
	if err != nil {
		return err
	}
	var loadErr error
	var rec hip.Library
	switch t {
	case TargetBuiltin:
		return nil
	case TargetMIOpen:
		_, loadErr = miopen.Default()
		var oe *miopen.OpenError
		if errors.As(loadErr, &oe) {
			rec = oe.Library
		}
	case TargetCUDNN:
		_, loadErr = cudnn.Default()
		var oe *cudnn.OpenError
		if errors.As(loadErr, &oe) {
			rec = oe.Library
		}
	}
	if loadErr == nil {
		return nil
	}
	u := &TargetUnavailableError{Target: t, Reason: loadErr.Error()}
	if rec.Name != "" {
		u.Libraries = []hip.Library{rec}
	}
	return u
}

// TargetSupports says whether dev's backend can run target: MIOpen needs
// the hip backend and cuDNN the cuda backend (the simulator runs neither);
// builtin runs everywhere. A mismatch is a *TargetUnavailableError.
func TargetSupports(target string, dev hip.Device) error {
	t, err := ParseTarget(target)
	if err != nil {
		return err
	}
	want := backendOf(t)
	if want == "" {
		return nil
	}
	if got := dev.Props().Backend; got != want {
		return &TargetUnavailableError{Target: t,
			Reason: fmt.Sprintf("it runs on the %s backend, and the device is %s (run with --backend %s)", want, dev.Props(), want)}
	}
	return nil
}

// TargetLibraries is where each library target's library was found and its
// version, or every path tried, for doctor. It loads the libraries.
func TargetLibraries() []hip.Library {
	return []hip.Library{miopen.Locate(), cudnn.Locate()}
}

// TargetCleanup removes the temporary MIOpen user find-db folder made when
// the library was loaded. Call it when the process is done with MIOpen.
func TargetCleanup() error {
	l, err := miopen.Default()
	if err != nil {
		return nil
	}
	return l.RemoveUserDB()
}

// TargetAlgo is one way a library offered to compute a convolution.
type TargetAlgo struct {
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

func (a TargetAlgo) String() string {
	if a.Name == "" {
		return "-"
	}
	return a.Name
}

// targetBuffers are the device memory of one convolution.
type targetBuffers struct {
	X, W, Y        hip.DevPtr
	Workspace      hip.DevPtr
	WorkspaceBytes int64
}

// targetLib is a vendor library as the target scenarios drive it.
type targetLib interface {
	// describe names the library, e.g. "libcudnn 9.14.0 (/usr/lib/...)".
	describe() string
	// notes are settings worth printing with the result.
	notes() []string
	// bindThread makes the device current on the calling OS thread, which
	// its goroutine has locked.
	bindThread() error
	// newSession makes a library handle whose work goes to s.
	newSession(s hip.Stream) (targetSession, error)
	close() error
}

// targetSession is one library handle; it is used from one OS thread.
type targetSession interface {
	// findWorkspace is the workspace find needs for p (0 when the library
	// allocates its own).
	findWorkspace(p conv.Problem) (int64, error)
	// find benchmarks p's algorithms and returns them best first; it may
	// write b.Y.
	find(p conv.Problem, b targetBuffers) ([]TargetAlgo, error)
	// choose picks an algorithm without benchmarking.
	choose(p conv.Problem) (TargetAlgo, error)
	// workspace is what a needs for p.
	workspace(p conv.Problem, a TargetAlgo) (int64, error)
	// forward enqueues b.Y = conv(b.X, b.W) with a.
	forward(p conv.Problem, a TargetAlgo, b targetBuffers) error
	// scale enqueues y *= alpha for p's output.
	scale(p conv.Problem, y hip.DevPtr, alpha float32) error
	close() error
}

// openTargetLib opens the library of t for dev; tests replace it.
var openTargetLib = func(t Target, dev hip.Device) (targetLib, error) {
	if err := TargetAvailable(string(t)); err != nil {
		return nil, err
	}
	if err := TargetSupports(string(t), dev); err != nil {
		return nil, err
	}
	switch t {
	case TargetCUDNN:
		l, _ := cudnn.Default()
		return newCUDNNTarget(l, dev)
	case TargetMIOpen:
		l, _ := miopen.Default()
		return newMIOpenTarget(l, dev)
	}
	return nil, fmt.Errorf("target %s is not a library target", t)
}

// checkTargetProblem refuses what the library bindings do not describe.
func checkTargetProblem(p conv.Problem) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Groups != 1 {
		return fmt.Errorf("the library targets run group_count 1 only, got %d", p.Groups)
	}
	return nil
}

// osThread runs functions in order on one goroutine locked to its OS
// thread, with the device bound there: capture modes, "the thread that
// began a capture" and the current device are per OS thread.
type osThread struct {
	jobs chan func()
}

func startOSThread(bind func() error) (*osThread, error) {
	t := &osThread{jobs: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := bind(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for job := range t.jobs {
			job()
		}
	}()
	if err := <-ready; err != nil {
		return nil, fmt.Errorf("binding the device to a thread: %w", err)
	}
	return t, nil
}

// start queues fn and returns where its error will arrive.
func (t *osThread) start(fn func() error) <-chan error {
	errc := make(chan error, 1)
	t.jobs <- func() { errc <- fn() }
	return errc
}

// run runs fn on the thread and waits for it.
func (t *osThread) run(fn func() error) error { return <-t.start(fn) }

// stop ends the thread once its queued work is done.
func (t *osThread) stop() { close(t.jobs) }

// keepFirst collects the first error of a sequence of cleanups.
type keepFirst struct{ err error }

func (k *keepFirst) add(err error) {
	if err != nil && k.err == nil {
		k.err = err
	}
}

// algoList is a compact rendering of a ranking, e.g.
// "IMPLICIT_PRECOMP_GEMM 0.031 ms, GEMM 0.044 ms, FFT (not supported)".
func algoList(as []TargetAlgo) string {
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
