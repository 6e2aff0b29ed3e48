// Package targettest holds what the library-target tests share: FakeLib, a
// library written in Go over the simulated device, and the cuDNN and MIOpen
// stand-in C libraries (built with gcc) on HostDevice, a device whose
// memory is Go memory. Only tests import it.
package targettest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"miotool/internal/conv"
	"miotool/internal/dl"
	"miotool/internal/dnn/cudnn"
	"miotool/internal/dnn/miopen"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/testutil"
)

// The stand-in tests run the cuDNN and MIOpen targets through the real
// bindings against the packages' stand-in C libraries
// (internal/dnn/*/testdata), built here with gcc. The stand-ins compute on
// host memory, so the device is HostDevice: memory is Go memory, streams
// are numbers, and a capture records nothing; the library's work runs when
// it is called. That checks the wiring (which buffer, shape, algorithm and
// workspace reaches which call, and the thread binding) rather than capture
// semantics, which FakeLib covers on the simulator.

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
	root := testutil.ModuleRoot(t)
	for _, b := range []struct {
		src string
		out *string
		so  string
	}{
		{filepath.Join(root, "internal/dnn/cudnn/testdata/mockcudnn.c"), &si.cudnn, cudnn.Soname},
		{filepath.Join(root, "internal/dnn/miopen/testdata/mockmiopen.c"), &si.miopen, miopen.Soname},
	} {
		if _, err := os.Stat(b.src); err != nil {
			t.Skipf("stand-in source missing: %v", err)
		}
		path := filepath.Join(si.dir, b.so)
		if out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-o", path, b.src, "-lpthread").CombinedOutput(); err != nil {
			t.Fatalf("building %s: %v\n%s", b.src, err, out)
		}
		*b.out = path
	}
	return si
}

func (si standIns) spec(name, soname string) dl.SearchSpec {
	return dl.SearchSpec{Name: name, Sonames: []string{soname}, Dirs: []string{si.dir}, SkipLoaderPath: true}
}

// HostDevice is just enough of a device for the target scenarios over a
// stand-in library. The embedded nil interface makes any other call fail
// loudly.
type HostDevice struct {
	hip.Device
	backend string
	libs    []hip.Library

	mu      sync.Mutex
	mem     map[hip.DevPtr][]byte
	next    hip.Stream
	capture map[hip.Stream]bool
}

func NewHostDevice(backend string, libs ...hip.Library) *HostDevice {
	return &HostDevice{backend: backend, libs: libs, mem: map[hip.DevPtr][]byte{}, next: 0x100, capture: map[hip.Stream]bool{}}
}

func (d *HostDevice) Props() hip.Props {
	return hip.Props{Backend: d.backend, Name: "host memory", Arch: "host"}
}
func (d *HostDevice) Dialect() hip.Dialect     { return hip.DialectCUDA }
func (d *HostDevice) Libraries() []hip.Library { return d.libs }

func (d *HostDevice) StreamCreate(hip.StreamFlags) (hip.Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.next++
	return d.next, nil
}
func (d *HostDevice) StreamDestroy(hip.Stream) error     { return nil }
func (d *HostDevice) StreamSynchronize(hip.Stream) error { return nil }
func (d *HostDevice) StreamIsCapturing(s hip.Stream) (hip.CaptureStatus, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capture[s] {
		return hip.CaptureStatusActive, nil
	}
	return hip.CaptureStatusNone, nil
}

func (d *HostDevice) Malloc(n int) (hip.DevPtr, error) {
	words := make([]uint64, (n+7)/8+1)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), n)
	p := hip.DevPtr(uintptr(unsafe.Pointer(&b[0])))
	d.mu.Lock()
	d.mem[p] = b
	d.mu.Unlock()
	return p, nil
}

func (d *HostDevice) Free(p hip.DevPtr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mem[p]; !ok {
		return fmt.Errorf("free of %#x, not allocated", uint64(p))
	}
	delete(d.mem, p)
	return nil
}

// span is the allocation that starts at p.
func (d *HostDevice) span(p hip.DevPtr, n int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.mem[p]
	if !ok || n > len(b) {
		panic(fmt.Sprintf("host device: %d bytes at %#x are not one allocation", n, uint64(p)))
	}
	return b[:n]
}

func (d *HostDevice) MemsetAsync(p hip.DevPtr, v byte, n int, _ hip.Stream) error {
	b := d.span(p, n)
	for i := range b {
		b[i] = v
	}
	return nil
}
func (d *HostDevice) MemcpyHtoD(dst hip.DevPtr, src []byte) error {
	copy(d.span(dst, len(src)), src)
	return nil
}
func (d *HostDevice) MemcpyDtoH(dst []byte, src hip.DevPtr) error {
	copy(dst, d.span(src, len(dst)))
	return nil
}

func (d *HostDevice) StreamBeginCapture(s hip.Stream, _ hip.CaptureMode) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.capture[s] = true
	return nil
}
func (d *HostDevice) StreamEndCapture(s hip.Stream) (hip.Graph, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.capture, s)
	return 1, nil
}
func (d *HostDevice) GraphInstantiate(hip.Graph) (hip.GraphExec, error) { return 1, nil }
func (d *HostDevice) GraphLaunch(hip.GraphExec, hip.Stream) error       { return nil }
func (d *HostDevice) GraphExecDestroy(hip.GraphExec) error              { return nil }
func (d *HostDevice) GraphDestroy(hip.Graph) error                      { return nil }

// Allocations counts the buffers not freed yet.
func (d *HostDevice) Allocations() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mem)
}

// StandInProblem is small enough for the stand-ins' host loops.
var StandInProblem = conv.Problem{N: 2, C: 3, H: 10, W: 9, K: 4, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 2, DilH: 1, DilW: 1, Groups: 1}

// CUDNNStandIn is the cuDNN target over the stand-in libcudnn.
func CUDNNStandIn(t *testing.T) (*HostDevice, target.Target) {
	t.Helper()
	si := buildStandIns(t)
	l, err := cudnn.Open(si.spec(cudnn.LibraryName, cudnn.Soname))
	if err != nil {
		t.Fatal(err)
	}
	// The stand-in also stands in for the driver's context calls.
	dev := NewHostDevice("cuda", hip.Library{Name: "libcuda", Loaded: si.cudnn})
	lib, err := target.NewCUDNN(l, dev)
	if err != nil {
		t.Fatal(err)
	}
	return dev, lib
}

// MIOpenStandIn is the MIOpen target over the stand-in libMIOpen.
func MIOpenStandIn(t *testing.T) (*HostDevice, target.Target) {
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
	dev := NewHostDevice("hip", hip.Library{Name: "libamdhip64", Loaded: si.miopen})
	lib, err := target.NewMIOpen(l, dev)
	if err != nil {
		t.Fatal(err)
	}
	return dev, lib
}
