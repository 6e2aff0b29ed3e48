package streamtest

import (
	"maps"
	"sync"
	"syscall"
	"testing"
	"time"

	"miotool/internal/hip"
)

// Device wraps a device, counts every runtime call by its neutral name
// (e.g. "EventQuery"), logs capture-mode exchanges by OS thread, and can
// refuse to queue host functions. Safe for concurrent use.
//
// It holds the device in a named field rather than embedding it, so that a
// method added to hip.Device cannot pass through uncounted: the build fails
// until Device spells it out.
type Device struct {
	dev hip.Device

	mu            sync.Mutex
	calls         map[string]int         // calls begun
	returns       map[string]int         // calls returned
	byThread      map[int]map[string]int // calls begun, by OS thread id
	changed       chan struct{}
	failHostFuncs int
	holdEnqueue   *enqueueHold
	watchers      map[string][]chan struct{}
	modes         []ModeChange
}

// enqueueHold keeps the next LaunchHostFunc inside the runtime call.
type enqueueHold struct {
	entered, release chan struct{}
}

// ModeChange is one ThreadExchangeCaptureMode call.
type ModeChange struct {
	TID        int
	Mode, Prev hip.CaptureMode
}

var _ hip.Device = (*Device)(nil)

// Wrap wraps d.
func Wrap(d hip.Device) *Device {
	return &Device{dev: d, calls: map[string]int{}, returns: map[string]int{}, changed: make(chan struct{})}
}

// track counts a call of op as it begins; the returned func counts its
// return.
func (d *Device) track(op string) func() {
	tid := syscall.Gettid()
	d.mu.Lock()
	if d.byThread == nil {
		d.byThread = map[int]map[string]int{}
	}
	if d.byThread[tid] == nil {
		d.byThread[tid] = map[string]int{}
	}
	d.byThread[tid][op]++
	for _, w := range d.watchers[op] {
		close(w)
	}
	delete(d.watchers, op)
	d.mu.Unlock()
	d.bump(d.calls, op)
	return func() { d.bump(d.returns, op) }
}

func (d *Device) bump(m map[string]int, op string) {
	d.mu.Lock()
	m[op]++
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

// Begins returns a channel closed when the next call of op begins.
func (d *Device) Begins(op string) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watchers == nil {
		d.watchers = map[string][]chan struct{}{}
	}
	ch := make(chan struct{})
	d.watchers[op] = append(d.watchers[op], ch)
	return ch
}

// HoldHostFuncEnqueue makes the next LaunchHostFunc wait inside the
// runtime call, before anything is queued: entered closes when it is held
// there, and release (idempotent, called when the test ends) lets it queue.
func (d *Device) HoldHostFuncEnqueue(t testing.TB) (entered <-chan struct{}, release func()) {
	h := &enqueueHold{entered: make(chan struct{}), release: make(chan struct{})}
	d.mu.Lock()
	d.holdEnqueue = h
	d.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	return h.entered, release
}

// Calls is the number of calls of op begun since the last Reset.
func (d *Device) Calls(op string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[op]
}

// Snapshot is every op's count since the last Reset.
func (d *Device) Snapshot() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.calls)
}

// SnapshotOn is every op's count since the last Reset made on one OS
// thread, so that a test can tell a launch path's calls from those of a
// tracker's own thread.
func (d *Device) SnapshotOn(tid int) map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.byThread[tid])
}

// Reset zeroes the counts.
func (d *Device) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.calls)
	clear(d.returns)
	clear(d.byThread)
}

// WaitCalls waits until at least n calls of op have begun since the last
// Reset (a call that blocks counts), failing the test after Limit.
func (d *Device) WaitCalls(t testing.TB, op string, n int) {
	t.Helper()
	d.wait(t, d.calls, "begun", op, n)
}

// WaitReturns waits until at least n calls of op have returned since the
// last Reset, failing the test after Limit.
func (d *Device) WaitReturns(t testing.TB, op string, n int) {
	t.Helper()
	d.wait(t, d.returns, "returned", op, n)
}

func (d *Device) wait(t testing.TB, m map[string]int, what, op string, n int) {
	t.Helper()
	timer := time.NewTimer(Limit)
	defer timer.Stop()
	for {
		d.mu.Lock()
		got, ch := m[op], d.changed
		d.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%d calls of %s %s within %v, want at least %d", got, op, what, Limit, n)
		}
	}
}

// FailHostFuncs makes the next n LaunchHostFunc calls fail with
// ErrInvalidValue without queuing anything.
func (d *Device) FailHostFuncs(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failHostFuncs = n
}

// ModeChanges lists the capture-mode exchanges made so far, in order.
func (d *Device) ModeChanges() []ModeChange {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]ModeChange(nil), d.modes...)
}

func (d *Device) Props() hip.Props {
	defer d.track("Props")()
	return d.dev.Props()
}
func (d *Device) Dialect() hip.Dialect {
	defer d.track("Dialect")()
	return d.dev.Dialect()
}

func (d *Device) StreamCreate(f hip.StreamFlags) (hip.Stream, error) {
	defer d.track("StreamCreate")()
	return d.dev.StreamCreate(f)
}

func (d *Device) StreamDestroy(s hip.Stream) error {
	defer d.track("StreamDestroy")()
	return d.dev.StreamDestroy(s)
}

func (d *Device) StreamQuery(s hip.Stream) error {
	defer d.track("StreamQuery")()
	return d.dev.StreamQuery(s)
}

func (d *Device) StreamSynchronize(s hip.Stream) error {
	defer d.track("StreamSynchronize")()
	return d.dev.StreamSynchronize(s)
}

func (d *Device) StreamWaitEvent(s hip.Stream, e hip.Event) error {
	defer d.track("StreamWaitEvent")()
	return d.dev.StreamWaitEvent(s, e)
}

func (d *Device) StreamIsCapturing(s hip.Stream) (hip.CaptureStatus, error) {
	defer d.track("StreamIsCapturing")()
	return d.dev.StreamIsCapturing(s)
}

func (d *Device) EventCreate(f hip.EventFlags) (hip.Event, error) {
	defer d.track("EventCreate")()
	return d.dev.EventCreate(f)
}

func (d *Device) EventRecord(e hip.Event, s hip.Stream) error {
	defer d.track("EventRecord")()
	return d.dev.EventRecord(e, s)
}

func (d *Device) EventQuery(e hip.Event) error {
	defer d.track("EventQuery")()
	return d.dev.EventQuery(e)
}

func (d *Device) EventSynchronize(e hip.Event) error {
	defer d.track("EventSynchronize")()
	return d.dev.EventSynchronize(e)
}

func (d *Device) EventElapsedTime(a, b hip.Event) (float32, error) {
	defer d.track("EventElapsedTime")()
	return d.dev.EventElapsedTime(a, b)
}

func (d *Device) EventDestroy(e hip.Event) error {
	defer d.track("EventDestroy")()
	return d.dev.EventDestroy(e)
}

func (d *Device) Malloc(n int) (hip.DevPtr, error) {
	defer d.track("Malloc")()
	return d.dev.Malloc(n)
}

func (d *Device) Free(p hip.DevPtr) error {
	defer d.track("Free")()
	return d.dev.Free(p)
}

func (d *Device) HostAlloc(n int) ([]byte, error) {
	defer d.track("HostAlloc")()
	return d.dev.HostAlloc(n)
}

func (d *Device) HostFree(b []byte) error {
	defer d.track("HostFree")()
	return d.dev.HostFree(b)
}

func (d *Device) HostRegister(b []byte) error {
	defer d.track("HostRegister")()
	return d.dev.HostRegister(b)
}

func (d *Device) HostUnregister(b []byte) error {
	defer d.track("HostUnregister")()
	return d.dev.HostUnregister(b)
}

func (d *Device) Memset(p hip.DevPtr, v byte, n int) error {
	defer d.track("Memset")()
	return d.dev.Memset(p, v, n)
}

func (d *Device) MemsetAsync(p hip.DevPtr, v byte, n int, s hip.Stream) error {
	defer d.track("MemsetAsync")()
	return d.dev.MemsetAsync(p, v, n, s)
}

func (d *Device) MemcpyHtoD(dst hip.DevPtr, src []byte) error {
	defer d.track("MemcpyHtoD")()
	return d.dev.MemcpyHtoD(dst, src)
}

func (d *Device) MemcpyDtoH(dst []byte, src hip.DevPtr) error {
	defer d.track("MemcpyDtoH")()
	return d.dev.MemcpyDtoH(dst, src)
}

func (d *Device) MemcpyHtoDAsync(dst hip.DevPtr, src []byte, s hip.Stream) error {
	defer d.track("MemcpyHtoDAsync")()
	return d.dev.MemcpyHtoDAsync(dst, src, s)
}

func (d *Device) MemcpyDtoHAsync(dst []byte, src hip.DevPtr, s hip.Stream) error {
	defer d.track("MemcpyDtoHAsync")()
	return d.dev.MemcpyDtoHAsync(dst, src, s)
}

func (d *Device) MemcpyDtoDAsync(dst, src hip.DevPtr, n int, s hip.Stream) error {
	defer d.track("MemcpyDtoDAsync")()
	return d.dev.MemcpyDtoDAsync(dst, src, n, s)
}

func (d *Device) ModuleLoad(src *hip.KernelSource) (hip.Module, error) {
	defer d.track("ModuleLoad")()
	return d.dev.ModuleLoad(src)
}

func (d *Device) ModuleGetFunction(m hip.Module, name string) (hip.Function, error) {
	defer d.track("ModuleGetFunction")()
	return d.dev.ModuleGetFunction(m, name)
}

func (d *Device) ModuleUnload(m hip.Module) error {
	defer d.track("ModuleUnload")()
	return d.dev.ModuleUnload(m)
}

func (d *Device) LaunchKernel(f hip.Function, grid, block hip.Dim3, shared uint32, s hip.Stream, args ...hip.KernelArg) error {
	defer d.track("LaunchKernel")()
	return d.dev.LaunchKernel(f, grid, block, shared, s, args...)
}

// LaunchHostFunc fails without queuing while FailHostFuncs has calls left.
func (d *Device) LaunchHostFunc(s hip.Stream, fn func()) error {
	defer d.track("LaunchHostFunc")()
	d.mu.Lock()
	fail := d.failHostFuncs > 0
	if fail {
		d.failHostFuncs--
	}
	hold := d.holdEnqueue
	d.holdEnqueue = nil
	d.mu.Unlock()
	if hold != nil {
		close(hold.entered)
		<-hold.release
	}
	if fail {
		return &hip.Error{Op: "LaunchHostFunc", Code: hip.ErrInvalidValue, Dialect: d.dev.Dialect(), Detail: "refused by the test wrapper"}
	}
	return d.dev.LaunchHostFunc(s, fn)
}

func (d *Device) StreamBeginCapture(s hip.Stream, m hip.CaptureMode) error {
	defer d.track("StreamBeginCapture")()
	return d.dev.StreamBeginCapture(s, m)
}

func (d *Device) StreamEndCapture(s hip.Stream) (hip.Graph, error) {
	defer d.track("StreamEndCapture")()
	return d.dev.StreamEndCapture(s)
}

// ThreadExchangeCaptureMode also logs the exchange with the caller's OS
// thread id. The caller is locked to its thread, so the id is the thread
// whose mode changes.
func (d *Device) ThreadExchangeCaptureMode(m hip.CaptureMode) (hip.CaptureMode, error) {
	defer d.track("ThreadExchangeCaptureMode")()
	prev, err := d.dev.ThreadExchangeCaptureMode(m)
	if err == nil {
		d.mu.Lock()
		d.modes = append(d.modes, ModeChange{TID: syscall.Gettid(), Mode: m, Prev: prev})
		d.mu.Unlock()
	}
	return prev, err
}

func (d *Device) GraphInstantiate(g hip.Graph) (hip.GraphExec, error) {
	defer d.track("GraphInstantiate")()
	return d.dev.GraphInstantiate(g)
}

func (d *Device) GraphLaunch(ge hip.GraphExec, s hip.Stream) error {
	defer d.track("GraphLaunch")()
	return d.dev.GraphLaunch(ge, s)
}

func (d *Device) GraphExecDestroy(ge hip.GraphExec) error {
	defer d.track("GraphExecDestroy")()
	return d.dev.GraphExecDestroy(ge)
}

func (d *Device) GraphDestroy(g hip.Graph) error {
	defer d.track("GraphDestroy")()
	return d.dev.GraphDestroy(g)
}

func (d *Device) DeviceSynchronize() error {
	defer d.track("DeviceSynchronize")()
	return d.dev.DeviceSynchronize()
}

func (d *Device) Libraries() []hip.Library {
	defer d.track("Libraries")()
	return d.dev.Libraries()
}

func (d *Device) Close() error {
	defer d.track("Close")()
	return d.dev.Close()
}
