// Package dnntest holds what the tests of miotool's DNN library bindings
// share: the builder of their C stand-ins (each includes dnnstandin.h, the
// header of their common bookkeeping) with the controls that header
// exports, and the checks the packages make alike. Only tests import it.
package dnntest

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip/gpulib/gputest"
)

// StandIn is one DNN library's C stand-in, built with gcc once per test
// binary into a temporary folder under the library's soname. Beside the
// library's own symbols every stand-in exports dnnstandin.h's controls:
// its call log, a failure injected into the next call of a function, and
// computing on host memory on or off; StandIn binds them, with the
// stand-in's own controls, from the very file the binding opens.
type StandIn struct {
	// FirstLoad, when set, runs once after the build, before anything else
	// loads the stand-in (binding the controls does): a library that reads
	// the environment when it loads is opened here by the code under test.
	FirstLoad func(*StandIn) error

	build    gputest.StandIns
	controls []dl.Symbol

	once sync.Once
	err  error
	ctl  struct{ log, logReset, failNext, setCompute uintptr }
}

// NewStandIn is the stand-in built from source, relative to the package
// folder (testdata/mockcudnn.c), as soname; controls are its own
// functions beyond dnnstandin.h's.
func NewStandIn(source, soname string, controls ...dl.Symbol) *StandIn {
	return &StandIn{
		build:    gputest.StandIns{Libs: []gputest.StandIn{{Source: source, Path: soname}}},
		controls: controls,
	}
}

// Require builds the stand-in on first use, runs FirstLoad and binds the
// controls. It skips t where there is no C compiler and fails it where the
// build, FirstLoad or the binding fails.
func (s *StandIn) Require(t testing.TB) {
	t.Helper()
	s.build.Require(t)
	s.once.Do(s.load)
	if s.err != nil {
		t.Fatalf("stand-in %s: %v", filepath.Base(s.Path()), s.err)
	}
}

func (s *StandIn) load() {
	if s.FirstLoad != nil {
		if s.err = s.FirstLoad(s); s.err != nil {
			return
		}
	}
	h, err := dl.OpenPath(s.Path(), dl.DlopenMode)
	if err != nil {
		s.err = err
		return
	}
	shared := []dl.Symbol{
		{Name: "mock_log", Addr: &s.ctl.log},
		{Name: "mock_log_reset", Addr: &s.ctl.logReset},
		{Name: "mock_fail_next", Addr: &s.ctl.failNext},
		{Name: "mock_set_compute", Addr: &s.ctl.setCompute},
	}
	s.err = dl.Bind(dl.Lookup(h), "stand-in "+filepath.Base(s.Path()), append(shared, s.controls...))
}

// Path is the built library.
func (s *StandIn) Path() string { return s.build.Path(0) }

// Spec finds the stand-in, and only it, under the report label name.
func (s *StandIn) Spec(name string) dl.SearchSpec { return s.build.Spec(0, name) }

// Remove deletes the build folder; TestMain calls it.
func (s *StandIn) Remove() { s.build.Remove() }

// Log is every call logged since the last ResetLog, one line a call.
func (s *StandIn) Log() string {
	buf := make([]byte, 1<<18)
	n := dl.Call(s.ctl.log, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	return string(buf[:n])
}

// Lines are the lines of the log that record a call of the C function
// call.
func (s *StandIn) Lines(call string) []string {
	var out []string
	for _, l := range strings.Split(s.Log(), "\n") {
		if strings.HasPrefix(l, call+" ") {
			out = append(out, l)
		}
	}
	return out
}

// WantLogged fails t for each of lines that the log lacks.
func (s *StandIn) WantLogged(t testing.TB, lines ...string) {
	t.Helper()
	log := s.Log()
	for _, l := range lines {
		if !strings.Contains(log, l) {
			t.Errorf("log lacks %q:\n%s", l, log)
		}
	}
}

// ResetLog empties the log.
func (s *StandIn) ResetLog() { dl.Call(s.ctl.logReset) }

// FailNext makes the next call of the C function call return status.
func (s *StandIn) FailNext(call string, status int32) {
	name := dl.CString(call)
	dl.Call(s.ctl.failNext, uintptr(unsafe.Pointer(&name[0])), uintptr(status))
}

// SetCompute turns the host computation of convolutions and scaling on or
// off; off, the stand-in leaves the data alone, for addresses that are not
// host memory.
func (s *StandIn) SetCompute(on bool) {
	v := uintptr(0)
	if on {
		v = 1
	}
	dl.Call(s.ctl.setCompute, v)
}
