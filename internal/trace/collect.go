package trace

import (
	"slices"

	"miotool/internal/hip"
	"miotool/internal/rules"
)

// Limits bound what a trace keeps, so that a long program costs bounded
// memory: each capture keeps counts of every call, and its refused calls
// and hazard candidates in full up to a cap (the rest are counted).
type Limits struct {
	// Captures kept in full; past it, captures that ended well with
	// nothing refused and no hazard are only counted (a failing one is
	// always kept).
	Captures int
	// Calls kept in full per capture, of each of the refused calls and
	// the hazard candidates.
	Calls int
	// Threads counted by id per capture; the rest are counted together.
	Threads int
	// Processes listed (a program that runs many others, a build say,
	// loads the observer into each); the rest are counted.
	Processes int
}

// DefaultLimits fit a long PyTorch training run in a few megabytes.
var DefaultLimits = Limits{Captures: 10000, Calls: 64, Threads: 256, Processes: 1000}

func (l Limits) withDefaults() Limits {
	if l.Captures <= 0 {
		l.Captures = DefaultLimits.Captures
	}
	if l.Calls <= 0 {
		l.Calls = DefaultLimits.Calls
	}
	if l.Threads <= 0 {
		l.Threads = DefaultLimits.Threads
	}
	if l.Processes <= 0 {
		l.Processes = DefaultLimits.Processes
	}
	return l
}

// Call is one runtime call made while a capture was active.
type Call struct {
	PID, TID int
	Time     int64
	API      hip.Dialect
	Name     string // as the runtime names it, e.g. cuCtxSynchronize_v2
	Stream   uint64
	Event    uint64
	Result   hip.Code
	// ThreadMode is the calling thread's interaction mode at the call.
	ThreadMode hip.CaptureMode
	Callers    []Frame
	Omitted    int // callers that did not fit the record
	// Action is the capture-rules action the call is, relative to the
	// capture it is listed under ("" when the rules have none for it).
	Action rules.Action
	// ThreadName is the calling thread's OS name and Python its Python
	// stack, where the record carried them.
	ThreadName string
	Python     PyStack
	// Outside: work enqueued during a capture into a stream that was not
	// capturing, which no capture holds.
	Outside bool
}

// Refused says whether the runtime refused the call as a capture
// violation (900-908).
func (c *Call) Refused() bool { return refusal(c.Result) }

// Consequence says whether the refusal only reports an earlier one: 901,
// the capture was already invalidated.
func (c *Call) Consequence() bool { return c.Result == hip.ErrStreamCaptureInvalidated }

func refusal(c hip.Code) bool { return c >= 900 && c <= 908 }

// Ending is how a capture ended.
type Ending struct {
	TID    int
	Time   int64
	Name   string
	Result hip.Code
	// StreamGone: the stream was destroyed while it captured; there is no
	// end result.
	StreamGone bool
	Callers    []Frame
	ThreadName string
	Python     PyStack
	// Graph is the graph the capture produced (0: none or not said) and
	// Nodes how many nodes it has, where NodesKnown.
	Graph      uint64
	Nodes      int
	NodesKnown bool
}

// Empty says whether the capture ended with success into a graph that has
// no node: it captured no work.
func (e *Ending) Empty() bool {
	return e != nil && !e.StreamGone && e.Result == 0 && e.NodesKnown && e.Nodes == 0
}

// Capture is one stream capture a traced process made.
type Capture struct {
	ID       int // 1, 2, ... in the order they began
	API      hip.Dialect
	PID, TID int
	Stream   uint64
	Mode     hip.CaptureMode
	Begin    int64
	// Device is the ordinal of the device its beginning thread worked on
	// (-1: the runtime did not say); Result.Devices describes it.
	Device int
	// BeginName and BeginResult are the begin call's; a capture whose
	// begin failed never ran.
	BeginName    string
	BeginResult  hip.Code
	BeginCallers []Frame
	// BeginThreadName and BeginPython are the beginning thread's OS name
	// and Python stack, where the record carried them.
	BeginThreadName string
	BeginPython     PyStack
	// End is nil while the capture was active when tracing stopped.
	End *Ending

	// Calls counts the calls made while it was active, by base name and
	// by thread (threads past the limit under OtherThreads).
	Calls        int
	ByName       map[string]int
	ByThread     map[int]int
	OtherThreads int

	// Refused are the calls refused while it was active that it is held
	// to have broken (see attribute); RefusedOmitted counts those past
	// the limit.
	Refused        []*Call
	RefusedOmitted int
	// Candidates are the calls that succeeded and that the rules tables
	// govern: each is judged for a hazard. CandidatesOmitted counts those
	// past the limit.
	Candidates        []*Call
	CandidatesOmitted int
	// Guarded counts the calls that succeeded because their own thread had
	// switched itself to a mode that the rules tables say is safe under
	// every capture mode (relaxed, as ScopedRelaxedCaptureMode and
	// PyTorch's cudaMallocMaybeCapturing do): the sanctioned guard, not a
	// hazard. GuardedByName counts them by base name.
	Guarded       int
	GuardedByName map[string]int
	// Outside are the calls that enqueued work, while it was active, into
	// a stream that was not capturing: work that escaped it.
	// OutsideOmitted counts those past the limit.
	Outside        []*Call
	OutsideOmitted int

	capturedEvents map[uint64]bool
}

// Ran says whether the capture began.
func (c *Capture) Ran() bool { return c.BeginResult == hip.Success }

// Invalidated says whether its end reported it invalidated (901).
func (c *Capture) Invalidated() bool {
	return c.End != nil && c.End.Result == hip.ErrStreamCaptureInvalidated
}

// EndedWell says whether it began and its end returned success.
func (c *Capture) EndedWell() bool {
	return c.Ran() && c.End != nil && !c.End.StreamGone && c.End.Result == hip.Success
}

// clean: nothing about it needs keeping beyond its counts.
func (c *Capture) clean() bool {
	return c.EndedWell() && len(c.Refused) == 0 && c.RefusedOmitted == 0
}

// Process is a process that loaded the observer.
type Process struct {
	PID, PPID int
	Exe       string
	Forked    bool // a fork of its parent, not a new image
	Start     int64
	// MainThreadName is the OS name of its main thread where a record
	// carried it: the name every thread it starts inherits.
	MainThreadName string
	// Python: some record of it carried a Python stack (frames or why
	// they could not be read), so it runs CPython.
	Python bool
}

// Device is a device some capture of a process began on, as the
// process's runtime named it.
type Device struct {
	PID     int
	API     hip.Dialect
	Ordinal int
	Name    string // e.g. "NVIDIA H200"; "" when the runtime did not say
	Arch    string // e.g. "sm_90", "gfx942:sramecc+:xnack-"
	// ComputeUnits: multiprocessors (CUDA) or compute units (HIP); 0
	// when the runtime did not say.
	ComputeUnits int
}

// Note is what the observer reported about itself, e.g. the CUPTI
// subscription of one process.
type Note struct {
	PID                 int
	Topic, Status, Text string
}

// collector folds events into captures as they arrive; only the reading
// goroutine uses it.
type collector struct {
	limits       Limits
	procs        []*Process
	procIndex    map[int]*Process
	procsOmitted int
	notes        []Note
	devices      []Device
	captures     []*Capture
	omitted      int // clean captures past the limit
	ids          int
	// active holds each process's active captures; recent its last few
	// ended ones, for calls that arrive after the end of a capture they
	// were made during.
	active, recent map[int][]*Capture
	events         int
	malformed      int
	stray          int // calls during no known capture
	first          int64
	resolve        func([]RawFrame) []Frame
	graphs         *graphTracker
	// tables tell guarded calls from hazards; nil means BuiltinRules.
	tables *RulesTables
}

func newCollector(l Limits, resolve func([]RawFrame) []Frame) *collector {
	if resolve == nil {
		resolve = rawFrames
	}
	return &collector{limits: l.withDefaults(), procIndex: map[int]*Process{}, active: map[int][]*Capture{},
		recent: map[int][]*Capture{}, resolve: resolve, graphs: newGraphTracker()}
}

// rules are the tables the collector judges guards by: its own, else the
// built-in ones (nil when those cannot be read: then no call is guarded).
func (c *collector) rules() *RulesTables {
	if c.tables == nil {
		c.tables, _ = BuiltinRules()
	}
	return c.tables
}

// result is what the collector saw, with the hazards judged by the same
// tables as the guards; the caller adds the program and how it ended.
func (c *collector) result() *Result {
	r := &Result{Processes: c.procs, ProcessesOmitted: c.procsOmitted, Notes: c.notes, Devices: c.devices,
		Captures: c.captures, CapturesOmitted: c.omitted, Graphs: c.graphs.result(),
		Events: c.events, Malformed: c.malformed, Stray: c.stray, Start: c.first}
	r.Hazards = Hazards(r.Captures, c.rules())
	return r
}

// recentKept is how many ended captures per process stay in reach of late
// calls.
const recentKept = 8

func (c *collector) add(e Event) {
	c.events++
	if c.first == 0 || e.Time < c.first {
		c.first = e.Time
	}
	c.thread(e)
	switch e.Kind {
	case kindHello, kindFork:
		c.process(e)
	case kindGraph:
		c.graphs.record(e)
	case kindNote:
		c.notes = append(c.notes, Note{PID: e.PID, Topic: e.Topic, Status: e.Status, Text: e.Text})
	case kindDevice:
		c.device(e)
	case kindBegin:
		c.begin(e)
	case kindEnd:
		c.end(e)
	case kindGone:
		if cp := c.find(e.PID, e.API, e.Stream); cp != nil {
			cp.End = &Ending{TID: e.TID, Time: e.Time, StreamGone: true}
			c.retire(cp)
		}
	case kindCall:
		c.call(e)
	}
}

// process notes a process that loaded the observer, or an exec of one.
func (c *collector) process(e Event) {
	p, seen := c.procIndex[e.PID]
	switch {
	case !seen && len(c.procs) >= c.limits.Processes:
		c.procsOmitted++
	case !seen:
		p = &Process{PID: e.PID, PPID: e.PPID, Exe: e.Exe, Forked: e.Kind == kindFork, Start: e.Time}
		c.procs = append(c.procs, p)
		c.procIndex[e.PID] = p
	case e.Kind == kindHello:
		// An exec: the same process, a new image, which may name its
		// threads and run Python differently.
		p.Exe, p.MainThreadName, p.Python = e.Exe, "", false
	}
}

// thread notes what a record says of its process's threads: the main
// thread's name, and whether it runs Python.
func (c *collector) thread(e Event) {
	p := c.procIndex[e.PID]
	if p == nil {
		return
	}
	if e.TID == e.PID && e.ThreadName != "" {
		p.MainThreadName = e.ThreadName
	}
	if e.Python.State == PyFrames || e.Python.State == PyUnavailable {
		p.Python = true
	}
}

// device keeps a device's description, once per process, runtime and
// ordinal (two threads may both describe it first).
func (c *collector) device(e Event) {
	d := Device{PID: e.PID, API: e.API, Ordinal: e.Device, Name: e.DeviceName, Arch: e.Arch, ComputeUnits: e.ComputeUnits}
	if slices.ContainsFunc(c.devices, func(x Device) bool { return x.PID == d.PID && x.API == d.API && x.Ordinal == d.Ordinal }) {
		return
	}
	// Bounded as processes are: one device per process in the common case.
	if len(c.devices) < c.limits.Processes {
		c.devices = append(c.devices, d)
	}
}

func (c *collector) begin(e Event) {
	c.ids++
	cp := &Capture{ID: c.ids, API: e.API, PID: e.PID, TID: e.TID, Stream: e.Stream, Mode: e.Mode, Begin: e.Time, Device: e.Device,
		BeginName: e.Name, BeginResult: e.Result, BeginCallers: c.resolve(e.Callers),
		BeginThreadName: e.ThreadName, BeginPython: e.Python,
		ByName: map[string]int{}, ByThread: map[int]int{}, GuardedByName: map[string]int{}}
	c.captures = append(c.captures, cp)
	if cp.Ran() {
		c.active[e.PID] = append(c.active[e.PID], cp)
	}
}

// find is the active capture of a process on a stream.
func (c *collector) find(pid int, api hip.Dialect, stream uint64) *Capture {
	for _, cp := range c.active[pid] {
		if cp.API == api && cp.Stream == stream {
			return cp
		}
	}
	return nil
}

func (c *collector) end(e Event) {
	cp := c.find(e.PID, e.API, e.Stream)
	if cp == nil {
		// An end of a capture that never began (the stream was not
		// capturing): a failed call like any other.
		c.call(Event{Kind: kindCall, PID: e.PID, TID: e.TID, Time: e.Time, API: e.API, Name: e.Name, Stream: e.Stream,
			Result: e.Result, Callers: e.Callers, Omitted: e.Omitted, ThreadName: e.ThreadName, Python: e.Python})
		return
	}
	if e.TID != cp.TID {
		call := &Call{PID: e.PID, TID: e.TID, Time: e.Time, API: e.API, Name: e.Name, Stream: e.Stream,
			Result: e.Result, Callers: c.resolve(e.Callers), Omitted: e.Omitted, Action: rules.EndCaptureOtherThread,
			ThreadName: e.ThreadName, Python: e.Python}
		if call.Refused() {
			c.keepRefused(cp, call)
		} else {
			c.keepCandidate(cp, call)
		}
		// HIP refuses an end from the wrong thread and keeps the
		// capture; CUDA tears it down.
		if e.Result == hip.ErrStreamCaptureWrongThread && e.API == hip.DialectHIP {
			return
		}
	}
	cp.End = &Ending{TID: e.TID, Time: e.Time, Name: e.Name, Result: e.Result, Callers: c.resolve(e.Callers),
		ThreadName: e.ThreadName, Python: e.Python, Graph: e.Graph, Nodes: e.Nodes,
		// A record that names no graph says nothing of its nodes either.
		NodesKnown: e.Graph != 0 && e.Nodes >= 0}
	if e.Result == hip.Success {
		c.graphs.capturedGraph(e.PID, e.API, e.Graph)
	}
	c.retire(cp)
}

// retire moves an ended capture from active to recent, and lets go of a
// clean one past the limit.
func (c *collector) retire(cp *Capture) {
	c.active[cp.PID] = slices.DeleteFunc(c.active[cp.PID], func(x *Capture) bool { return x == cp })
	r := append(c.recent[cp.PID], cp)
	if len(r) > recentKept {
		r = r[len(r)-recentKept:]
	}
	c.recent[cp.PID] = r
	if cp.clean() && len(cp.Candidates) == 0 && cp.CandidatesOmitted == 0 && c.kept() > c.limits.Captures {
		c.captures = slices.DeleteFunc(c.captures, func(x *Capture) bool { return x == cp })
		c.omitted++
	}
}

func (c *collector) kept() int { return len(c.captures) }

// during lists the captures of the process that were active at time t.
func (c *collector) during(pid int, t int64) []*Capture {
	var out []*Capture
	for _, cp := range c.recent[pid] {
		if cp.Begin <= t && cp.End != nil && cp.End.Time >= t {
			out = append(out, cp)
		}
	}
	for _, cp := range c.active[pid] {
		if cp.Begin <= t {
			out = append(out, cp)
		}
	}
	return out
}

// deviceWide calls act on every capture of the process, whichever stream
// or thread: device and context synchronization, and HIP's synchronous
// copies and sets (which invalidate all captures).
func deviceWide(api hip.Dialect, base string) bool {
	switch base {
	case "cuCtxSynchronize", "hipDeviceSynchronize":
		return true
	case "hipMemcpy", "hipMemcpyHtoD", "hipMemcpyDtoH", "hipMemcpyDtoD", "hipMemset", "hipMemsetD8", "hipMemsetD32":
		return api == hip.DialectHIP
	}
	return false
}

// attribute decides which captures a call belongs to, among those of its
// process active when it was made (same runtime):
//
//  1. A call that names a capturing stream belongs to that stream's
//     capture alone: what it does (or breaks) is that capture's.
//  2. Otherwise every active capture counts the call as made during it,
//     and judges it for a hazard by its own mode and thread.
//  3. A refused call that names no capturing stream is held to have broken
//     the captures the runtimes' rules let it break: for device-wide calls
//     (device or context synchronize, HIP's synchronous copies), all of
//     them; otherwise the captures the calling thread began (unless
//     relaxed) and, when the thread was in global mode, every global-mode
//     capture. When that leaves none (a rule the tables do not know), all
//     active captures are held to it, since the runtime refused the call
//     because of some capture.
func attribute(call *Call, active []*Capture) (counted, broken []*Capture) {
	var same []*Capture
	for _, cp := range active {
		if cp.API == call.API {
			same = append(same, cp)
		}
	}
	if call.Stream != 0 {
		for _, cp := range same {
			if cp.Stream == call.Stream {
				if call.Refused() {
					return []*Capture{cp}, []*Capture{cp}
				}
				return []*Capture{cp}, nil
			}
		}
	}
	if !call.Refused() {
		return same, nil
	}
	if deviceWide(call.API, BaseName(call.Name)) {
		return same, same
	}
	for _, cp := range same {
		own := cp.PID == call.PID && cp.TID == call.TID && cp.Mode != hip.CaptureModeRelaxed
		global := call.ThreadMode == hip.CaptureModeGlobal && cp.Mode == hip.CaptureModeGlobal
		if own || global {
			broken = append(broken, cp)
		}
	}
	if len(broken) == 0 {
		broken = same
	}
	return same, broken
}

func (c *collector) call(e Event) {
	call := &Call{PID: e.PID, TID: e.TID, Time: e.Time, API: e.API, Name: e.Name, Stream: e.Stream, Event: e.Event,
		Result: e.Result, ThreadMode: e.Mode, Omitted: e.Omitted, ThreadName: e.ThreadName, Python: e.Python,
		Outside: e.Outside && !refusal(e.Result)}
	counted, broken := attribute(call, c.during(e.PID, e.Time))
	if len(counted) == 0 {
		c.stray++
		return
	}
	if len(e.Callers) > 0 {
		call.Callers = c.resolve(e.Callers)
	}
	base := BaseName(e.Name)
	for _, cp := range counted {
		c.count(cp, e, base)
	}
	if call.Refused() {
		for _, cp := range broken {
			c.keepRefused(cp, call)
		}
		return
	}
	for _, cp := range counted {
		if call.Outside {
			c.keepOutside(cp, call)
		}
		c.judgeSucceeded(cp, call, base)
	}
}

// count counts a call made during capture cp, and an event it recorded
// into the capturing stream.
func (c *collector) count(cp *Capture, e Event, base string) {
	cp.Calls++
	cp.ByName[base]++
	if _, ok := cp.ByThread[e.TID]; ok || len(cp.ByThread) < c.limits.Threads {
		cp.ByThread[e.TID]++
	} else {
		cp.OtherThreads++
	}
	if (base == "cuEventRecord" || base == "cuEventRecordWithFlags" || base == "hipEventRecord") &&
		e.Result == hip.Success && e.Stream == cp.Stream && e.Event != 0 {
		if cp.capturedEvents == nil {
			cp.capturedEvents = map[uint64]bool{}
		}
		if len(cp.capturedEvents) < 4096 {
			cp.capturedEvents[e.Event] = true
		}
	}
}

// judgeSucceeded sorts a call that succeeded during capture cp and that
// the rules tables govern: guarded by its own thread, or a candidate for
// a hazard.
func (c *collector) judgeSucceeded(cp *Capture, call *Call, base string) {
	a, ok := actionFor(call, cp)
	switch {
	case !ok:
	case c.guarded(call, cp, a):
		cp.Guarded++
		cp.GuardedByName[base]++
	default:
		judged := *call
		judged.Action = a
		c.keepCandidate(cp, &judged)
	}
}

// guarded says whether a call that succeeded during capture cp, as action
// a, was made under the sanctioned guard: its own thread had switched
// itself to a mode (relaxed) in which the rules tables say the call is
// safe whatever the mode of the capture.
func (c *collector) guarded(call *Call, cp *Capture, a rules.Action) bool {
	if call.ThreadMode == hip.CaptureModeGlobal || call.Result != hip.Success {
		return false
	}
	t := c.rules()
	if t == nil {
		return false
	}
	return SafeInEveryCapture(t.ByDialect[cp.API], a, call.PID != cp.PID || call.TID != cp.TID, call.ThreadMode)
}

func (c *collector) keepOutside(cp *Capture, call *Call) {
	if len(cp.Outside) < c.limits.Calls {
		cp.Outside = append(cp.Outside, call)
	} else {
		cp.OutsideOmitted++
	}
}

func (c *collector) keepRefused(cp *Capture, call *Call) {
	if len(cp.Refused) < c.limits.Calls {
		cp.Refused = append(cp.Refused, call)
	} else {
		cp.RefusedOmitted++
	}
}

func (c *collector) keepCandidate(cp *Capture, call *Call) {
	if len(cp.Candidates) < c.limits.Calls {
		cp.Candidates = append(cp.Candidates, call)
	} else {
		cp.CandidatesOmitted++
	}
}

// actionFor is the capture-rules action a call is, relative to capture
// cp, if the rules tables have one for it.
func actionFor(call *Call, cp *Capture) (rules.Action, bool) {
	special := func(s uint64) bool { return s <= 2 } // null, legacy and per-thread streams
	pick := func(capturing, other rules.Action) (rules.Action, bool) {
		switch {
		case call.Stream == cp.Stream:
			return capturing, true
		case special(call.Stream):
			return "", false
		}
		return other, true
	}
	event := func(captured, uncaptured rules.Action) (rules.Action, bool) {
		if call.Event == 0 {
			return "", false
		}
		if cp.capturedEvents[call.Event] {
			return captured, true
		}
		return uncaptured, true
	}
	switch BaseName(call.Name) {
	case "cuStreamQuery", "hipStreamQuery":
		return pick(rules.QueryCapturingStream, rules.QueryOtherStream)
	case "cuStreamSynchronize", "hipStreamSynchronize":
		return pick(rules.SyncCapturingStream, rules.SyncOtherStream)
	case "cuEventQuery", "hipEventQuery":
		return event(rules.QueryCapturedEvent, rules.QueryUncapturedEvent)
	case "cuEventSynchronize", "hipEventSynchronize":
		return event(rules.SyncCapturedEvent, rules.SyncUncapturedEvent)
	case "cuMemAlloc", "hipMalloc":
		return rules.Malloc, true
	case "cuMemFree", "hipFree":
		return rules.Free, true
	case "cuMemsetD8", "cuMemsetD16", "cuMemsetD32", "hipMemset", "hipMemsetD8", "hipMemsetD32":
		return rules.SyncMemset, true
	case "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD",
		"hipMemcpy", "hipMemcpyHtoD", "hipMemcpyDtoH", "hipMemcpyDtoD":
		return rules.SyncMemcpy, true
	case "cuCtxSynchronize", "hipDeviceSynchronize":
		return rules.DeviceSync, true
	case "cuMemHostAlloc", "cuMemAllocHost", "hipHostMalloc", "hipHostAlloc", "hipExtHostAlloc", "hipMallocHost", "hipMemAllocHost":
		return rules.HostAlloc, true
	case "cuMemFreeHost", "hipHostFree", "hipFreeHost":
		return rules.HostFree, true
	case "cuMemHostRegister", "hipHostRegister":
		return rules.HostRegister, true
	case "cuMemHostUnregister", "hipHostUnregister":
		return rules.HostUnregister, true
	case "cuModuleUnload", "hipModuleUnload":
		return rules.ModuleUnload, true
	}
	return "", false
}
