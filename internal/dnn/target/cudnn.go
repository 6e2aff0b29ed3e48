package target

import (
	"errors"
	"fmt"

	"miotool/internal/conv"
	"miotool/internal/dnn/cudnn"
	"miotool/internal/hip"
)

// cudnnMath is the math type of every target convolution: fp32 FMA
// kernels. cuDNN's default math lets fp32 convolutions use TF32 Tensor
// Cores on Ampere and newer (a 10-bit mantissa), which would fail the
// comparison with the fp32 CPU reference for reasons unrelated to what the
// scenarios test; frameworks turn TF32 off the same way.
const cudnnMath = cudnn.FMAMath

// cudnnTarget drives libcudnn on miotool's CUDA backend: the device's
// primary context is made current on every thread that calls cuDNN, and
// streams and buffers come from the hip.Device.
type cudnnTarget struct {
	lib *cudnn.Library
	ctx *cudnn.Context
}

// NewCUDNN drives l, loaded already, on dev (the cuda backend).
func NewCUDNN(l *cudnn.Library, dev hip.Device) (Target, error) {
	ctx, err := cudnn.OpenContext(cudnn.DriverPath(dev), dev.Props().Ordinal)
	if err != nil {
		return nil, fmt.Errorf("cudnn target: %w", err)
	}
	return &cudnnTarget{lib: l, ctx: ctx}, nil
}

func (t *cudnnTarget) Describe() string { return t.lib.String() }

func (t *cudnnTarget) Notes() []string {
	return []string{fmt.Sprintf("cuDNN math type %s: fp32 FMA kernels, no TF32, so results compare with the fp32 CPU reference", cudnnMath)}
}

func (t *cudnnTarget) BindThread() error { return t.ctx.MakeCurrent() }

func (t *cudnnTarget) Close() error { return t.ctx.Close() }

func (t *cudnnTarget) NewSession(s hip.Stream) (Session, error) {
	h, err := t.lib.NewHandle()
	if err != nil {
		return nil, err
	}
	ss := &cudnnSession{lib: t.lib, h: h}
	if err := h.SetStream(s); err != nil {
		_ = ss.Close()
		return nil, err
	}
	return ss, nil
}

// cudnnSession is one cuDNN handle with descriptors that follow the
// problem of the latest call.
type cudnnSession struct {
	lib   *cudnn.Library
	h     *cudnn.Handle
	x, y  *cudnn.TensorDesc
	w     *cudnn.FilterDesc
	conv  *cudnn.ConvDesc
	shape conv.Problem
}

// describe sets the descriptors to p unless they already describe it.
func (s *cudnnSession) describe(p conv.Problem) (err error) {
	if s.conv != nil && s.shape == p {
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
	if s.conv == nil {
		if s.x, err = s.lib.NewTensorDesc(p.N, p.C, p.H, p.W); err != nil {
			return err
		}
		if s.w, err = s.lib.NewFilterDesc(p.K, p.C, p.R, p.S); err != nil {
			return err
		}
		if s.y, err = s.lib.NewTensorDesc(p.N, p.K, p.OutH(), p.OutW()); err != nil {
			return err
		}
		if s.conv, err = s.lib.NewConvDesc(cudnn.Conv2d{PadH: p.PadH, PadW: p.PadW, StrideH: p.StrideH, StrideW: p.StrideW,
			DilH: p.DilH, DilW: p.DilW}, cudnn.CrossCorrelation, cudnnMath); err != nil {
			return err
		}
		s.shape = p
		return nil
	}
	g := func(q conv.Problem) [6]int { return [6]int{q.PadH, q.PadW, q.StrideH, q.StrideW, q.DilH, q.DilW} }
	if g(p) != g(s.shape) {
		if err := s.conv.Destroy(); err != nil {
			return err
		}
		if s.conv, err = s.lib.NewConvDesc(cudnn.Conv2d{PadH: p.PadH, PadW: p.PadW, StrideH: p.StrideH, StrideW: p.StrideW,
			DilH: p.DilH, DilW: p.DilW}, cudnn.CrossCorrelation, cudnnMath); err != nil {
			return err
		}
	}
	if err := s.x.Set(p.N, p.C, p.H, p.W); err != nil {
		return err
	}
	if err := s.w.Set(p.K, p.C, p.R, p.S); err != nil {
		return err
	}
	if err := s.y.Set(p.N, p.K, p.OutH(), p.OutW()); err != nil {
		return err
	}
	s.shape = p
	return nil
}

func cudnnAlgo(a cudnn.AlgoPerf) Algo {
	det := "non-deterministic"
	if a.Deterministic {
		det = "deterministic"
	}
	ta := Algo{Name: a.Algo.String(), ID: int64(a.Algo), TimeMs: float64(a.TimeMs), WorkspaceBytes: int64(a.Memory),
		OK: a.Status == cudnn.StatusSuccess, Note: det + ", " + a.MathType.String()}
	if !ta.OK {
		ta.Note = a.Status.String()
	}
	return ta
}

// FindWorkspace is 0: cudnnFindConvolutionForwardAlgorithm allocates its
// own buffers.
func (s *cudnnSession) FindWorkspace(conv.Problem) (int64, error) { return 0, nil }

func (s *cudnnSession) Find(p conv.Problem, _ Buffers) ([]Algo, error) {
	if err := s.describe(p); err != nil {
		return nil, err
	}
	res, err := s.h.FindForward(s.x, s.w, s.conv, s.y)
	if err != nil {
		return nil, err
	}
	out := make([]Algo, len(res))
	for i, r := range res {
		out[i] = cudnnAlgo(r)
	}
	return out, nil
}

func (s *cudnnSession) Choose(p conv.Problem) (Algo, error) {
	if err := s.describe(p); err != nil {
		return Algo{}, err
	}
	res, err := s.h.HeuristicForward(s.x, s.w, s.conv, s.y)
	if err != nil {
		return Algo{}, err
	}
	for _, r := range res {
		if r.Status == cudnn.StatusSuccess {
			return cudnnAlgo(r), nil
		}
	}
	return Algo{}, errors.New("cudnnGetConvolutionForwardAlgorithm_v7 offered no algorithm that can run the problem")
}

func (s *cudnnSession) Workspace(p conv.Problem, a Algo) (int64, error) {
	if err := s.describe(p); err != nil {
		return 0, err
	}
	n, err := s.h.ForwardWorkspace(s.x, s.w, s.conv, s.y, cudnn.FwdAlgo(a.ID))
	return int64(n), err
}

func (s *cudnnSession) Forward(p conv.Problem, a Algo, b Buffers) error {
	if err := s.describe(p); err != nil {
		return err
	}
	return s.h.Forward(cudnn.ForwardArgs{X: s.x, XData: b.X, W: s.w, WData: b.W, Conv: s.conv, Algo: cudnn.FwdAlgo(a.ID),
		Workspace: b.Workspace, WorkspaceBytes: uint64(max(b.WorkspaceBytes, 0)), Y: s.y, YData: b.Y, Alpha: 1})
}

func (s *cudnnSession) Scale(p conv.Problem, y hip.DevPtr, alpha float32) error {
	if err := s.describe(p); err != nil {
		return err
	}
	return s.h.ScaleTensor(s.y, y, alpha)
}

func (s *cudnnSession) destroyDescs() error {
	var k keepFirst
	k.add(s.x.Destroy())
	k.add(s.w.Destroy())
	k.add(s.y.Destroy())
	k.add(s.conv.Destroy())
	s.x, s.w, s.y, s.conv = nil, nil, nil, nil
	return k.err
}

func (s *cudnnSession) Close() error {
	var k keepFirst
	k.add(s.destroyDescs())
	k.add(s.h.Destroy())
	return k.err
}
