package rules_test

import (
	"sync"
	"syscall"
	"unsafe"

	"miotool/internal/hip"
)

// call is one runtime call the fake saw while a capture was active (other
// than the set-up launches, records and mode switches).
type call struct {
	op     string // neutral call name
	target string // "A"/"B" for streams, "evA"/"evB" for events, "" otherwise
	tid    int
	mode   hip.CaptureMode // the calling thread's interaction mode
}

// fakeDevice is a permissive hip.Device: every call succeeds, nothing runs,
// queries answer success. It records the calls made during a capture and
// lets tests refuse, fail or block chosen calls.
type fakeDevice struct {
	mu        sync.Mutex
	next      uintptr
	modes     map[int]hip.CaptureMode // per OS thread
	capturing map[hip.Stream]bool
	inCapture map[hip.Event]bool // recorded while its stream captured
	flags     map[hip.Stream]hip.StreamFlags
	beginTid  int
	// beginFlags are the flags of the last stream a capture began on.
	beginFlags hip.StreamFlags
	during     []call
	live       map[uintptr]string // what exists, for the leak check

	// refuse, when set, may answer a recorded call with a code.
	refuse func(c call, beginTid int) hip.Code
	// failStreamCreate makes stream creation fail with ErrOutOfMemory.
	failStreamCreate bool
	// failUnregister makes HostUnregister fail, capture or not.
	failUnregister bool
	// block, when set, makes DeviceSynchronize wait until it is closed.
	block chan struct{}
}

func newFake() *fakeDevice {
	return &fakeDevice{
		next:      uintptr(hip.StreamLegacy), // no handle it makes is the legacy stream's
		modes:     map[int]hip.CaptureMode{},
		capturing: map[hip.Stream]bool{},
		inCapture: map[hip.Event]bool{},
		flags:     map[hip.Stream]hip.StreamFlags{},
		live:      map[uintptr]string{},
	}
}

func (f *fakeDevice) handle(kind string) uintptr {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.live[f.next] = kind
	return f.next
}

func (f *fakeDevice) release(h uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.live[h]; !ok {
		return &hip.Error{Op: "release", Code: hip.ErrInvalidHandle, Dialect: hip.DialectCUDA}
	}
	delete(f.live, h)
	return nil
}

// record notes a call made while a capture is active and returns the code
// the test wants for it.
func (f *fakeDevice) record(op, target string) error {
	f.mu.Lock()
	active := false
	for _, on := range f.capturing {
		active = active || on
	}
	if !active {
		f.mu.Unlock()
		return nil
	}
	tid := syscall.Gettid()
	c := call{op: op, target: target, tid: tid, mode: f.modes[tid]}
	f.during = append(f.during, c)
	refuse, begin := f.refuse, f.beginTid
	f.mu.Unlock()
	if refuse != nil {
		return hip.NewError(hip.DialectCUDA, op, refuse(c, begin))
	}
	return nil
}

func (f *fakeDevice) streamName(s hip.Stream) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.capturing[s] {
		return "A"
	}
	return "B"
}

func (f *fakeDevice) eventName(e hip.Event) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inCapture[e] {
		return "evA"
	}
	return "evB"
}

func (f *fakeDevice) calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.during...)
}

func (f *fakeDevice) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.during = nil
}

func (f *fakeDevice) Props() hip.Props {
	return hip.Props{Backend: "fake", Name: "fake device", Arch: "fake", ComputeUnits: 1}
}
func (f *fakeDevice) Dialect() hip.Dialect { return hip.DialectCUDA }

func (f *fakeDevice) StreamCreate(flags hip.StreamFlags) (hip.Stream, error) {
	if f.failStreamCreate {
		return 0, &hip.Error{Op: "StreamCreate", Code: hip.ErrOutOfMemory, Dialect: hip.DialectCUDA}
	}
	s := hip.Stream(f.handle("stream"))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flags[s] = flags
	return s, nil
}

// captureFlags are the flags of the stream the last capture began on.
func (f *fakeDevice) captureFlags() hip.StreamFlags {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.beginFlags
}
func (f *fakeDevice) StreamDestroy(s hip.Stream) error { return f.release(uintptr(s)) }
func (f *fakeDevice) StreamQuery(s hip.Stream) error {
	return f.record("StreamQuery", f.streamName(s))
}
func (f *fakeDevice) StreamSynchronize(s hip.Stream) error {
	return f.record("StreamSynchronize", f.streamName(s))
}
func (f *fakeDevice) StreamWaitEvent(hip.Stream, hip.Event) error { return nil }
func (f *fakeDevice) StreamIsCapturing(s hip.Stream) (hip.CaptureStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.capturing[s] {
		return hip.CaptureStatusActive, nil
	}
	return hip.CaptureStatusNone, nil
}

func (f *fakeDevice) EventCreate(hip.EventFlags) (hip.Event, error) {
	return hip.Event(f.handle("event")), nil
}
func (f *fakeDevice) EventRecord(e hip.Event, s hip.Stream) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inCapture[e] = f.capturing[s]
	return nil
}
func (f *fakeDevice) EventQuery(e hip.Event) error { return f.record("EventQuery", f.eventName(e)) }
func (f *fakeDevice) EventSynchronize(e hip.Event) error {
	return f.record("EventSynchronize", f.eventName(e))
}
func (f *fakeDevice) EventElapsedTime(hip.Event, hip.Event) (float32, error) { return 0, nil }
func (f *fakeDevice) EventDestroy(e hip.Event) error                         { return f.release(uintptr(e)) }

func (f *fakeDevice) Malloc(int) (hip.DevPtr, error) {
	if err := f.record("Malloc", ""); err != nil {
		return 0, err
	}
	return hip.DevPtr(f.handle("buffer")), nil
}
func (f *fakeDevice) Free(p hip.DevPtr) error {
	if err := f.record("MemFree", ""); err != nil {
		return err
	}
	return f.release(uintptr(p))
}
func (f *fakeDevice) HostAlloc(n int) ([]byte, error) {
	if err := f.record("HostAlloc", ""); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	f.track(b, "pinned host memory")
	return b, nil
}
func (f *fakeDevice) HostFree(b []byte) error {
	if err := f.record("HostFree", ""); err != nil {
		return err
	}
	return f.release(hostKey(b))
}
func (f *fakeDevice) HostRegister(b []byte) error {
	if err := f.record("HostRegister", ""); err != nil {
		return err
	}
	f.track(b, "host registration")
	return nil
}
func (f *fakeDevice) HostUnregister(b []byte) error {
	if err := f.record("HostUnregister", ""); err != nil {
		return err
	}
	if f.failUnregister {
		return &hip.Error{Op: "HostUnregister", Code: hip.ErrHostMemoryNotRegistered, Dialect: hip.DialectCUDA}
	}
	return f.release(hostKey(b))
}

// hostKey names host memory in the leak check by its address.
func hostKey(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func (f *fakeDevice) track(b []byte, kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live[hostKey(b)] = kind
}

func (f *fakeDevice) Memset(hip.DevPtr, byte, int) error { return f.record("MemsetD8", "") }
func (f *fakeDevice) MemsetAsync(hip.DevPtr, byte, int, hip.Stream) error {
	return nil
}
func (f *fakeDevice) MemcpyHtoD(hip.DevPtr, []byte) error { return f.record("MemcpyHtoD", "") }
func (f *fakeDevice) MemcpyDtoH([]byte, hip.DevPtr) error { return f.record("MemcpyDtoH", "") }
func (f *fakeDevice) MemcpyHtoDAsync(hip.DevPtr, []byte, hip.Stream) error {
	return nil
}
func (f *fakeDevice) MemcpyDtoHAsync([]byte, hip.DevPtr, hip.Stream) error {
	return nil
}
func (f *fakeDevice) MemcpyDtoDAsync(hip.DevPtr, hip.DevPtr, int, hip.Stream) error {
	return nil
}

func (f *fakeDevice) ModuleLoad(*hip.KernelSource) (hip.Module, error) {
	return hip.Module(f.handle("module")), nil
}
func (f *fakeDevice) ModuleGetFunction(hip.Module, string) (hip.Function, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++ // functions belong to their module: nothing to release
	return hip.Function(f.next), nil
}
func (f *fakeDevice) ModuleUnload(m hip.Module) error {
	if err := f.record("ModuleUnload", ""); err != nil {
		return err
	}
	return f.release(uintptr(m))
}
func (f *fakeDevice) LaunchKernel(_ hip.Function, _, _ hip.Dim3, _ uint32, s hip.Stream, _ ...hip.KernelArg) error {
	if s == hip.StreamLegacy {
		return f.record("LaunchKernel", "legacy")
	}
	return nil
}
func (f *fakeDevice) LaunchHostFunc(hip.Stream, func()) error { return nil }

func (f *fakeDevice) StreamBeginCapture(s hip.Stream, _ hip.CaptureMode) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.capturing[s] = true
	f.beginTid = syscall.Gettid()
	f.beginFlags = f.flags[s]
	return nil
}
func (f *fakeDevice) StreamEndCapture(s hip.Stream) (hip.Graph, error) {
	if err := f.record("StreamEndCapture", "A"); err != nil {
		return 0, err
	}
	f.mu.Lock()
	was := f.capturing[s]
	f.capturing[s] = false
	f.mu.Unlock()
	if !was {
		return 0, &hip.Error{Op: "StreamEndCapture", Code: hip.ErrIllegalState, Dialect: hip.DialectCUDA}
	}
	return hip.Graph(f.handle("graph")), nil
}
func (f *fakeDevice) ThreadExchangeCaptureMode(mode hip.CaptureMode) (hip.CaptureMode, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tid := syscall.Gettid()
	prev := f.modes[tid]
	f.modes[tid] = mode
	return prev, nil
}
func (f *fakeDevice) GraphInstantiate(hip.Graph) (hip.GraphExec, error) { return 1, nil }
func (f *fakeDevice) GraphLaunch(hip.GraphExec, hip.Stream) error       { return nil }
func (f *fakeDevice) GraphExecDestroy(hip.GraphExec) error              { return nil }
func (f *fakeDevice) GraphDestroy(g hip.Graph) error                    { return f.release(uintptr(g)) }

func (f *fakeDevice) DeviceSynchronize() error {
	err := f.record("DeviceSynchronize", "")
	if f.block != nil {
		<-f.block
	}
	return err
}

func (f *fakeDevice) Libraries() []hip.Library { return nil }
func (f *fakeDevice) Close() error             { return nil }

// leaked lists what was created and never released.
func (f *fakeDevice) leaked() map[uintptr]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[uintptr]string{}
	for h, k := range f.live {
		out[h] = k
	}
	return out
}

// nonGlobalThreads lists threads left in a mode other than global.
func (f *fakeDevice) nonGlobalThreads() map[int]hip.CaptureMode {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int]hip.CaptureMode{}
	for tid, m := range f.modes {
		if m != hip.CaptureModeGlobal {
			out[tid] = m
		}
	}
	return out
}

var _ hip.Device = (*fakeDevice)(nil)
