package dnntest

import (
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"testing"
	"unsafe"

	"miotool/internal/conv"
	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/hip"
)

// Problem is a convolution with every geometry parameter away from its
// default, so that a swapped argument changes the result.
var Problem = conv.Problem{N: 2, C: 3, H: 9, W: 7, K: 4, R: 3, S: 2, PadH: 1, PadW: 0, StrideH: 2, StrideW: 1, DilH: 1, DilW: 2, Groups: 1}

// Geometry is p's convolution geometry as the bindings take it.
func Geometry(p conv.Problem) dnnlib.Conv2d {
	return dnnlib.Conv2d{PadH: p.PadH, PadW: p.PadW, StrideH: p.StrideH, StrideW: p.StrideW, DilH: p.DilH, DilW: p.DilW}
}

// DevPtr passes a Go buffer to a stand-in as device memory (the stand-ins
// compute on host memory). The caller keeps v alive until the call's work
// is done.
func DevPtr(v []float32) hip.DevPtr { return hip.DevPtr(uintptr(unsafe.Pointer(&v[0]))) }

// WantStatus fails t unless err's chain holds a library error with status
// want, and returns that error.
func WantStatus[S dnnlib.Status](t testing.TB, err error, want S, what string) *dnnlib.Error[S] {
	t.Helper()
	var e *dnnlib.Error[S]
	if !errors.As(err, &e) || e.Status != want {
		t.Fatalf("%s: got %v, want status %s", what, err, want)
	}
	return e
}

// WantScaled fails t unless y is scale times ref, within fp32 rounding.
func WantScaled(t testing.TB, y, ref []float32, scale float32, what string) {
	t.Helper()
	if len(y) != len(ref) {
		t.Fatalf("%s: %d values, want %d", what, len(y), len(ref))
	}
	for i := range y {
		if want := scale * ref[i]; math.Abs(float64(y[i]-want)) > 1e-5*(1+math.Abs(float64(want))) {
			t.Fatalf("%s: y[%d] = %g, want %g", what, i, y[i], want)
		}
	}
}

// LockThread locks the test's goroutine to its OS thread until the test
// ends and runs bind there: making a device or a context current, which
// the libraries keep per OS thread.
func LockThread(t testing.TB, bind func() error) {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	if err := bind(); err != nil {
		t.Fatal(err)
	}
}

// LibraryDevice is a device that only tells which libraries it loaded;
// any other call panics on the nil Device.
type LibraryDevice struct {
	hip.Device
	Libs []hip.Library
}

// Libraries are the records it was given.
func (d LibraryDevice) Libraries() []hip.Library { return d.Libs }

// WantLoadedPath checks a binding's function that finds the GPU runtime a
// device loaded: it is the path of dev's record labelled name, not of
// another library's, and fallback where dev has no such record.
func WantLoadedPath(t testing.TB, path func(hip.Device) string, name, fallback string) {
	t.Helper()
	want := "/rt/" + name + ".so.99"
	d := LibraryDevice{Libs: []hip.Library{{Name: "libother", Loaded: "/rt/libother.so.1"}, {Name: name, Loaded: want}}}
	if got := path(d); got != want {
		t.Errorf("with a %s record: %q, want %q", name, got, want)
	}
	unloaded := LibraryDevice{Libs: []hip.Library{{Name: name}}}
	if got := path(unloaded); got != fallback {
		t.Errorf("with a record of no path: %q, want %q", got, fallback)
	}
	if got := path(LibraryDevice{}); got != fallback {
		t.Errorf("without a record: %q, want %q", got, fallback)
	}
}

// WantNotFound checks what open (a binding's Open) says of a library that
// is not there: an *dnnlib.OpenError wrapping a *dl.NotFoundError,
// whose record names the library and the one path tried, soname in an
// empty folder.
func WantNotFound(t testing.TB, name, soname string, open func(dl.SearchSpec) error) {
	t.Helper()
	empty := t.TempDir()
	err := open(dl.SearchSpec{Name: name, Sonames: []string{soname}, Dirs: []string{empty}, SkipLoaderPath: true})
	var oe *dnnlib.OpenError
	var nf *dl.NotFoundError
	if !errors.As(err, &oe) || !errors.As(err, &nf) {
		t.Fatalf("missing library: %v, want an OpenError around a NotFoundError", err)
	}
	if oe.Library.Name != name || len(oe.Library.Tried) != 1 || oe.Library.Tried[0].Path != filepath.Join(empty, soname) {
		t.Fatalf("missing library: record %+v, want %s and the one path tried", oe.Library, name)
	}
}

// DestroyTwice destroys each of objs twice, failing t on any error: a
// second Destroy, like one of a nil object, does nothing.
func DestroyTwice(t testing.TB, objs ...interface{ Destroy() error }) {
	t.Helper()
	for _, o := range objs {
		for range 2 {
			if err := o.Destroy(); err != nil {
				t.Fatalf("destroying %T: %v", o, err)
			}
		}
	}
}

// DestroyAtCleanup destroys objs when t ends, failing t for each that
// does not destroy cleanly.
func DestroyAtCleanup(t testing.TB, objs ...interface{ Destroy() error }) {
	t.Helper()
	t.Cleanup(func() {
		for _, o := range objs {
			if err := o.Destroy(); err != nil {
				t.Error(err)
			}
		}
	})
}
