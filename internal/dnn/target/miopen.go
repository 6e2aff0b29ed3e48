package target

import (
	"errors"
	"fmt"
	"strings"

	"miotool/internal/conv"
	"miotool/internal/dnn/miopen"
	"miotool/internal/hip"
)

// miopenTarget drives libMIOpen on miotool's HIP backend: the device is
// selected on every thread that calls MIOpen, and streams and buffers come
// from the hip.Device.
type miopenTarget struct {
	lib *miopen.Library
	sel *miopen.DeviceSelector
}

// NewMIOpen drives l, loaded already, on dev (the hip backend).
func NewMIOpen(l *miopen.Library, dev hip.Device) (Target, error) {
	sel, err := miopen.OpenDeviceSelector(miopen.RuntimePath(dev), dev.Props().Ordinal)
	if err != nil {
		return nil, fmt.Errorf("miopen target: %w", err)
	}
	return &miopenTarget{lib: l, sel: sel}, nil
}

func (t *miopenTarget) Describe() string { return t.lib.String() }

func (t *miopenTarget) Notes() []string {
	return []string{"MIOpen loaded with " + strings.Join(t.lib.Environment(), " ") +
		": find starts from an empty user find-db and benchmarks every solver, naive ones included, in every case"}
}

func (t *miopenTarget) BindThread() error { return t.sel.Select() }

func (t *miopenTarget) Close() error { return nil }

func (t *miopenTarget) NewSession(s hip.Stream) (Session, error) {
	h, err := t.lib.NewHandle(s)
	if err != nil {
		return nil, err
	}
	return &miopenSession{lib: t.lib, h: h}, nil
}

// miopenSession is one MIOpen handle with descriptors that follow the
// problem of the latest call.
type miopenSession struct {
	lib   *miopen.Library
	h     *miopen.Handle
	p     miopen.Problem
	shape conv.Problem
}

func (s *miopenSession) describe(p conv.Problem) (err error) {
	if s.p.Conv != nil && s.shape == p {
		return nil
	}
	if err := CheckProblem(p); err != nil {
		return err
	}
	// After a failure no descriptor is kept: the next call starts over.
	defer func() {
		if err != nil {
			_ = s.destroyDescs()
		}
	}()
	geometry := func(q conv.Problem) miopen.Conv2d {
		return miopen.Conv2d{PadH: q.PadH, PadW: q.PadW, StrideH: q.StrideH, StrideW: q.StrideW, DilH: q.DilH, DilW: q.DilW}
	}
	if s.p.Conv == nil {
		if s.p.X, err = s.lib.NewTensorDesc(p.N, p.C, p.H, p.W); err != nil {
			return err
		}
		if s.p.W, err = s.lib.NewTensorDesc(p.K, p.C, p.R, p.S); err != nil {
			return err
		}
		if s.p.Y, err = s.lib.NewTensorDesc(p.N, p.K, p.OutH(), p.OutW()); err != nil {
			return err
		}
		if s.p.Conv, err = s.lib.NewConvDesc(geometry(p)); err != nil {
			return err
		}
		s.shape = p
		return nil
	}
	if geometry(p) != geometry(s.shape) {
		if err := s.p.Conv.Destroy(); err != nil {
			return err
		}
		if s.p.Conv, err = s.lib.NewConvDesc(geometry(p)); err != nil {
			return err
		}
	}
	for _, set := range []struct {
		d          *miopen.TensorDesc
		n, c, h, w int
	}{{s.p.X, p.N, p.C, p.H, p.W}, {s.p.W, p.K, p.C, p.R, p.S}, {s.p.Y, p.N, p.K, p.OutH(), p.OutW()}} {
		if err := set.d.Set(set.n, set.c, set.h, set.w); err != nil {
			return err
		}
	}
	s.shape = p
	return nil
}

func miopenBuffers(b Buffers) miopen.Buffers {
	return miopen.Buffers{X: b.X, W: b.W, Y: b.Y, Workspace: b.Workspace, WorkspaceBytes: uint64(max(b.WorkspaceBytes, 0))}
}

func (s *miopenSession) FindWorkspace(p conv.Problem) (int64, error) {
	if err := s.describe(p); err != nil {
		return 0, err
	}
	n, err := s.h.ForwardWorkspace(s.p)
	return int64(n), err
}

// Find is Find 1.0 without tuning, as frameworks call it.
func (s *miopenSession) Find(p conv.Problem, b Buffers) ([]Algo, error) {
	if err := s.describe(p); err != nil {
		return nil, err
	}
	res, err := s.h.FindForward(s.p, miopenBuffers(b), false)
	if err != nil {
		return nil, err
	}
	out := make([]Algo, len(res))
	for i, r := range res {
		out[i] = Algo{Name: r.Algo.String(), ID: int64(r.Algo), TimeMs: float64(r.TimeMs), WorkspaceBytes: int64(r.Memory), OK: true}
	}
	return out, nil
}

// Choose asks immediate mode for its best solution: with the find-db off
// that is MIOpen's heuristic fallback (TunaNet, then WTI), the path whose
// model caches ROCM-27477 is about.
func (s *miopenSession) Choose(p conv.Problem) (Algo, error) {
	if err := s.describe(p); err != nil {
		return Algo{}, err
	}
	sols, err := s.h.Solutions(s.p, 4)
	if err != nil {
		return Algo{}, err
	}
	if len(sols) == 0 {
		return Algo{}, errors.New("miopenConvolutionForwardGetSolution offered no solution")
	}
	b := sols[0]
	return Algo{Name: fmt.Sprintf("solution %d (%s)", b.ID, strings.TrimPrefix(b.Algo.String(), "miopenConvolutionFwdAlgo")),
		ID: int64(b.ID), Immediate: true, TimeMs: float64(b.TimeMs), WorkspaceBytes: int64(b.Workspace), OK: true}, nil
}

func (s *miopenSession) Workspace(p conv.Problem, a Algo) (int64, error) {
	if err := s.describe(p); err != nil {
		return 0, err
	}
	if a.Immediate {
		n, err := s.h.SolutionWorkspace(s.p, uint64(a.ID))
		return int64(n), err
	}
	return a.WorkspaceBytes, nil
}

func (s *miopenSession) Forward(p conv.Problem, a Algo, b Buffers) error {
	if err := s.describe(p); err != nil {
		return err
	}
	if a.Immediate {
		return s.h.ForwardImmediate(s.p, miopenBuffers(b), uint64(a.ID))
	}
	return s.h.Forward(s.p, miopenBuffers(b), miopen.Algo(a.ID), 1, 0)
}

func (s *miopenSession) Scale(p conv.Problem, y hip.DevPtr, alpha float32) error {
	if err := s.describe(p); err != nil {
		return err
	}
	return s.h.ScaleTensor(s.p.Y, y, alpha)
}

func (s *miopenSession) destroyDescs() error {
	var k keepFirst
	k.add(s.p.X.Destroy())
	k.add(s.p.W.Destroy())
	k.add(s.p.Y.Destroy())
	k.add(s.p.Conv.Destroy())
	s.p = miopen.Problem{}
	return k.err
}

func (s *miopenSession) Close() error {
	var k keepFirst
	k.add(s.destroyDescs())
	k.add(s.h.Destroy())
	return k.err
}
