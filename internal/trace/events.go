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
	kindBegin  = "begin"  // a capture began or failed to: runtime, call, stream, mode, result, device ordinal, sections
	kindEnd    = "end"    // a capture ended or failed to: runtime, call, stream, result, graph, nodes, sections
	kindGone   = "gone"   // a capturing stream was destroyed: runtime, stream
	kindCall   = "call"   // a call during a capture: runtime, call, stream, event, result, thread mode, outside[, sections]
	kindGraph  = "graph"  // a graph instantiated or first launched: runtime, call, graph, exec, stream, result, nodes
	kindCrash  = "crash"  // the crash handler: signal, code, address, run token, sections
	kindEOF    = "eof"    // miotool's own end-of-events marker
)

// Exported names of the record kinds a consumer tells apart.
const (
	KindCall  = kindCall
	KindGraph = kindGraph
	KindCrash = kindCrash
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
	// Observer is the observer's marker in hello and fork records
	// ("miotool-observer wire=2 source=..."): which observer loaded.
	Observer string
	// note.
	Topic, Status, Text string

	// ThreadName is the OS name of the calling thread
	// (/proc/self/task/<tid>/comm): on begin, end, crash and every call
	// record that carries callers.
	ThreadName string
	// Python is the calling thread's Python stack: on begin, end, crash
	// and every call record that carries callers, in a process that runs
	// CPython (PyNone elsewhere).
	Python PyStack
	// Graph is, for end, the graph the capture produced (0: none); for
	// graph records, the graph instantiated (or the one the launched
	// executable graph was instantiated from, 0 when unknown).
	Graph uint64
	// Exec is, for graph records, the executable graph instantiated or
	// launched.
	Exec uint64
	// Nodes is, for end, how many nodes the captured graph has (-1:
	// unknown); for graph records of an instantiation, the graph's node
	// count (-1: unknown; always -1 for a launch).
	Nodes int
	// Outside is, for call records of calls that enqueue work (kernel
	// launches, async copies and memsets, host functions, graph launches)
	// made while a capture is active and that succeeded: the stream the
	// call named was not capturing (work that escaped every capture).
	Outside bool

	// crash records:
	Signal     int    // the signal number
	SignalCode int    // si_code
	Addr       uint64 // si_addr for SIGSEGV, SIGBUS, SIGILL and SIGFPE
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
	r := &fields{kind: e.Kind, rest: f[5:]}
	e.PID, e.TID = r.num(f[2]), r.num(f[3])
	t, perr := strconv.ParseInt(f[4], 10, 64)
	if perr != nil {
		return e, fmt.Errorf("%s record: time %q", e.Kind, f[4])
	}
	e.Time = t
	done, err := parseSimple(&e, r)
	if err != nil || done {
		return e, errors.Join(err, r.err)
	}
	fixed, err := parseThreadRecord(&e, r)
	if err != nil {
		return e, err
	}
	if serr := parseSections(&e, r.rest[fixed:], r.num, r.hex); serr != nil {
		return e, serr
	}
	if e.Mode < 0 || int(e.Mode) >= len(hip.CaptureModes) {
		return e, fmt.Errorf("%s record: mode %d", e.Kind, int(e.Mode))
	}
	return e, r.err
}

// fields reads a record's fields after its header, keeping the first
// field that did not read.
type fields struct {
	kind string
	rest []string
	err  error
}

func (r *fields) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *fields) num(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		r.fail("field %q: want a number", s)
	}
	return n
}

func (r *fields) hex(s string) uint64 {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		r.fail("field %q: want a hexadecimal number", s)
	}
	return n
}

func (r *fields) flag(s string) bool {
	if s != "0" && s != "1" {
		r.fail("field %q: want 0 or 1", s)
	}
	return s == "1"
}

func (r *fields) api(s string) hip.Dialect {
	switch s {
	case "cuda":
		return hip.DialectCUDA
	case "hip":
		return hip.DialectHIP
	}
	r.fail("runtime %q: want cuda or hip", s)
	return ""
}

// need says whether the record has n fields after its header.
func (r *fields) need(n int) error {
	if len(r.rest) < n {
		return fmt.Errorf("%s record has %d fields, want at least %d", r.kind, len(r.rest)+5, n+5)
	}
	return nil
}

// parseSimple reads the records that name no thread's stack (hello, fork,
// note, eof, gone, device, graph): done says it was one of them.
func parseSimple(e *Event, r *fields) (done bool, err error) {
	rest := r.rest
	want := map[string]int{kindHello: 2, kindFork: 2, kindNote: 3, kindEOF: 0, kindGone: 2, kindDevice: 5, kindGraph: 7}
	n, ok := want[e.Kind]
	if !ok {
		return false, nil
	}
	if err := r.need(n); err != nil {
		return true, err
	}
	switch e.Kind {
	case kindHello, kindFork:
		e.PPID, e.Exe = r.num(rest[0]), rest[1]
		if len(rest) > 2 {
			e.Observer = rest[2]
		}
	case kindNote:
		e.Topic, e.Status, e.Text = rest[0], rest[1], rest[2]
	case kindEOF:
		if len(rest) > 0 {
			e.Text = rest[0]
		}
	case kindGone:
		e.API, e.Stream = r.api(rest[0]), r.hex(rest[1])
	case kindDevice:
		e.API, e.Device, e.DeviceName, e.Arch, e.ComputeUnits = r.api(rest[0]), r.num(rest[1]), rest[2], rest[3], r.num(rest[4])
	case kindGraph:
		e.API, e.Name, e.Graph, e.Exec, e.Stream = r.api(rest[0]), rest[1], r.hex(rest[2]), r.hex(rest[3]), r.hex(rest[4])
		e.Result, e.Nodes = hip.Code(r.num(rest[5])), r.num(rest[6])
	}
	return true, nil
}

// parseThreadRecord reads the fixed fields of the records that go on with
// the calling thread's sections (begin, end, call, crash) and says where
// the sections start.
func parseThreadRecord(e *Event, r *fields) (fixed int, err error) {
	rest := r.rest
	switch e.Kind {
	case kindBegin:
		if err := r.need(6); err != nil {
			return 0, err
		}
		e.API, e.Name, e.Stream = r.api(rest[0]), rest[1], r.hex(rest[2])
		e.Mode, e.Result, e.Device = hip.CaptureMode(r.num(rest[3])), hip.Code(r.num(rest[4])), r.num(rest[5])
		return 6, nil
	case kindEnd:
		if err := r.need(4); err != nil {
			return 0, err
		}
		e.API, e.Name, e.Stream, e.Result = r.api(rest[0]), rest[1], r.hex(rest[2]), hip.Code(r.num(rest[3]))
		e.Nodes = -1
		// An earlier observer's end has no graph and node count.
		if len(rest) >= 6 && strings.HasPrefix(rest[4], "0x") && isInt(rest[5]) {
			e.Graph, e.Nodes = r.hex(rest[4]), r.num(rest[5])
			return 6, nil
		}
		return 4, nil
	case kindCall:
		if err := r.need(6); err != nil {
			return 0, err
		}
		e.API, e.Name, e.Stream, e.Event = r.api(rest[0]), rest[1], r.hex(rest[2]), r.hex(rest[3])
		e.Result, e.Mode = hip.Code(r.num(rest[4])), hip.CaptureMode(r.num(rest[5]))
		// An earlier observer's call has no outside field.
		if len(rest) > 6 && !sectionTag(rest[6]) && !strings.HasPrefix(rest[6], "/") && rest[6] != "?" {
			e.Outside = r.flag(rest[6])
			return 7, nil
		}
		return 6, nil
	case kindCrash:
		if err := r.need(4); err != nil {
			return 0, err
		}
		e.Signal, e.SignalCode, e.Addr, e.Run = r.num(rest[0]), r.num(rest[1]), r.hex(rest[2]), rest[3]
		return 4, nil
	}
	return 0, fmt.Errorf("unknown record kind %q", e.Kind)
}

// parseSections reads what closes a record that names its thread, in
// this order, each optional: "t" and the thread's OS name; "p", the
// Python state, why, threading name, version, the frame count, the
// omitted count, then (file, line, function) per frame; "c" and the
// native callers to the end of the record, (module, symbol, offset)
// triples and "+N" when N more did not fit. Records an earlier observer
// saved (its callers' triples untagged, no graph or outside field) read
// as they did.
func parseSections(e *Event, f []string, num func(string) int, hex func(string) uint64) error {
	if len(f) >= 2 && f[0] == "t" {
		e.ThreadName = f[1]
		f = f[2:]
	}
	if len(f) > 0 && f[0] == "p" {
		if len(f) < 7 {
			return fmt.Errorf("%s record: Python section of %d fields, want at least 7", e.Kind, len(f))
		}
		p := PyStack{State: PyState(f[1]), Why: f[2], ThreadName: f[3], Version: f[4], Omitted: num(f[6])}
		switch p.State {
		case PyNative, PyFrames, PyUnavailable:
		default:
			return fmt.Errorf("%s record: Python state %q", e.Kind, f[1])
		}
		n := num(f[5])
		if n < 0 || len(f) < 7+3*n {
			return fmt.Errorf("%s record: %d Python frames announced, %d fields follow", e.Kind, n, len(f)-7)
		}
		for i := 0; i < n; i++ {
			fr := f[7+3*i:]
			p.Frames = append(p.Frames, PyFrame{File: fr[0], Line: num(fr[1]), Function: fr[2]})
		}
		e.Python = p
		f = f[7+3*n:]
	}
	if len(f) == 0 {
		return nil
	}
	frames := f
	switch {
	case f[0] == "c":
		frames = f[1:]
	case sectionTag(f[0]):
		return fmt.Errorf("%s record: section %q out of order (t, p, c)", e.Kind, f[0])
	case !strings.HasPrefix(f[0], "/") && f[0] != "?":
		return fmt.Errorf("%s record: field %q where a section (t, p or c) begins", e.Kind, f[0])
	}
	// Untagged triples are an earlier observer's callers.
	if n := len(frames); n > 0 && n%3 == 1 && strings.HasPrefix(frames[n-1], "+") {
		e.Omitted = num(frames[n-1][1:])
		frames = frames[:n-1]
	}
	if len(frames)%3 != 0 {
		return fmt.Errorf("%s record: %d caller fields, want (module, symbol, offset) triples", e.Kind, len(frames))
	}
	for i := 0; i < len(frames); i += 3 {
		e.Callers = append(e.Callers, RawFrame{Module: frames[i], Symbol: frames[i+1], Offset: hex(frames[i+2])})
	}
	return nil
}

func sectionTag(s string) bool { return s == "t" || s == "p" || s == "c" }

func isInt(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
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

// PyFrame is one Python frame: the code's file, the line being run, the function's
// qualified name where the interpreter has one (co_qualname: 3.11+ with the GIL held,
// 3.13, and 3.11 and 3.12 builds read at pinned offsets), else co_name.
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
	Why        string    // for PyUnavailable, e.g. "CPython 3.9: not supported (3.10 to 3.13 are)", "...; GIL held by another thread"
	ThreadName string    // the thread's threading name (threading.current_thread().name): read on the thread where it held the GIL, else by the observer's naming thread within a bounded wait; "" where neither could
	Version    string    // the interpreter's version, e.g. "3.12.1", when known
	Frames     []PyFrame // innermost first
	Omitted    int       // frames that did not fit (at least this many)
}
