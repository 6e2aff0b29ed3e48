package target_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"miotool/internal/conv"
	"miotool/internal/dnn/target"
	"miotool/internal/dnn/target/targettest"
	"miotool/internal/hip"
	"miotool/internal/hip/osthread"
)

func newDevice(t *testing.T, d hip.Dialect) hip.Device { return targettest.SimDevice(t, d) }

func TestTargetsNeedTheirLibraryAndBackend(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want target.Name
	}{{"builtin", target.Builtin}, {"miopen", target.MIOpen}, {"cudnn", target.CUDNN}} {
		if got, err := target.ParseName(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseName(%q) = %q, %v", tt.in, got, err)
		}
	}
	if _, err := target.ParseName("MIOpen"); err == nil || !strings.Contains(err.Error(), "want builtin, miopen or cudnn") {
		t.Errorf("case matters: %v", err)
	}
	if err := target.Available(target.Builtin); err != nil {
		t.Errorf("builtin: %v", err)
	}
	if err := target.Available("nope"); err == nil {
		t.Error("an unknown target is available")
	}

	dev := newDevice(t, hip.DialectCUDA)
	if err := target.Supports(target.Builtin, dev); err != nil {
		t.Errorf("builtin on the simulator: %v", err)
	}
	for _, tc := range []struct {
		target  target.Name
		backend hip.BackendName
	}{{target.CUDNN, hip.BackendCUDA}, {target.MIOpen, hip.BackendHIP}} {
		err := target.Supports(tc.target, dev)
		var tu *target.UnavailableError
		var hu *hip.UnavailableError
		if !errors.As(err, &tu) || !errors.As(err, &hu) || hu.Backend != string(tc.target) || tu.NeedsBackend != tc.backend {
			t.Fatalf("%s on the simulator: %v", tc.target, err)
		}
		if !strings.Contains(err.Error(), "target "+string(tc.target)+" unavailable: it runs on the "+string(tc.backend)+" backend") {
			t.Errorf("message %q", err)
		}
		// The scenarios refuse a device on the wrong backend before anything runs.
		if _, err := target.Open(dev, tc.target); !errors.As(err, new(*hip.UnavailableError)) {
			t.Errorf("open %s on the simulator: %v", tc.target, err)
		}
	}

	// Where the library is missing (this machine, usually), the error
	// lists the paths tried; where it is present, it loads.
	t.Setenv("MIOPEN_USER_DB_PATH", "")
	t.Setenv("MIOPEN_DEBUG_DISABLE_FIND_DB", "")
	for _, name := range []target.Name{target.CUDNN, target.MIOpen} {
		err := target.Available(name)
		if err == nil {
			t.Logf("%s is installed here", name)
			continue
		}
		var tu *target.UnavailableError
		if !errors.As(err, &tu) || len(tu.Libraries) != 1 || len(tu.Libraries[0].Tried) == 0 {
			t.Errorf("%s: %v (%+v)", name, err, tu)
		}
	}
	if libs := target.Libraries(); len(libs) != 2 || libs[0].Name != "libMIOpen" || libs[1].Name != "libcudnn" {
		t.Errorf("Libraries = %+v", libs)
	}
	if err := target.Cleanup(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

func TestTargetNotesComeFromTheLibrary(t *testing.T) {
	dev := newDevice(t, hip.DialectCUDA)
	lib := targettest.NewFakeLib(t, dev)
	if got := target.NotesFor(targettest.Opener(lib, nil), dev, target.CUDNN); len(got) != 1 || got[0] != "fake note" || !lib.Closed.Load() {
		t.Fatalf("notes %q, closed %v", got, lib.Closed.Load())
	}
	if got := target.NotesFor(targettest.Opener(nil, errors.New("no library")), dev, target.CUDNN); got != nil {
		t.Fatalf("notes without a library: %q", got)
	}
}

// A session follows the problem of each call: shape and geometry changes
// reach the descriptors.
func TestTargetSessionsFollowTheProblem(t *testing.T) {
	for _, tt := range []struct {
		name string
		open func(*testing.T) (*targettest.HostDevice, target.Target)
	}{{"cudnn", targettest.CUDNNStandIn}, {"miopen", targettest.MIOpenStandIn}} {
		t.Run(tt.name, func(t *testing.T) {
			dev, lib := tt.open(t)
			defer lib.Close()
			th, err := osthread.Start(lib.BindThread)
			if err != nil {
				t.Fatal(err)
			}
			defer th.Stop()
			second := targettest.StandInProblem
			second.C, second.PadH, second.PadW, second.StrideW, second.DilH = 2, 0, 2, 1, 2
			err = th.Run(func() error {
				sess, err := lib.NewSession(7)
				if err != nil {
					return err
				}
				defer sess.Close()
				for i, p := range []conv.Problem{targettest.StandInProblem, second, targettest.StandInProblem} {
					hx, hw := conv.RandomTensor(p.InputElements(), uint64(i)), conv.RandomTensor(p.WeightElements(), uint64(i)+1)
					x, _ := dev.Malloc(4 * p.InputElements())
					w, _ := dev.Malloc(4 * p.WeightElements())
					y, _ := dev.Malloc(4 * p.OutputElements())
					_ = dev.MemcpyHtoD(x, conv.Float32Bytes(hx))
					_ = dev.MemcpyHtoD(w, conv.Float32Bytes(hw))
					a, err := sess.Choose(p)
					if err != nil {
						return err
					}
					need, err := sess.Workspace(p, a)
					if err != nil {
						return err
					}
					ws, _ := dev.Malloc(int(max(need, 1)))
					if err := sess.Forward(p, a, target.Buffers{X: x, W: w, Y: y, Workspace: ws, WorkspaceBytes: need}); err != nil {
						return fmt.Errorf("problem %d: %w", i, err)
					}
					got, _ := target.ReadFloats(dev, y, p.OutputElements())
					if chk := conv.Check(p, got, conv.Reference(p, hx, hw)); !chk.OK {
						return fmt.Errorf("problem %d: %s", i, chk)
					}
					for _, ptr := range []hip.DevPtr{x, w, y, ws} {
						_ = dev.Free(ptr)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
