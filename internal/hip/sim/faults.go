package sim

import (
	"fmt"
	"sync"
	"time"

	"miotool/internal/hip"
)

// Faults injects failures into one device, for tests of recovery paths.
// Every fault shows through the hip.Device interface. Safe for concurrent
// use.
type Faults struct {
	mu sync.Mutex

	queryFails int
	queryCode  hip.Code
	freeFails  int
	freeCode   hip.Code
	drops      int
	delay      time.Duration
	holds      map[uint64]chan struct{}
	nextHold   uint64
	calls      map[string]*callFault // by op: EventCreate, EventRecord, StreamCreate, Malloc
}

// callFault fails the next n calls of one op that match.
type callFault struct {
	n     int
	code  hip.Code
	match func(hip.Stream) bool // nil: every call
}

func newFaults() *Faults {
	return &Faults{holds: make(map[uint64]chan struct{}), calls: make(map[string]*callFault)}
}

func (f *Faults) failCalls(op string, n int, code hip.Code, match func(hip.Stream) bool) error {
	if err := checkFault(op, n, code); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n == 0 {
		delete(f.calls, op)
		return nil
	}
	f.calls[op] = &callFault{n: n, code: code, match: match}
	return nil
}

// FailEventCreates makes the next n EventCreate calls fail with code and
// create nothing. n = 0 cancels.
func (f *Faults) FailEventCreates(n int, code hip.Code) error {
	return f.failCalls("EventCreate", n, code, nil)
}

// FailEventRecords makes the next n EventRecord calls that match fail with
// code and queue nothing. match sees the stream the record is for (it runs
// under the injector's lock: it must not call the injector); nil matches
// every call. n = 0 cancels.
func (f *Faults) FailEventRecords(n int, code hip.Code, match func(hip.Stream) bool) error {
	return f.failCalls("EventRecord", n, code, match)
}

// FailStreamCreates makes the next n StreamCreate calls fail with code and
// create nothing. n = 0 cancels.
func (f *Faults) FailStreamCreates(n int, code hip.Code) error {
	return f.failCalls("StreamCreate", n, code, nil)
}

// FailMallocs makes the next n Malloc calls fail with code and allocate
// nothing. n = 0 cancels.
func (f *Faults) FailMallocs(n int, code hip.Code) error {
	return f.failCalls("Malloc", n, code, nil)
}

// takeCallFailure consumes one injected failure of op for a call on s.
func (f *Faults) takeCallFailure(op string, s hip.Stream) (hip.Code, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls[op]
	if c == nil || (c.match != nil && !c.match(s)) {
		return 0, false
	}
	if c.n--; c.n == 0 {
		delete(f.calls, op)
	}
	return c.code, true
}

// injectedCallFailure applies FailEventCreates, FailEventRecords,
// FailStreamCreates and FailMallocs to one call.
func (d *Device) injectedCallFailure(op string, s hip.Stream) error {
	if c, ok := d.faults.takeCallFailure(op, s); ok {
		return d.newErr(op, c, "injected "+op+" failure")
	}
	return nil
}

func checkFault(field string, n int, code hip.Code) error {
	if n < 0 {
		return fmt.Errorf("sim faults: %s count %d is negative", field, n)
	}
	if code == hip.Success {
		return fmt.Errorf("sim faults: %s code must be a failure, not %d", field, int(code))
	}
	return nil
}

// FailQueries makes the next n StreamQuery/EventQuery calls fail with code;
// after the n-th, code becomes the device's sticky error, returned by
// every later query, synchronize and work submission (as after a real
// fault). n = 0 cancels a pending injection.
func (f *Faults) FailQueries(n int, code hip.Code) error {
	if err := checkFault("FailQueries", n, code); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queryFails, f.queryCode = n, code
	return nil
}

// FailFrees makes the next n frees fail with code; the memory stays
// allocated and a later free may succeed. n = 0 cancels.
func (f *Faults) FailFrees(n int, code hip.Code) error {
	if err := checkFault("FailFrees", n, code); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.freeFails, f.freeCode = n, code
	return nil
}

// DropHostFuncs makes the next n host functions vanish: they are never
// called and their streams proceed as if they had run. n = 0 cancels.
func (f *Faults) DropHostFuncs(n int) error {
	if n < 0 {
		return fmt.Errorf("sim faults: DropHostFuncs count %d is negative", n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drops = n
	return nil
}

// DelayHostFuncs delays every later host function by d before it is
// called (the callback thread is late); 0 switches the delay off.
func (f *Faults) DelayHostFuncs(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("sim faults: DelayHostFuncs duration %v is negative", d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
	return nil
}

// HoldHostFuncs closes a gate in front of host functions: the callback
// goroutine waits at it, holding its stream, until release is called.
// Release is idempotent; closing the device releases every gate.
func (f *Faults) HoldHostFuncs() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextHold++
	id, gate := f.nextHold, make(chan struct{})
	f.holds[id] = gate
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.holds[id]; ok {
			delete(f.holds, id)
			close(gate)
		}
	}
}

func (f *Faults) releaseAllHolds() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, gate := range f.holds {
		delete(f.holds, id)
		close(gate)
	}
}

// waitHostGates blocks while any hold is closed, or until stop closes.
func (f *Faults) waitHostGates(stop <-chan struct{}) {
	for {
		f.mu.Lock()
		var gate chan struct{}
		for _, g := range f.holds {
			gate = g
			break
		}
		f.mu.Unlock()
		if gate == nil {
			return
		}
		select {
		case <-gate:
		case <-stop:
			return
		}
	}
}

func (f *Faults) hostDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay
}

func (f *Faults) takeDrop() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.drops == 0 {
		return false
	}
	f.drops--
	return true
}

func (f *Faults) takeFreeFailure() (hip.Code, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.freeFails == 0 {
		return 0, false
	}
	f.freeFails--
	return f.freeCode, true
}

// takeQueryFailure consumes one injected query failure; last is true for
// the final one, after which the code turns sticky.
func (f *Faults) takeQueryFailure() (code hip.Code, last, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.queryFails == 0 {
		return 0, false, false
	}
	f.queryFails--
	return f.queryCode, f.queryFails == 0, true
}

// injectedQueryFailure applies FailQueries to one query.
func (d *Device) injectedQueryFailure(op string) error {
	code, last, ok := d.faults.takeQueryFailure()
	if !ok {
		return nil
	}
	detail := "injected query failure"
	if last {
		d.setSticky(code, detail)
	}
	return d.newErr(op, code, detail)
}
