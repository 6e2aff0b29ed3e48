package targettest

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"miotool/internal/conv"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/hip/sim"
)

// FakeLib is a library target written in Go over the simulated device, for
// the scenarios' orchestration tests: its forward launches miotool's own
// convolution kernels on the session's stream, so captures follow the
// simulator's real rule tables. With Poll set, every forward first queries
// another stream, as MIOpen's lazy reclaim of an abandoned find stream does
// (#12121).
type FakeLib struct {
	dev hip.Device
	mod hip.Module
	// Poll, when set, is queried at the start of every forward of a
	// session that ran find: the stream its find abandoned.
	Poll hip.Stream
	// Block, when set, holds every forward until it is closed; forwards
	// then fail.
	Block chan struct{}
	// WrongSession is the session (1-based, in creation order) whose
	// scale is slightly off, so its thread ends with a wrong sum.
	WrongSession int32
	// Binds counts the threads bound, Sessions the sessions made, Open
	// those not closed yet; Closed says the library was closed.
	Binds    atomic.Int32
	Sessions atomic.Int32
	Open     atomic.Int32
	Closed   atomic.Bool
}

// NewFakeLib loads miotool's convolution kernels on dev for a FakeLib.
func NewFakeLib(t *testing.T, dev hip.Device) *FakeLib {
	t.Helper()
	mod, err := dev.ModuleLoad(conv.Source())
	if err != nil {
		t.Fatal(err)
	}
	return &FakeLib{dev: dev, mod: mod}
}

// SimDevice opens a simulated device in dialect d with 4 hardware queues
// and closes it when the test ends.
func SimDevice(t *testing.T, d hip.Dialect) hip.Device {
	t.Helper()
	dev, err := sim.New(hip.OpenOptions{Dialect: d, HWQueues: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	return dev
}

// Opener opens lib (or fails with err) for every target.
func Opener(lib target.Target, err error) target.Opener {
	return func(hip.Device, target.Name) (target.Target, error) {
		if err != nil {
			return nil, err
		}
		return lib, nil
	}
}

// Describe names the fake.
func (l *FakeLib) Describe() string { return "fakedeep 1.0 (in-process)" }

// Notes are one fake note.
func (l *FakeLib) Notes() []string { return []string{"fake note"} }

// BindThread counts the binding.
func (l *FakeLib) BindThread() error { l.Binds.Add(1); return nil }

// Close records that the library was closed.
func (l *FakeLib) Close() error { l.Closed.Store(true); return nil }

// NewSession makes a session on s.
func (l *FakeLib) NewSession(s hip.Stream) (target.Session, error) {
	l.Open.Add(1)
	return &fakeSession{lib: l, s: s, id: l.Sessions.Add(1)}, nil
}

type fakeSession struct {
	lib   *FakeLib
	s     hip.Stream
	id    int32
	found bool
}

func (s *fakeSession) FindWorkspace(conv.Problem) (int64, error) { return 0, nil }

// Find runs every applicable solver into b.Y and ranks them by a made-up
// time; inapplicable ones are listed as unable to run.
func (s *fakeSession) Find(p conv.Problem, b target.Buffers) ([]target.Algo, error) {
	s.found = true
	var out []target.Algo
	for i, sol := range conv.Solvers() {
		a := target.Algo{Name: sol.Name, ID: int64(i), TimeMs: float64(i+1) / 10, OK: sol.IsApplicable(p)}
		if !a.OK {
			a.Note, a.TimeMs = "not applicable", -1
			out = append(out, a)
			continue
		}
		if err := s.launch(p, a, b); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, s.lib.dev.StreamSynchronize(s.s)
}

func (s *fakeSession) Choose(p conv.Problem) (target.Algo, error) {
	for i, sol := range conv.Solvers() {
		if !sol.IsNaive() && sol.IsApplicable(p) {
			return target.Algo{Name: sol.Name, ID: int64(i), TimeMs: -1, OK: true}, nil
		}
	}
	return target.Algo{}, errors.New("no solver")
}

func (s *fakeSession) Workspace(conv.Problem, target.Algo) (int64, error) { return 0, nil }

func (s *fakeSession) Forward(p conv.Problem, a target.Algo, b target.Buffers) error {
	if s.lib.Block != nil {
		<-s.lib.Block
		return errors.New("released")
	}
	if s.lib.Poll != 0 && s.found {
		_ = s.lib.dev.StreamQuery(s.lib.Poll) // the lazy reclaim ignores what it is told
	}
	return s.launch(p, a, b)
}

func (s *fakeSession) launch(p conv.Problem, a target.Algo, b target.Buffers) error {
	sol := conv.Solvers()[a.ID]
	for _, l := range sol.Plan(p, conv.Buffers{X: b.X, W: b.W, Y: b.Y}) {
		f, err := s.lib.dev.ModuleGetFunction(s.lib.mod, l.Kernel)
		if err != nil {
			return err
		}
		if err := s.lib.dev.LaunchKernel(f, l.Grid, l.Block, l.SharedMem, s.s, l.Args...); err != nil {
			return fmt.Errorf("fakedeep forward: %w", err)
		}
	}
	return nil
}

// Scale is a host round trip: fine outside a capture, which is all the
// stress scenario needs.
func (s *fakeSession) Scale(p conv.Problem, y hip.DevPtr, alpha float32) error {
	dev := s.lib.dev
	if s.id == s.lib.WrongSession {
		alpha *= 1.0001
	}
	if err := dev.StreamSynchronize(s.s); err != nil {
		return err
	}
	v, err := target.ReadFloats(dev, y, p.OutputElements())
	if err != nil {
		return err
	}
	for i := range v {
		v[i] *= alpha
	}
	return dev.MemcpyHtoD(y, conv.Float32Bytes(v))
}

func (s *fakeSession) Close() error { s.lib.Open.Add(-1); return nil }
