package sim

import (
	"fmt"
	"sort"
	"sync"

	"miotool/internal/hip"
)

// Action is a runtime call that an active stream capture may refuse. The
// rule tables are keyed by it.
type Action int

// The actions of the capture-rules matrix. "Other stream" is a stream that
// is not capturing; an "uncaptured" event was last recorded outside any
// capture. The host-memory actions concern pinned host memory (allocated,
// freed, registered, unregistered); the legacy-stream actions are work on
// hip.StreamLegacy while a non-blocking or a blocking stream captures.
const (
	ActionQueryCapturingStream Action = iota + 1
	ActionSyncCapturingStream
	ActionQueryOtherStream
	ActionSyncOtherStream
	ActionQueryCapturedEvent
	ActionSyncCapturedEvent
	ActionQueryUncapturedEvent
	ActionSyncUncapturedEvent
	ActionMalloc
	ActionFree
	ActionSyncMemset
	ActionSyncMemcpy
	ActionDeviceSync
	ActionEndCaptureOtherThread
	ActionHostAlloc
	ActionHostFree
	ActionHostRegister
	ActionHostUnregister
	ActionModuleUnload
	ActionLegacyStreamLaunch
	ActionLegacyStreamLaunchBlockingCapture
)

// Actions lists every action in table order.
var Actions = []Action{
	ActionQueryCapturingStream, ActionSyncCapturingStream,
	ActionQueryOtherStream, ActionSyncOtherStream,
	ActionQueryCapturedEvent, ActionSyncCapturedEvent,
	ActionQueryUncapturedEvent, ActionSyncUncapturedEvent,
	ActionMalloc, ActionFree,
	ActionSyncMemset, ActionSyncMemcpy,
	ActionDeviceSync, ActionEndCaptureOtherThread,
	ActionHostAlloc, ActionHostFree, ActionHostRegister, ActionHostUnregister,
	ActionModuleUnload,
	ActionLegacyStreamLaunch, ActionLegacyStreamLaunchBlockingCapture,
}

var actionNames = map[Action]string{
	ActionQueryCapturingStream:  "query-capturing-stream",
	ActionSyncCapturingStream:   "sync-capturing-stream",
	ActionQueryOtherStream:      "query-other-stream",
	ActionSyncOtherStream:       "sync-other-stream",
	ActionQueryCapturedEvent:    "query-captured-event",
	ActionSyncCapturedEvent:     "sync-captured-event",
	ActionQueryUncapturedEvent:  "query-uncaptured-event",
	ActionSyncUncapturedEvent:   "sync-uncaptured-event",
	ActionMalloc:                "malloc",
	ActionFree:                  "free",
	ActionSyncMemset:            "sync-memset",
	ActionSyncMemcpy:            "sync-memcpy",
	ActionDeviceSync:            "device-sync",
	ActionEndCaptureOtherThread: "end-capture-other-thread",
	ActionHostAlloc:             "host-alloc",
	ActionHostFree:              "host-free",
	ActionHostRegister:          "host-register",
	ActionHostUnregister:        "host-unregister",
	ActionModuleUnload:          "module-unload",
	ActionLegacyStreamLaunch:    "legacy-stream-launch",

	ActionLegacyStreamLaunchBlockingCapture: "legacy-stream-launch-blocking-capture",
}

// actionOps is the neutral call name each action is made with; it is also
// the Op of the errors the simulator returns for it.
var actionOps = map[Action]string{
	ActionQueryCapturingStream:  "StreamQuery",
	ActionSyncCapturingStream:   "StreamSynchronize",
	ActionQueryOtherStream:      "StreamQuery",
	ActionSyncOtherStream:       "StreamSynchronize",
	ActionQueryCapturedEvent:    "EventQuery",
	ActionSyncCapturedEvent:     "EventSynchronize",
	ActionQueryUncapturedEvent:  "EventQuery",
	ActionSyncUncapturedEvent:   "EventSynchronize",
	ActionMalloc:                "Malloc",
	ActionFree:                  "Free",
	ActionSyncMemset:            "Memset",
	ActionSyncMemcpy:            "MemcpyHtoD",
	ActionDeviceSync:            "DeviceSynchronize",
	ActionEndCaptureOtherThread: "StreamEndCapture",
	ActionHostAlloc:             "HostAlloc",
	ActionHostFree:              "HostFree",
	ActionHostRegister:          "HostRegister",
	ActionHostUnregister:        "HostUnregister",
	ActionModuleUnload:          "ModuleUnload",
	ActionLegacyStreamLaunch:    "LaunchKernel",

	ActionLegacyStreamLaunchBlockingCapture: "LaunchKernel",
}

func (a Action) String() string {
	if n, ok := actionNames[a]; ok {
		return n
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Op is the neutral name of the call the action makes, e.g. "StreamQuery";
// hip.CallName turns it into hipStreamQuery or cuStreamQuery.
func (a Action) Op() string { return actionOps[a] }

// ParseAction accepts the names Action.String returns.
func ParseAction(s string) (Action, error) {
	for _, a := range Actions {
		if actionNames[a] == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("unknown capture-rule action %q (want one of %s)", s, actionList())
}

func actionList() string {
	s := ""
	for i, a := range Actions {
		if i > 0 {
			s += ", "
		}
		s += a.String()
	}
	return s
}

// Effect is what a refused call does to the capture it concerns.
type Effect int

// Effects of a refusal.
const (
	// EffectNone leaves the capture as it was.
	EffectNone Effect = iota
	// EffectInvalidate invalidates the capture the cell was evaluated for.
	EffectInvalidate
	// EffectInvalidateAll invalidates every capture of the device.
	EffectInvalidateAll
	// EffectTeardown ends the capture: the stream's status goes back to
	// none and the graph is lost (CUDA's wrong-thread end capture).
	EffectTeardown
)

func (e Effect) String() string {
	switch e {
	case EffectNone:
		return "none"
	case EffectInvalidate:
		return "invalidate"
	case EffectInvalidateAll:
		return "invalidate-all"
	case EffectTeardown:
		return "teardown"
	}
	return fmt.Sprintf("effect(%d)", int(e))
}

// Provenance says where a cell's value comes from.
type Provenance int

// Provenances, from strongest to weakest.
const (
	// ProvenanceMeasured: measured on hardware (the H200 runs).
	ProvenanceMeasured Provenance = iota
	// ProvenanceReported: a third party's measurement on hardware.
	ProvenanceReported
	// ProvenanceSource: read from the runtime's source code, not measured.
	ProvenanceSource
	// ProvenanceDocumented: the vendor's documented behaviour, not measured.
	ProvenanceDocumented
	// ProvenanceInferred: what the general rule and public reports lead
	// one to expect; neither measured nor documented for this call.
	ProvenanceInferred
)

func (p Provenance) String() string {
	switch p {
	case ProvenanceMeasured:
		return "measured"
	case ProvenanceReported:
		return "reported"
	case ProvenanceSource:
		return "source, not measured"
	case ProvenanceDocumented:
		return "documented, not measured"
	case ProvenanceInferred:
		return "inferred, not measured"
	}
	return fmt.Sprintf("provenance(%d)", int(p))
}

// Key is one cell's coordinates: the action, the calling OS thread's
// interaction mode, the mode the capture was begun with, and whether the
// caller is the thread that began the capture.
type Key struct {
	Action      Action
	ThreadMode  hip.CaptureMode
	CaptureMode hip.CaptureMode
	SameThread  bool
}

func (k Key) String() string {
	thread := "other"
	if k.SameThread {
		thread = "same"
	}
	return fmt.Sprintf("%s/capture=%s/thread=%s/thread-mode=%s", k.Action, k.CaptureMode, thread, k.ThreadMode)
}

// Rule is one cell's value. A call that is not refused behaves normally
// (a query of a busy stream still answers not-ready); Code and Effect then
// are Success and EffectNone.
type Rule struct {
	Refused    bool
	Code       hip.Code
	Effect     Effect
	Provenance Provenance
	// Note says briefly why the cell has its value.
	Note string
}

// Cell is a key with its rule.
type Cell struct {
	Key
	Rule
}

// RuleTable is one dialect's capture rules. The zero value is an empty
// table with no dialect.
type RuleTable struct {
	dialect hip.Dialect
	cells   map[Key]Rule
}

// Dialect is the dialect the table belongs to.
func (t RuleTable) Dialect() hip.Dialect { return t.dialect }

// Len is the number of cells.
func (t RuleTable) Len() int { return len(t.cells) }

// Lookup returns the rule of one cell.
func (t RuleTable) Lookup(k Key) (Rule, bool) {
	r, ok := t.cells[k]
	return r, ok
}

// Cells lists every cell in table order: by action, capture mode, same
// thread before other thread, then the calling thread's mode.
func (t RuleTable) Cells() []Cell {
	out := make([]Cell, 0, len(t.cells))
	for k, r := range t.cells {
		out = append(out, Cell{k, r})
	}
	sort.Slice(out, func(i, j int) bool { return keyLess(out[i].Key, out[j].Key) })
	return out
}

func keyLess(a, b Key) bool {
	if a.Action != b.Action {
		return a.Action < b.Action
	}
	if a.CaptureMode != b.CaptureMode {
		return a.CaptureMode < b.CaptureMode
	}
	if a.SameThread != b.SameThread {
		return a.SameThread
	}
	return a.ThreadMode < b.ThreadMode
}

var (
	cudaTable = sync.OnceValue(func() RuleTable { return buildTable(hip.DialectCUDA, cudaRule) })
	hipTable  = sync.OnceValue(func() RuleTable { return buildTable(hip.DialectHIP, hipRule) })
)

// Rules returns the capture-rule table of a dialect; "" means cuda. An
// unknown dialect gets the empty zero table.
func Rules(d hip.Dialect) RuleTable {
	switch d {
	case "", hip.DialectCUDA:
		return cudaTable()
	case hip.DialectHIP:
		return hipTable()
	}
	return RuleTable{}
}

func buildTable(d hip.Dialect, rule func(Key) Rule) RuleTable {
	t := RuleTable{dialect: d, cells: make(map[Key]Rule)}
	for _, a := range Actions {
		for _, tm := range hip.CaptureModes {
			for _, cm := range hip.CaptureModes {
				for _, same := range []bool{true, false} {
					k := Key{Action: a, ThreadMode: tm, CaptureMode: cm, SameThread: same}
					t.cells[k] = rule(k)
				}
			}
		}
	}
	return t
}

func isUnsafeAction(a Action) bool {
	switch a {
	case ActionQueryOtherStream, ActionSyncOtherStream,
		ActionQueryUncapturedEvent, ActionSyncUncapturedEvent,
		ActionMalloc, ActionFree:
		return true
	}
	return false
}

// unsafeCallBarred is the documented thread-interaction rule that both
// runtimes apply to "potentially unsafe" calls: a caller that is not relaxed
// may not disturb its own non-relaxed capture, and a global-mode caller may
// not disturb another thread's global capture.
func unsafeCallBarred(k Key) bool {
	if k.ThreadMode == hip.CaptureModeRelaxed {
		return false
	}
	if k.SameThread && k.CaptureMode != hip.CaptureModeRelaxed {
		return true
	}
	return !k.SameThread && k.ThreadMode == hip.CaptureModeGlobal && k.CaptureMode == hip.CaptureModeGlobal
}

func refuse(code hip.Code, e Effect, p Provenance, note string) Rule {
	return Rule{Refused: true, Code: code, Effect: e, Provenance: p, Note: note}
}

func allow(p Provenance, note string) Rule {
	return Rule{Code: hip.Success, Effect: EffectNone, Provenance: p, Note: note}
}

const (
	noteUnsafeBarred  = "potentially unsafe call: the caller's own non-relaxed capture, or a global caller against a global capture"
	noteUnsafeAllowed = "potentially unsafe call, allowed: relaxed caller, relaxed capture, or another thread's non-global capture"
	noteOriginEnd     = "ending on the thread that began the capture is the normal path"
)

// rowKind is how one action's rows go across every cell of a dialect.
type rowKind int

const (
	// rowUnsafeCall follows the rule of "potentially unsafe" calls
	// (unsafeCallBarred): refused with 900, invalidating the capture,
	// where the rule bars the caller, allowed elsewhere.
	rowUnsafeCall rowKind = iota
	// rowAllowed is never refused.
	rowAllowed
	// rowRefused is refused in every cell, with one code and effect.
	rowRefused
)

// actionRows are one action's rows in one dialect, on one line.
type actionRows struct {
	kind   rowKind
	code   hip.Code // rowRefused only
	effect Effect   // rowRefused only
	prov   Provenance
	note   string
}

func (r actionRows) rule(k Key) Rule {
	switch r.kind {
	case rowUnsafeCall:
		if unsafeCallBarred(k) {
			return refuse(hip.ErrStreamCaptureUnsupported, EffectInvalidate, r.prov, r.note)
		}
		return allow(r.prov, r.note)
	case rowRefused:
		return refuse(r.code, r.effect, r.prov, r.note)
	}
	return allow(r.prov, r.note)
}

// cudaAddedRows are the CUDA rows of the actions the H200 runs of
// 2026-11-29 did not cover, measured on the H200 on 2026-12-03
// (configs/rules/h200-cuda.yaml holds the cells; the rows as first inferred
// from the documentation and the public reports agreed with every one).
// TestProbeOnSimulatorMatchesCommittedExpectations holds each line to the
// cells the file holds.
var cudaAddedRows = map[Action]actionRows{
	ActionHostAlloc: {kind: rowUnsafeCall, prov: ProvenanceMeasured,
		note: "pinned host allocation is a potentially unsafe call, as cuMemAlloc is (a pin-memory thread's cudaHostAlloc during a global capture: 900)"},
	ActionHostFree: {kind: rowUnsafeCall, prov: ProvenanceMeasured,
		note: "freeing pinned host memory is a potentially unsafe call, as cuMemFree is"},
	ActionHostRegister: {kind: rowUnsafeCall, prov: ProvenanceMeasured,
		note: "host registration is a potentially unsafe call (a pinning thread's cudaHostRegister during a global capture: 900)"},
	ActionHostUnregister: {kind: rowUnsafeCall, prov: ProvenanceMeasured,
		note: "host unregistration is a potentially unsafe call, as host registration is"},
	ActionModuleUnload: {kind: rowUnsafeCall, prov: ProvenanceMeasured,
		note: "module unload is a potentially unsafe call (cuModuleUnload during a capture: 900)"},
	ActionLegacyStreamLaunch: {kind: rowAllowed, prov: ProvenanceMeasured,
		note: "the legacy stream conflicts only with captures on blocking streams, and A is non-blocking"},
	ActionLegacyStreamLaunchBlockingCapture: {kind: rowRefused, code: hip.ErrStreamCaptureImplicit, effect: EffectInvalidate, prov: ProvenanceMeasured,
		note: "any use of the legacy stream while a blocking stream captures is invalid, in every mode: 906, invalidated"},
}

// hipAddedRows are the HIP rows of the same actions, from the runtime
// source.
var hipAddedRows = map[Action]actionRows{
	ActionHostAlloc: {kind: rowUnsafeCall, prov: ProvenanceSource,
		note: "hipHostMalloc applies the allocation guard (CHECK_STREAM_CAPTURE_SUPPORTED)"},
	ActionHostFree: {kind: rowUnsafeCall, prov: ProvenanceSource,
		note: "hipHostFree applies the allocation guard (CHECK_STREAM_CAPTURE_SUPPORTED)"},
	ActionHostRegister: {kind: rowUnsafeCall, prov: ProvenanceSource,
		note: "hipHostRegister applies the allocation guard (CHECK_STREAM_CAPTURE_SUPPORTED)"},
	ActionHostUnregister: {kind: rowUnsafeCall, prov: ProvenanceSource,
		note: "hipHostUnregister applies the allocation guard (CHECK_STREAM_CAPTURE_SUPPORTED)"},
	ActionModuleUnload: {kind: rowAllowed, prov: ProvenanceSource,
		note: "hipModuleUnload makes no capture check"},
	ActionLegacyStreamLaunch: {kind: rowAllowed, prov: ProvenanceSource,
		note: "work on the null or legacy stream is neither captured nor refused (STREAM_CAPTURE skips them)"},
	ActionLegacyStreamLaunchBlockingCapture: {kind: rowAllowed, prov: ProvenanceSource,
		note: "work on the null or legacy stream is neither captured nor refused, whatever the capturing stream's flags; only hipStreamIsCapturing and hipStreamAddCallback on it answer 906"},
}

// cudaRule is the CUDA table: the H200 measurements, and where they are
// silent the documented rules.
func cudaRule(k Key) Rule {
	if r, ok := cudaAddedRows[k.Action]; ok {
		return r.rule(k)
	}
	p := ProvenanceDocumented
	if cudaMeasured(k) {
		p = ProvenanceMeasured
	}
	switch k.Action {
	case ActionQueryCapturingStream, ActionSyncCapturingStream:
		return refuse(hip.ErrStreamCaptureUnsupported, EffectInvalidate, p,
			"querying or synchronizing a capturing stream is invalid in every mode")
	case ActionQueryCapturedEvent:
		return refuse(hip.ErrCapturedEvent, EffectInvalidate, p,
			"a captured event may not be queried, even by a relaxed thread")
	case ActionSyncCapturedEvent:
		return refuse(hip.ErrCapturedEvent, EffectInvalidate, p,
			"a captured event may not be synchronized (CUDA_ERROR_CAPTURED_EVENT as documented)")
	case ActionSyncMemset, ActionSyncMemcpy:
		return allow(p, "synchronous copy or memset on a non-blocking capturing stream's device is allowed")
	case ActionDeviceSync:
		return refuse(hip.ErrStreamCaptureUnsupported, EffectInvalidate, p,
			"synchronizing the device (context) contains the capture and is invalid in every mode")
	case ActionEndCaptureOtherThread:
		if k.SameThread {
			return allow(p, noteOriginEnd)
		}
		if k.CaptureMode == hip.CaptureModeRelaxed {
			return allow(p, "a relaxed capture may be ended from any thread")
		}
		return refuse(hip.ErrStreamCaptureWrongThread, EffectTeardown, p,
			"wrong-thread end capture: the capture is torn down and the graph lost")
	}
	if isUnsafeAction(k.Action) {
		if unsafeCallBarred(k) {
			return refuse(hip.ErrStreamCaptureUnsupported, EffectInvalidate, p, noteUnsafeBarred)
		}
		return allow(p, noteUnsafeAllowed)
	}
	panic("sim: cuda rule table misses action " + k.Action.String())
}

// cudaMeasured lists the cells measured on the H200 (the capture-rules
// table and the capture matrix of the runtime brief). The acting thread's
// mode was the default global there, or relaxed where a row says so.
func cudaMeasured(k Key) bool {
	global := k.ThreadMode == hip.CaptureModeGlobal
	relaxed := k.ThreadMode == hip.CaptureModeRelaxed
	switch k.Action {
	case ActionQueryCapturingStream, ActionSyncCapturingStream, ActionQueryCapturedEvent:
		return global && k.SameThread
	case ActionQueryOtherStream, ActionFree:
		return global || relaxed
	case ActionSyncOtherStream, ActionEndCaptureOtherThread:
		return global && !k.SameThread
	case ActionQueryUncapturedEvent, ActionSyncMemset, ActionSyncMemcpy, ActionDeviceSync:
		return global
	case ActionMalloc:
		return global || (relaxed && !k.SameThread)
	}
	return false
}

// hipRule is the HIP table, from the runtime source (the newer line, where
// an invalidated capture resets its stream at end capture).
func hipRule(k Key) Rule {
	if r, ok := hipAddedRows[k.Action]; ok {
		return r.rule(k)
	}
	p := ProvenanceSource
	if hipReported(k) {
		p = ProvenanceReported
	}
	switch k.Action {
	case ActionQueryCapturingStream, ActionSyncCapturingStream:
		return refuse(hip.ErrStreamCaptureUnsupported, EffectInvalidate, p,
			"a query or sync of a capturing stream invalidates it, whatever the caller's mode")
	case ActionQueryCapturedEvent, ActionSyncCapturedEvent:
		return refuse(hip.ErrCapturedEvent, EffectInvalidate, p,
			"an event recorded inside an active capture may not be queried or synchronized")
	case ActionSyncMemset, ActionSyncMemcpy:
		return refuse(hip.ErrStreamCaptureImplicit, EffectInvalidateAll, p,
			"synchronous copies and memsets invalidate every capture in the process, whatever the modes")
	case ActionDeviceSync:
		return refuse(hip.ErrStreamCaptureUnsupported, EffectInvalidateAll, p,
			"device synchronize invalidates every capture in the process")
	case ActionEndCaptureOtherThread:
		if k.SameThread {
			return allow(p, noteOriginEnd)
		}
		if k.CaptureMode == hip.CaptureModeRelaxed {
			return allow(p, "a relaxed capture may be ended from any thread")
		}
		return refuse(hip.ErrStreamCaptureWrongThread, EffectNone, p,
			"wrong-thread end capture returns before any clean-up: the capture stays active")
	}
	if isUnsafeAction(k.Action) {
		if unsafeCallBarred(k) {
			return refuse(hip.ErrStreamCaptureUnsupported, EffectInvalidate, p, noteUnsafeBarred)
		}
		return allow(p, noteUnsafeAllowed)
	}
	panic("sim: hip rule table misses action " + k.Action.String())
}

// hipReported lists the cells a third party measured on an AMD GPU: a
// thread-local capture, and one call from a second, default-mode thread.
func hipReported(k Key) bool {
	if k.CaptureMode != hip.CaptureModeThreadLocal || k.SameThread || k.ThreadMode != hip.CaptureModeGlobal {
		return false
	}
	switch k.Action {
	case ActionDeviceSync, ActionSyncMemcpy, ActionMalloc, ActionFree, ActionSyncOtherStream:
		return true
	}
	return false
}
