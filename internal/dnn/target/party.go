package target

import (
	"fmt"

	"miotool/internal/conv"
	"miotool/internal/hip"
	"miotool/internal/hip/osthread"
)

// Party is one thread's share of a scenario run on a target: its handle,
// stream, output buffer and workspace. Its methods run on its thread.
type Party struct {
	Thread  *osthread.Thread
	Stream  hip.Stream
	Session Session
	Y       hip.DevPtr
	WS      hip.DevPtr
	WSBytes int64
}

// Setup makes the party's stream, session and a yBytes output buffer.
func (tp *Party) Setup(dev hip.Device, lib Target, yBytes int) error {
	var err error
	if tp.Stream, err = dev.StreamCreate(hip.StreamNonBlocking); err != nil {
		return err
	}
	if tp.Session, err = lib.NewSession(tp.Stream); err != nil {
		return err
	}
	tp.Y, err = dev.Malloc(yBytes)
	return err
}

// EnsureWorkspace grows the workspace to n bytes.
func (tp *Party) EnsureWorkspace(dev hip.Device, n int64) error {
	if n <= tp.WSBytes {
		return nil
	}
	if tp.WS != 0 {
		if err := dev.Free(tp.WS); err != nil {
			return err
		}
		tp.WS, tp.WSBytes = 0, 0
	}
	p, err := dev.Malloc(int(n))
	if err != nil {
		return fmt.Errorf("allocating a %d-byte workspace: %w", n, err)
	}
	tp.WS, tp.WSBytes = p, n
	return nil
}

// Buffers are x and w with the party's output and workspace.
func (tp *Party) Buffers(x, w hip.DevPtr) Buffers {
	return Buffers{X: x, W: w, Y: tp.Y, Workspace: tp.WS, WorkspaceBytes: tp.WSBytes}
}

// Teardown releases what Setup and EnsureWorkspace made; it waits for the
// party's stream first.
func (tp *Party) Teardown(dev hip.Device) error {
	var k keepFirst
	if tp.Stream != 0 {
		// Best effort: after a failed capture some runtimes refuse the
		// wait, and the case already says why.
		_ = dev.StreamSynchronize(tp.Stream)
	}
	if tp.Session != nil {
		k.add(tp.Session.Close())
	}
	for _, p := range []hip.DevPtr{tp.Y, tp.WS} {
		if p != 0 {
			k.add(dev.Free(p))
		}
	}
	if tp.Stream != 0 {
		k.add(dev.StreamDestroy(tp.Stream))
	}
	*tp = Party{Thread: tp.Thread}
	return k.err
}

// FindAndChoose runs find through tp and picks the fastest algorithm that
// ran, with its workspace allocated.
func (tp *Party) FindAndChoose(dev hip.Device, p conv.Problem, x, w hip.DevPtr) ([]Algo, Algo, error) {
	need, err := tp.Session.FindWorkspace(p)
	if err != nil {
		return nil, Algo{}, err
	}
	if err := tp.EnsureWorkspace(dev, need); err != nil {
		return nil, Algo{}, err
	}
	found, err := tp.Session.Find(p, tp.Buffers(x, w))
	if err != nil {
		return nil, Algo{}, fmt.Errorf("find: %w", err)
	}
	a, err := FirstThatRan(found)
	if err != nil {
		return found, a, err
	}
	return found, a, tp.UseAlgo(dev, p, a)
}

// FirstThatRan is the best algorithm of a ranking that find could run.
func FirstThatRan(found []Algo) (Algo, error) {
	for _, a := range found {
		if a.OK {
			return a, nil
		}
	}
	return Algo{}, fmt.Errorf("find returned no algorithm that ran (%s)", AlgoList(found))
}

// UseAlgo allocates the workspace a needs.
func (tp *Party) UseAlgo(dev hip.Device, p conv.Problem, a Algo) error {
	need, err := tp.Session.Workspace(p, a)
	if err != nil {
		return err
	}
	return tp.EnsureWorkspace(dev, need)
}

// ClearOutput zeroes y on the party's stream and waits for that stream
// alone: a device-wide wait would also wait for work a library left
// running on streams of its own, which is the precondition of #12121.
func (tp *Party) ClearOutput(dev hip.Device, bytes int) error {
	if err := dev.MemsetAsync(tp.Y, 0, bytes, tp.Stream); err != nil {
		return err
	}
	return dev.StreamSynchronize(tp.Stream)
}
