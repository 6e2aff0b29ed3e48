package hip

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

func TestCodeNames(t *testing.T) {
	for _, tt := range []struct {
		c          Code
		hip, cuda  string
		cudaShort  string
		known      bool
		wantNumber int
	}{
		{Success, "hipSuccess", "CUDA_SUCCESS", "SUCCESS", true, 0},
		{ErrNotReady, "hipErrorNotReady", "CUDA_ERROR_NOT_READY", "NOT_READY", true, 600},
		{ErrStreamCaptureUnsupported, "hipErrorStreamCaptureUnsupported", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "STREAM_CAPTURE_UNSUPPORTED", true, 900},
		{ErrStreamCaptureInvalidated, "hipErrorStreamCaptureInvalidated", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "STREAM_CAPTURE_INVALIDATED", true, 901},
		{ErrCapturedEvent, "hipErrorCapturedEvent", "CUDA_ERROR_CAPTURED_EVENT", "CAPTURED_EVENT", true, 907},
		{ErrStreamCaptureWrongThread, "hipErrorStreamCaptureWrongThread", "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "STREAM_CAPTURE_WRONG_THREAD", true, 908},
		{ErrHostMemoryRegistered, "hipErrorHostMemoryAlreadyRegistered", "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "HOST_MEMORY_ALREADY_REGISTERED", true, 712},
		{ErrHostMemoryNotRegistered, "hipErrorHostMemoryNotRegistered", "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "HOST_MEMORY_NOT_REGISTERED", true, 713},
		{ErrLaunchFailure, "hipErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", "LAUNCH_FAILED", true, 719},
		{Code(4242), "hipError(4242)", "CUDA_ERROR(4242)", "CUDA_ERROR(4242)", false, 4242},
	} {
		if got := tt.c.Name(DialectHIP); got != tt.hip {
			t.Errorf("%d hip name %q, want %q", tt.c, got, tt.hip)
		}
		if got := tt.c.Name(DialectCUDA); got != tt.cuda {
			t.Errorf("%d cuda name %q, want %q", tt.c, got, tt.cuda)
		}
		if got := tt.c.Short(DialectCUDA); got != tt.cudaShort {
			t.Errorf("%d cuda short %q, want %q", tt.c, got, tt.cudaShort)
		}
		if tt.c.Known() != tt.known || int(tt.c) != tt.wantNumber {
			t.Errorf("%d known=%v", tt.c, tt.c.Known())
		}
	}
}

func TestErrorFormatAndCodeOf(t *testing.T) {
	e := &Error{Op: "Malloc", Code: ErrStreamCaptureUnsupported, Dialect: DialectCUDA}
	if got := e.Error(); got != "cuMemAlloc: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900)" {
		t.Errorf("got %q", got)
	}
	e2 := &Error{Op: "StreamEndCapture", Code: ErrStreamCaptureInvalidated, Dialect: DialectHIP, Detail: "x"}
	if got := e2.Error(); got != "hipStreamEndCapture: hipErrorStreamCaptureInvalidated (901): x" {
		t.Errorf("got %q", got)
	}
	wrapped := fmt.Errorf("launch: %w", e2)
	if CodeOf(wrapped) != ErrStreamCaptureInvalidated || CodeOf(nil) != Success || CodeOf(errors.New("x")) != ErrUnknown {
		t.Error("CodeOf")
	}
	if !IsNotReady(&Error{Code: ErrNotReady}) || IsNotReady(nil) {
		t.Error("IsNotReady")
	}
	if NewError(DialectHIP, "X", Success) != nil {
		t.Error("NewError(Success) must be nil")
	}
}

func TestParseHWQueues(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		set  bool
		want int
		warn bool
	}{
		{"", false, 4, false}, {"3", true, 3, false}, {" 8 ", true, 8, false}, {"0", true, 4, true},
		{"-2", true, 4, true}, {"abc", true, 4, true}, {"", true, 4, true}, {"99999999999", true, 1 << 16, true},
	} {
		got, warn := ParseHWQueues(tt.raw, tt.set)
		if got != tt.want || (warn != "") != tt.warn {
			t.Errorf("ParseHWQueues(%q, %v) = %d, %q", tt.raw, tt.set, got, warn)
		}
	}
}

// isolateRegistry gives t an empty backend registry and puts the process's
// back when t ends, so that a test registers what it needs however often it
// runs (-count) and in whatever order (-shuffle).
func isolateRegistry(t *testing.T) {
	t.Helper()
	regMu.Lock()
	saved := registry
	registry = maps.Clone(registry) // a map of the registry's own type
	clear(registry)
	regMu.Unlock()
	t.Cleanup(func() {
		regMu.Lock()
		registry = saved
		regMu.Unlock()
	})
}

func TestSelect(t *testing.T) {
	isolateRegistry(t)
	Register(Registration{Name: "test-gpu-missing", GPU: true, Order: -2, Open: func(OpenOptions) (Device, error) {
		return nil, &UnavailableError{Backend: "test-gpu-missing", Reason: "libfoo.so.1 not found"}
	}})
	if _, _, err := Select("nope", OpenOptions{}); !errors.Is(err, ErrUnknownBackend) {
		t.Errorf("unknown backend: %v", err)
	}
	_, sel, err := Select("test-gpu-missing", OpenOptions{})
	var ue *UnavailableError
	if !errors.As(err, &ue) || sel.Chosen != "" {
		t.Errorf("explicit unavailable backend: %v %+v", err, sel)
	}
	// With no simulator registered, auto fails and says why.
	if _, sel, err := Select("auto", OpenOptions{}); err == nil || len(sel.Attempts) == 0 {
		t.Errorf("auto without a simulator: %v %+v", err, sel)
	}
}

func TestCallName(t *testing.T) {
	for _, tc := range []struct {
		op   string
		d    Dialect
		want string
	}{
		{"Malloc", DialectCUDA, "cuMemAlloc"},
		{"StreamQuery", DialectHIP, "hipStreamQuery"},
		{"StreamQuery", DialectCUDA, "cuStreamQuery"},
		{"StreamCreate", DialectHIP, "hipStreamCreateWithFlags"},
		{"StreamCreate", DialectCUDA, "cuStreamCreate"},
		{"EventCreate", DialectHIP, "hipEventCreateWithFlags"},
		{"EventCreate", DialectCUDA, "cuEventCreate"},
		{"HostAlloc", DialectCUDA, "cuMemHostAlloc"},
		{"HostAlloc", DialectHIP, "hipHostMalloc"},
		{"HostFree", DialectCUDA, "cuMemFreeHost"},
		{"HostRegister", DialectHIP, "hipHostRegister"},
		{"HostUnregister", DialectCUDA, "cuMemHostUnregister"},
		{"", DialectHIP, ""},
	} {
		if got := CallName(tc.op, tc.d); got != tc.want {
			t.Errorf("CallName(%q, %v) = %q, want %q", tc.op, tc.d, got, tc.want)
		}
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	isolateRegistry(t)
	b := Registration{Name: "test-twice", GPU: true, Open: func(OpenOptions) (Device, error) { return nil, errors.New("unused") }}
	Register(b)
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "registered twice: test-twice") {
			t.Fatalf("a second Register of one name: recovered %v, want a panic naming it", r)
		}
	}()
	Register(b)
}

// TestIsolateRegistry checks the helper the tests above rely on: inside a
// test the registry starts empty, and the process's comes back after.
func TestIsolateRegistry(t *testing.T) {
	before := len(Backends())
	t.Run("inner", func(t *testing.T) {
		isolateRegistry(t)
		if n := len(Backends()); n != 0 {
			t.Fatalf("an isolated registry holds %d backends", n)
		}
		Register(Registration{Name: "test-inner", Open: func(OpenOptions) (Device, error) { return nil, errors.New("unused") }})
	})
	if got := backendNames(); len(got) != before || slices.Contains(got, "test-inner") {
		t.Fatalf("after the test the registry holds %q, want the %d from before", got, before)
	}
}

func TestMapHostPages(t *testing.T) {
	b, unmap, err := MapHostPages(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1<<16 || uintptr(unsafe.Pointer(&b[0]))%4096 != 0 {
		t.Fatalf("%d bytes at %p: want 65536, page-aligned", len(b), &b[0])
	}
	b[0], b[len(b)-1] = 1, 2
	if err := unmap(); err != nil {
		t.Fatal(err)
	}
}
