package repro

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"miotool/internal/conv"
	"miotool/internal/dnn/cudnn"
	"miotool/internal/dnn/miopen"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// The adapter tests run the cuDNN and MIOpen targets through the real
// bindings against the packages' stand-in C libraries
// (internal/dnn/*/testdata), built here with gcc. The stand-ins compute on
// host memory, so the device is hostDevice: memory is Go memory, streams
// are numbers, and a capture records nothing; the library's work runs when
// it is called. That checks the wiring (which buffer, shape, algorithm and
// workspace reaches which call, and the thread binding) rather than capture
// semantics, which target_test.go covers on the simulator.

// standIns are one test's builds of the stand-ins.
type standIns struct {
	dir, cudnn, miopen string
}

// buildStandIns compiles both stand-ins into a folder of the test's own, so
// each test loads fresh copies (their logs and switches start clean).
func buildStandIns(t *testing.T) standIns {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("stand-in libraries need a C compiler: %v", err)
	}
	si := standIns{dir: t.TempDir()}
	for _, b := range []struct {
		src string
		out *string
		so  string
	}{
		{"../dnn/cudnn/testdata/mockcudnn.c", &si.cudnn, cudnn.Soname},
		{"../dnn/miopen/testdata/mockmiopen.c", &si.miopen, miopen.Soname},
	} {
		if _, err := os.Stat(b.src); err != nil {
			t.Skipf("stand-in source missing (run the tests from the package folder): %v", err)
		}
		path := filepath.Join(si.dir, b.so)
		if out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", path, b.src, "-lpthread").CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", b.src, err, out)
		}
		*b.out = path
	}
	return si
}

func (si standIns) spec(name, soname string) gpulib.SearchSpec {
	return gpulib.SearchSpec{Name: name, Sonames: []string{soname}, Dirs: []string{si.dir}, SkipLoaderPath: true}
}

// hostDevice is just enough of a device for the target scenarios over a
// stand-in library. The embedded nil interface makes any other call fail
// loudly.
type hostDevice struct {
	hip.Device
	backend string
	libs    []hip.Library

	mu      sync.Mutex
	mem     map[hip.DevPtr][]byte
	next    hip.Stream
	capture map[hip.Stream]bool
}

func newHostDevice(backend string, libs ...hip.Library) *hostDevice {
	return &hostDevice{backend: backend, libs: libs, mem: map[hip.DevPtr][]byte{}, next: 0x100, capture: map[hip.Stream]bool{}}
}

func (d *hostDevice) Props() hip.Props {
	return hip.Props{Backend: d.backend, Name: "host memory", Arch: "host"}
}
func (d *hostDevice) Dialect() hip.Dialect     { return hip.DialectCUDA }
func (d *hostDevice) Libraries() []hip.Library { return d.libs }

func (d *hostDevice) StreamCreate(hip.StreamFlags) (hip.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	return d.next, nil
}
func (d *hostDevice) StreamDestroy(hip.Stream) error     { return nil }
func (d *hostDevice) StreamSynchronize(hip.Stream) error { return nil }
func (d *hostDevice) StreamIsCapturing(s hip.Stream) (hip.CaptureStatus, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capture[s] {
		return hip.CaptureStatusActive, nil
	}
	return hip.CaptureStatusNone, nil
}

func (d *hostDevice) Malloc(n int) (hip.DevPtr, error) {
	words := make([]uint64, (n+7)/8+1)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
	p := hip.DevPtr(uintptr(unsafe.Pointer(&b[0])))
	d.mu.Lock()
	d.mem[p] = b
	d.mu.Unlock()
	return p, nil
}

func (d *hostDevice) Free(p hip.DevPtr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mem[p]; !ok {
		return fmt.Errorf("free of %#x, not allocated", uint64(p))
	}
	delete(d.mem, p)
	return nil
}

// span is the allocation that starts at p.
func (d *hostDevice) span(p hip.DevPtr, n int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.mem[p]
	if !ok || n > len(b) {
		panic(fmt.Sprintf("host device: %d bytes at %#x are not one allocation", n, uint64(p)))
	}
	return b[:n]
}

func (d *hostDevice) MemsetAsync(p hip.DevPtr, v byte, n int, _ hip.Stream) error {
	b := d.span(p, n)
	for i := range b {
		b[i] = v
	}
	return nil
}
func (d *hostDevice) MemcpyHtoD(dst hip.DevPtr, src []byte) error {
	copy(d.span(dst, len(src)), src)
	return nil
}
func (d *hostDevice) MemcpyDtoH(dst []byte, src hip.DevPtr) error {
	copy(dst, d.span(src, len(dst)))
	return nil
}

func (d *hostDevice) StreamBeginCapture(s hip.Stream, _ hip.CaptureMode) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capture[s] = true
	return nil
}
func (d *hostDevice) StreamEndCapture(s hip.Stream) (hip.Graph, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.capture, s)
	return 1, nil
}
func (d *hostDevice) GraphInstantiate(hip.Graph) (hip.GraphExec, error) { return 1, nil }
func (d *hostDevice) GraphLaunch(hip.GraphExec, hip.Stream) error       { return nil }
func (d *hostDevice) GraphExecDestroy(hip.GraphExec) error              { return nil }
func (d *hostDevice) GraphDestroy(hip.Graph) error                      { return nil }

func (d *hostDevice) allocations() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mem)
}

// standInProblem is small enough for the stand-ins' host loops.
var standInProblem = conv.Problem{N: 2, C: 3, H: 10, W: 9, K: 4, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 2, DilH: 1, DilW: 1, Groups: 1}

func cudnnStandInTarget(t *testing.T) (*hostDevice, targetLib) {
	t.Helper()
	si := buildStandIns(t)
	l, err := cudnn.Open(si.spec(cudnn.LibraryName, cudnn.Soname))
	if err != nil {
		t.Fatal(err)
	}
	// The stand-in also stands in for the driver's context calls.
	dev := newHostDevice("cuda", hip.Library{Name: "libcuda", Loaded: si.cudnn})
	lib, err := newCUDNNTarget(l, dev)
	if err != nil {
		t.Fatal(err)
	}
	return dev, lib
}

func miopenStandInTarget(t *testing.T) (*hostDevice, targetLib) {
	t.Helper()
	si := buildStandIns(t)
	t.Setenv(miopen.EnvUserDBPath, "")
	t.Setenv(miopen.EnvDisableFindDB, "")
	os.Unsetenv(miopen.EnvDisableFindDB)
	l, err := miopen.Open(si.spec(miopen.LibraryName, miopen.Soname), miopen.Options{UserDBPath: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The stand-in also stands in for hipSetDevice.
	dev := newHostDevice("hip", hip.Library{Name: "libamdhip64", Loaded: si.miopen})
	lib, err := newMIOpenTarget(l, dev)
	if err != nil {
		t.Fatal(err)
	}
	return dev, lib
}

func TestTargetCaptureThroughTheStandInLibraries(t *testing.T) {
	for _, tt := range []struct {
		target    Target
		open      func(*testing.T) (*hostDevice, targetLib)
		chosen    string
		found     []string
		wantNotes string
	}{
		{TargetCUDNN, cudnnStandInTarget, "IMPLICIT_PRECOMP_GEMM", []string{"IMPLICIT_PRECOMP_GEMM", "IMPLICIT_GEMM", "WINOGRAD"}, "CUDNN_FMA_MATH"},
		{TargetMIOpen, miopenStandInTarget, "miopenConvolutionFwdAlgoDirect", []string{"miopenConvolutionFwdAlgoDirect", "miopenConvolutionFwdAlgoGEMM"}, "MIOPEN_DEBUG_DISABLE_FIND_DB=1"},
	} {
		t.Run(string(tt.target), func(t *testing.T) {
			dev, lib := tt.open(t)
			useLib(t, lib, nil)
			cases, err := RunTargetCaptureWith(context.Background(), dev, TargetCaptureOptions{
				Target: tt.target, Modes: hip.CaptureModes, Variants: Variants, Problem: standInProblem, Seed: 9})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cases {
				if c.Measured != Pass || !c.OutputOK || c.Chosen.Name != tt.chosen {
					t.Fatalf("%s/%s: %+v", c.Mode, c.Variant, c)
				}
				var names []string
				for _, a := range c.Found {
					names = append(names, a.Name)
				}
				if strings.Join(names, " ") != strings.Join(tt.found, " ") {
					t.Fatalf("found %v, want %v", names, tt.found)
				}
				if want := map[Target]string{TargetCUDNN: cudnn.Soname, TargetMIOpen: miopen.Soname}[tt.target]; !strings.HasSuffix(c.Library, want+")") {
					t.Fatalf("library %q", c.Library)
				}
			}
			if n := dev.allocations(); n != 0 {
				t.Fatalf("%d allocations left", n)
			}
			if notes := strings.Join(lib.notes(), " "); !strings.Contains(notes, tt.wantNotes) {
				t.Fatalf("notes %q", notes)
			}
		})
	}
}

// cuDNN's find lists an algorithm that cannot run; it is shown, not chosen.
func TestCUDNNTargetKeepsFailedFindEntries(t *testing.T) {
	dev, lib := cudnnStandInTarget(t)
	useLib(t, lib, nil)
	cases, err := RunTargetCaptureWith(context.Background(), dev, TargetCaptureOptions{
		Target: TargetCUDNN, Modes: []hip.CaptureMode{hip.CaptureModeGlobal}, Problem: standInProblem})
	if err != nil {
		t.Fatal(err)
	}
	w := cases[0].Found[2]
	if w.OK || w.Note != "CUDNN_STATUS_NOT_SUPPORTED" || cases[0].Found[0].Note != "deterministic, CUDNN_FMA_MATH" || cases[0].Found[0].WorkspaceBytes != 4096 {
		t.Fatalf("find entries %+v", cases[0].Found)
	}
	if got := algoList(cases[0].Found); got != "IMPLICIT_PRECOMP_GEMM 0.25 ms, IMPLICIT_GEMM 0.5 ms, WINOGRAD (CUDNN_STATUS_NOT_SUPPORTED)" {
		t.Fatalf("algoList = %q", got)
	}
}

func TestTargetStressThroughTheStandInLibraries(t *testing.T) {
	for _, tt := range []struct {
		target Target
		open   func(*testing.T) (*hostDevice, targetLib)
		sel    AlgoSelection
		algo   string
	}{
		{TargetCUDNN, cudnnStandInTarget, SelectHeuristic, "IMPLICIT_GEMM"},
		{TargetCUDNN, cudnnStandInTarget, SelectFind, "IMPLICIT_PRECOMP_GEMM"},
		{TargetMIOpen, miopenStandInTarget, SelectHeuristic, "solution 85 (Direct)"},
		{TargetMIOpen, miopenStandInTarget, SelectFind, "miopenConvolutionFwdAlgoDirect"},
	} {
		t.Run(string(tt.target)+"/"+string(tt.sel), func(t *testing.T) {
			dev, lib := tt.open(t)
			useLib(t, lib, nil)
			opts := TargetStressOptions{Target: tt.target, Threads: 2, Trials: 2, Iterations: 30, Size: 40, Select: tt.sel}
			res, err := RunTargetStress(context.Background(), dev, opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Measured != Pass || len(res.Threads) != 4 {
				t.Fatalf("measured %s: %s %+v", res.Measured, res.Detail, res.Threads)
			}
			for _, th := range res.Threads {
				if th.Sum != 100 || th.Algos[tt.algo] != 30 {
					t.Fatalf("thread %+v", th)
				}
			}
			if n := dev.allocations(); n != 0 {
				t.Fatalf("%d allocations left", n)
			}
		})
	}
}

// A session follows the problem of each call: shape and geometry changes
// reach the descriptors.
func TestTargetSessionsFollowTheProblem(t *testing.T) {
	for _, tt := range []struct {
		name string
		open func(*testing.T) (*hostDevice, targetLib)
	}{{"cudnn", cudnnStandInTarget}, {"miopen", miopenStandInTarget}} {
		t.Run(tt.name, func(t *testing.T) {
			dev, lib := tt.open(t)
			defer lib.close()
			th, err := startOSThread(lib.bindThread)
			if err != nil {
				t.Fatal(err)
			}
			defer th.stop()
			second := standInProblem
			second.C, second.PadH, second.PadW, second.StrideW, second.DilH = 2, 0, 2, 1, 2
			err = th.run(func() error {
				sess, err := lib.newSession(7)
				if err != nil {
					return err
				}
				defer sess.close()
				for i, p := range []conv.Problem{standInProblem, second, standInProblem} {
					host := newTargetHost(p, uint64(i))
					x, _ := dev.Malloc(4 * p.InputElements())
					w, _ := dev.Malloc(4 * p.WeightElements())
					y, _ := dev.Malloc(4 * p.OutputElements())
					_ = dev.MemcpyHtoD(x, conv.Float32Bytes(host.x))
					_ = dev.MemcpyHtoD(w, conv.Float32Bytes(host.w))
					a, err := sess.choose(p)
					if err != nil {
						return err
					}
					need, err := sess.workspace(p, a)
					if err != nil {
						return err
					}
					ws, _ := dev.Malloc(int(max(need, 1)))
					if err := sess.forward(p, a, targetBuffers{X: x, W: w, Y: y, Workspace: ws, WorkspaceBytes: need}); err != nil {
						return fmt.Errorf("problem %d: %w", i, err)
					}
					got, _ := readFloats(dev, y, p.OutputElements())
					if chk := conv.Check(p, got, host.reference()); !chk.OK {
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
