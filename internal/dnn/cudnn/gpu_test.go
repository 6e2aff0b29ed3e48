package cudnn

import (
	"runtime"
	"testing"

	"miotool/internal/conv"
	"miotool/internal/hip"
	"miotool/internal/hip/cuda"
)

// The GPU test runs the binding against the real libcudnn.so.9 on miotool's
// CUDA backend: find, a forward checked against the CPU reference, and a
// capture of the forward in every mode whose graph is replayed and checked.
// It skips where there is no NVIDIA GPU or no cuDNN 9.

func openGPU(t *testing.T) (hip.Device, *Library) {
	t.Helper()
	lib, err := Default()
	if err != nil {
		t.Skipf("no cuDNN 9: %v", err)
	}
	dev, err := cuda.Open(hip.OpenOptions{})
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	return dev, lib
}

func upload(t *testing.T, dev hip.Device, v []float32) hip.DevPtr {
	t.Helper()
	p, err := dev.Malloc(4 * len(v))
	must(t, err)
	t.Cleanup(func() { _ = dev.Free(p) })
	must(t, dev.MemcpyHtoD(p, conv.Float32Bytes(v)))
	return p
}

func download(t *testing.T, dev hip.Device, p hip.DevPtr, n int) []float32 {
	t.Helper()
	b := make([]byte, 4*n)
	must(t, dev.MemcpyDtoH(b, p))
	v, err := conv.BytesFloat32(b)
	must(t, err)
	return v
}

func TestGPUFindForwardAndCaptureInEveryMode(t *testing.T) {
	dev, lib := openGPU(t)
	t.Logf("%s, cudart %d, on %s", lib, lib.CudartVersion(), dev.Props())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := OpenContext(DriverPath(dev), dev.Props().Ordinal)
	must(t, err)
	defer ctx.Close()
	must(t, ctx.MakeCurrent())

	s, err := dev.StreamCreate(hip.StreamNonBlocking)
	must(t, err)
	defer dev.StreamDestroy(s)
	h, err := lib.NewHandle()
	must(t, err)
	defer h.Destroy()
	must(t, h.SetStream(s))
	if got, err := h.Stream(); err != nil || got != s {
		t.Fatalf("cudnnGetStream = %#x, %v; want %#x", got, err, s)
	}

	p := conv.Problem{N: 4, C: 32, H: 28, W: 28, K: 64, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	hx, hw := conv.RandomTensor(p.InputElements(), 21), conv.RandomTensor(p.WeightElements(), 22)
	ref := conv.Reference(p, hx, hw)
	x, w := upload(t, dev, hx), upload(t, dev, hw)
	y := upload(t, dev, make([]float32, p.OutputElements()))

	for _, math := range []MathType{FMAMath, DefaultMath} {
		d := newDescs(t, lib, p, math)
		dims, err := d.conv.OutputDims(d.x, d.w)
		if err != nil || dims != [4]int{p.N, p.K, p.OutH(), p.OutW()} {
			t.Fatalf("output dims %v, %v", dims, err)
		}
		found, err := h.FindForward(d.x, d.w, d.conv, d.y)
		must(t, err)
		var best *AlgoPerf
		for i, a := range found {
			t.Logf("%s find %d: %s status %s %.4f ms, %d bytes, deterministic %v, %s", math, i, a.Algo, a.Status, a.TimeMs, a.Memory, a.Deterministic, a.MathType)
			if best == nil && a.Status == StatusSuccess {
				best = &found[i]
			}
		}
		if best == nil {
			t.Fatalf("%s: find returned no algorithm that ran", math)
		}
		heur, err := h.HeuristicForward(d.x, d.w, d.conv, d.y)
		must(t, err)
		t.Logf("%s heuristic first choice: %s (%s)", math, heur[0].Algo, heur[0].MathType)
		need, err := h.ForwardWorkspace(d.x, d.w, d.conv, d.y, best.Algo)
		must(t, err)
		var ws hip.DevPtr
		if need > 0 {
			ws, err = dev.Malloc(int(need))
			must(t, err)
			defer dev.Free(ws)
		}
		args := ForwardArgs{X: d.x, XData: x, W: d.w, WData: w, Conv: d.conv, Algo: best.Algo, Workspace: ws, WorkspaceBytes: need, Y: d.y, YData: y, Alpha: 1}
		must(t, dev.Memset(y, 0, 4*p.OutputElements()))
		must(t, h.Forward(args))
		must(t, dev.StreamSynchronize(s))
		chk := conv.Check(p, download(t, dev, y, p.OutputElements()), ref)
		t.Logf("%s forward with %s: %s", math, best.Algo, chk)
		if math == FMAMath && !chk.OK {
			t.Fatalf("FMA math forward: %s", chk)
		}
		if math != FMAMath {
			continue // default math may use TF32: logged for comparison only
		}

		for _, mode := range hip.CaptureModes {
			must(t, dev.MemsetAsync(y, 0, 4*p.OutputElements(), s))
			must(t, dev.StreamSynchronize(s))
			must(t, dev.StreamBeginCapture(s, mode))
			fwdErr := h.Forward(args)
			g, endErr := dev.StreamEndCapture(s)
			if fwdErr != nil || endErr != nil {
				t.Errorf("%s: forward %v, end capture %v", mode, fwdErr, endErr)
				continue
			}
			if v := download(t, dev, y, p.OutputElements()); v[0] != 0 || v[len(v)-1] != 0 {
				t.Errorf("%s: the captured forward ran during the capture", mode)
			}
			ge, err := dev.GraphInstantiate(g)
			must(t, err)
			rs, err := dev.StreamCreate(hip.StreamNonBlocking)
			must(t, err)
			must(t, dev.GraphLaunch(ge, rs))
			must(t, dev.StreamSynchronize(rs))
			chk := conv.Check(p, download(t, dev, y, p.OutputElements()), ref)
			t.Logf("capture %s: end capture ok, graph replay %s", mode, chk)
			if !chk.OK {
				t.Errorf("%s: graph output %s", mode, chk)
			}
			must(t, dev.StreamDestroy(rs))
			must(t, dev.GraphExecDestroy(ge))
			must(t, dev.GraphDestroy(g))
		}
	}
}
