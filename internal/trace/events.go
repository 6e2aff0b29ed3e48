package trace

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"miotool/internal/hip"
)

// Kinds of observer records (observer/observer.c writes them).
const (
	kindHello  = "hello"  // a process image loaded the observer: ppid, executable
	kindFork   = "fork"   // a process forked: the child, as itself
	kindNote   = "note"   // the observer about itself: topic, status, text
	kindDevice = "device" // a device a capture began on, first named in this process: runtime, ordinal, name, arch, compute units
	kindBegin  = "begin"  // a capture began or failed to: runtime, call, stream, mode, result, device ordinal, callers
	kindEnd    = "end"    // a capture ended or failed to: runtime, call, stream, result, callers
	kindGone   = "gone"   // a capturing stream was destroyed: runtime, stream
	kindCall   = "call"   // a call during a capture: runtime, call, stream, event, result, thread mode[, callers]
	kindEOF    = "eof"    // miotool's own end-of-events marker
)

// RawFrame is one native caller as the observer saw it: the shared object
// (or executable), the dynamic symbol dladdr named ("" when none; C++ names
// mangled) and the return address's offset from where the object is mapped.
type RawFrame struct {
	Module string
	Symbol string
	Offset uint64
}

// Event is one observer record.
type Event struct {
	Kind     string
	PID, TID int
	Time     int64 // CLOCK_MONOTONIC nanoseconds, comparable across processes
	API      hip.Dialect
	Name     string // the runtime's own name of the call, e.g. cuStreamBeginCapture_v2
	Stream   uint64 // 0: the call names none
	Event    uint64 // 0: the call names none
	// Mode is the capture's mode for begin, the calling thread's
	// interaction mode for call.
	Mode   hip.CaptureMode
	Result hip.Code
	// Callers, innermost first, and how many more did not fit the record.
	Callers []RawFrame
	Omitted int
	// Device is the device ordinal of begin and device records (-1: the
	// runtime did not say); device records describe it.
	Device       int
	DeviceName   string
	Arch         string
	ComputeUnits int
	// hello and fork.
	PPID int
	Exe  string
	// note.
	Topic, Status, Text string

	// Python frames, thread names, graphs and crashes.
	ThreadName string  // the OS name of the calling thread (/proc/self/task/<tid>/comm): on begin, end, crash and every call record that carries callers
	Python     PyStack // the calling thread's Python stack: on begin, end, crash and every call record that carries callers (refusals and hazard candidates)
	Graph      uint64  // end: the graph the capture produced (0: none); graph records: the graph
	Exec       uint64  // graph records: the executable graph instantiated or launched
	Nodes      int     // end: how many nodes the captured graph has (-1: unknown); graph records of instantiation: the graph's node count (-1: unknown)
	Outside    bool    // call records of calls that enqueue work (kernel launches, async copies and memsets, host functions, graph launches) made while a capture is active: the stream the call named was not capturing (work that escaped every capture)
	// crash records:
	Signal     int    // the signal number
	SignalCode int    // si_code
	Addr       uint64 // si_addr for SIGSEGV/SIGBUS/SIGILL/SIGFPE
	Run        string // the run token the process (or its ancestor) was started with (MIOTOOL_CRASH_RUN), "" when none
}

var errNotRecord = errors.New("not an observer record")

// ParseEvent reads one record.
func ParseEvent(line []byte) (Event, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	f := strings.Split(string(line), "\t")
	if len(f) < 5 || f[0] != "MT1" {
		return Event{}, errNotRecord
	}
	e := Event{Kind: f[1]}
	var err error
	num := func(s string) int {
		n, perr := strconv.Atoi(s)
		if perr != nil && err == nil {
			err = fmt.Errorf("field %q: want a number", s)
		}
		return n
	}
	hex := func(s string) uint64 {
		n, perr := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("field %q: want a hexadecimal number", s)
		}
		return n
	}
	e.PID, e.TID = num(f[2]), num(f[3])
	t, perr := strconv.ParseInt(f[4], 10, 64)
	if perr != nil {
		return e, fmt.Errorf("%s record: time %q", e.Kind, f[4])
	}
	e.Time = t
	rest := f[5:]
	need := func(n int) error {
		if len(rest) < n {
			return fmt.Errorf("%s record has %d fields, want at least %d", e.Kind, len(rest)+5, n+5)
		}
		return nil
	}
	api := func(s string) hip.Dialect {
		switch s {
		case "cuda":
			return hip.DialectCUDA
		case "hip":
			return hip.DialectHIP
		}
		if err == nil {
			err = fmt.Errorf("runtime %q: want cuda or hip", s)
		}
		return ""
	}
	fixed := 0
	switch e.Kind {
	case kindHello, kindFork:
		if err := need(2); err != nil {
			return e, err
		}
		e.PPID, e.Exe = num(rest[0]), rest[1]
		return e, err
	case kindNote:
		if err := need(3); err != nil {
			return e, err
		}
		e.Topic, e.Status, e.Text = rest[0], rest[1], rest[2]
		return e, nil
	case kindEOF:
		if len(rest) > 0 {
			e.Text = rest[0]
		}
		return e, nil
	case kindGone:
		if err := need(2); err != nil {
			return e, err
		}
		e.API, e.Stream = api(rest[0]), hex(rest[1])
		return e, err
	case kindDevice:
		if err := need(5); err != nil {
			return e, err
		}
		e.API, e.Device, e.DeviceName, e.Arch, e.ComputeUnits = api(rest[0]), num(rest[1]), rest[2], rest[3], num(rest[4])
		return e, err
	case kindBegin:
		if err := need(6); err != nil {
			return e, err
		}
		e.API, e.Name, e.Stream = api(rest[0]), rest[1], hex(rest[2])
		e.Mode, e.Result, e.Device = hip.CaptureMode(num(rest[3])), hip.Code(num(rest[4])), num(rest[5])
		fixed = 6
	case kindEnd:
		if err := need(4); err != nil {
			return e, err
		}
		e.API, e.Name, e.Stream, e.Result = api(rest[0]), rest[1], hex(rest[2]), hip.Code(num(rest[3]))
		fixed = 4
	case kindCall:
		if err := need(6); err != nil {
			return e, err
		}
		e.API, e.Name, e.Stream, e.Event = api(rest[0]), rest[1], hex(rest[2]), hex(rest[3])
		e.Result, e.Mode = hip.Code(num(rest[4])), hip.CaptureMode(num(rest[5]))
		fixed = 6
	default:
		return e, fmt.Errorf("unknown record kind %q", e.Kind)
	}
	frames := rest[fixed:]
	if n := len(frames); n > 0 && n%3 == 1 && strings.HasPrefix(frames[n-1], "+") {
		e.Omitted = num(frames[n-1][1:])
		frames = frames[:n-1]
	}
	if len(frames)%3 != 0 {
		return e, fmt.Errorf("%s record: %d caller fields, want (module, symbol, offset) triples", e.Kind, len(frames))
	}
	for i := 0; i < len(frames); i += 3 {
		e.Callers = append(e.Callers, RawFrame{Module: frames[i], Symbol: frames[i+1], Offset: hex(frames[i+2])})
	}
	if e.Mode < 0 || int(e.Mode) >= len(hip.CaptureModes) {
		return e, fmt.Errorf("%s record: mode %d", e.Kind, int(e.Mode))
	}
	return e, err
}

// BaseName is a call's name without the ABI suffixes the runtimes add
// (_v2, _v3, _v4, _ptsz, _ptds): cuCtxSynchronize_v2 is cuCtxSynchronize.
func BaseName(raw string) string {
	for {
		trimmed := raw
		for _, s := range []string{"_v2", "_v3", "_v4", "_ptsz", "_ptds"} {
			trimmed = strings.TrimSuffix(trimmed, s)
		}
		if trimmed == raw || trimmed == "" {
			return raw
		}
		raw = trimmed
	}
}

// Record kinds of graphs and crashes.
const (
	kindGraph = "graph" // a graph was instantiated or launched: runtime, call, graph, exec, stream, result, nodes
	kindCrash = "crash" // the crash handler: signal, code, address, thread name, callers, Python stack, run token
)

// PyFrame is one Python frame: the code's file, the line being run, the function's
// qualified name where the interpreter has one (co_qualname on 3.11+), else co_name.
type PyFrame struct {
	File     string
	Line     int // 0: unknown
	Function string
}

// PyState says what the observer could read of the calling thread's Python stack.
type PyState string

// What the observer could read of a thread's Python stack.
const (
	PyNone        PyState = ""            // not collected (a record kind or path that never collects)
	PyNative      PyState = "native"      // not a Python thread: no thread state (NCCL watchdog, driver threads)
	PyFrames      PyState = "frames"      // frames read (Frames may still be empty: a thread in C before any Python frame)
	PyUnavailable PyState = "unavailable" // a Python thread whose frames could not be read: Why says why
)

// PyStack is the calling thread's Python stack as the observer read it.
type PyStack struct {
	State      PyState
	Why        string    // for PyUnavailable, e.g. "GIL held by another thread", "CPython 3.9: not supported"
	ThreadName string    // the thread's threading name (threading.current_thread().name) when it could be read safely; "" otherwise
	Version    string    // the interpreter's version, e.g. "3.12.1", when known
	Frames     []PyFrame // innermost first
	Omitted    int       // frames that did not fit
}
