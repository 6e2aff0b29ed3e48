// Package rules measures which runtime calls an active stream capture
// refuses, and which of them invalidate it: the capture-rules matrix. The
// probe makes every call for real through hip.Device, so the same code
// measures a GPU and the simulator, and compares the result with an
// expectation file.
package rules

import (
	"fmt"
	"strings"

	"miotool/internal/hip"
)

// Action is one call of the matrix, made while stream A captures.
type Action string

// The actions. A is the capturing stream, B a busy non-blocking stream,
// evA an event recorded inside the capture, evB an event recorded on B
// before the capture, p a buffer allocated before the capture, h pinned host
// memory allocated before it, m host memory mapped (and, to unregister it,
// registered) before it, mod a module loaded before it, legacy the legacy
// default stream (hip.StreamLegacy).
const (
	QueryCapturingStream  Action = "query-capturing-stream"   // StreamQuery(A)
	SyncCapturingStream   Action = "sync-capturing-stream"    // StreamSynchronize(A)
	QueryOtherStream      Action = "query-other-stream"       // StreamQuery(B)
	SyncOtherStream       Action = "sync-other-stream"        // StreamSynchronize(B)
	QueryCapturedEvent    Action = "query-captured-event"     // EventQuery(evA)
	SyncCapturedEvent     Action = "sync-captured-event"      // EventSynchronize(evA)
	QueryUncapturedEvent  Action = "query-uncaptured-event"   // EventQuery(evB)
	SyncUncapturedEvent   Action = "sync-uncaptured-event"    // EventSynchronize(evB)
	Malloc                Action = "malloc"                   // Malloc(1 MiB)
	Free                  Action = "free"                     // Free(p)
	SyncMemset            Action = "sync-memset"              // Memset(p) (synchronous)
	SyncMemcpy            Action = "sync-memcpy"              // MemcpyHtoD(p) (synchronous)
	DeviceSync            Action = "device-sync"              // DeviceSynchronize
	EndCaptureOtherThread Action = "end-capture-other-thread" // StreamEndCapture(A) from another thread
	HostAlloc             Action = "host-alloc"               // HostAlloc(1 MiB)
	HostFree              Action = "host-free"                // HostFree(h)
	HostRegister          Action = "host-register"            // HostRegister(m)
	HostUnregister        Action = "host-unregister"          // HostUnregister(m)
	ModuleUnload          Action = "module-unload"            // ModuleUnload(mod)
	LegacyStreamLaunch    Action = "legacy-stream-launch"     // LaunchKernel(legacy)
	// LaunchKernel(legacy) while A, created blocking, captures.
	LegacyStreamLaunchBlockingCapture Action = "legacy-stream-launch-blocking-capture"
)

// Actions lists the actions in table order.
var Actions = []Action{
	QueryCapturingStream, SyncCapturingStream,
	QueryOtherStream, SyncOtherStream,
	QueryCapturedEvent, SyncCapturedEvent,
	QueryUncapturedEvent, SyncUncapturedEvent,
	Malloc, Free, SyncMemset, SyncMemcpy, DeviceSync,
	EndCaptureOtherThread,
	HostAlloc, HostFree, HostRegister, HostUnregister,
	ModuleUnload,
	LegacyStreamLaunch, LegacyStreamLaunchBlockingCapture,
}

// ParseAction accepts the names of Actions.
func ParseAction(s string) (Action, error) {
	for _, a := range Actions {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, len(Actions))
	for i, a := range Actions {
		names[i] = string(a)
	}
	return "", fmt.Errorf("unknown action %q (want one of %s)", s, strings.Join(names, ", "))
}

// Label is the call the action makes, in the dialect's vocabulary,
// e.g. cuStreamQuery(B) or hipFree(p).
func (a Action) Label(d hip.Dialect) string {
	cuda := d == hip.DialectCUDA
	pick := func(cu, hp string) string {
		if cuda {
			return cu
		}
		return hp
	}
	switch a {
	case QueryCapturingStream:
		return hip.CallName("StreamQuery", d) + "(A)"
	case SyncCapturingStream:
		return hip.CallName("StreamSynchronize", d) + "(A)"
	case QueryOtherStream:
		return hip.CallName("StreamQuery", d) + "(B)"
	case SyncOtherStream:
		return hip.CallName("StreamSynchronize", d) + "(B)"
	case QueryCapturedEvent:
		return hip.CallName("EventQuery", d) + "(evA)"
	case SyncCapturedEvent:
		return hip.CallName("EventSynchronize", d) + "(evA)"
	case QueryUncapturedEvent:
		return hip.CallName("EventQuery", d) + "(evB)"
	case SyncUncapturedEvent:
		return hip.CallName("EventSynchronize", d) + "(evB)"
	case Malloc:
		return pick("cuMemAlloc", "hipMalloc")
	case Free:
		return pick("cuMemFree(p)", "hipFree(p)")
	case SyncMemset:
		return pick("cuMemsetD8(p)", "hipMemset(p)")
	case SyncMemcpy:
		return pick("cuMemcpyHtoD(p)", "hipMemcpyHtoD(p)")
	case DeviceSync:
		return pick("cuCtxSynchronize", "hipDeviceSynchronize")
	case EndCaptureOtherThread:
		return hip.CallName("StreamEndCapture", d) + "(A)"
	case HostAlloc:
		return hip.CallName("HostAlloc", d)
	case HostFree:
		return hip.CallName("HostFree", d) + "(h)"
	case HostRegister:
		return hip.CallName("HostRegister", d) + "(m)"
	case HostUnregister:
		return hip.CallName("HostUnregister", d) + "(m)"
	case ModuleUnload:
		return hip.CallName("ModuleUnload", d) + "(mod)"
	case LegacyStreamLaunch:
		return hip.CallName("LaunchKernel", d) + "(legacy)"
	case LegacyStreamLaunchBlockingCapture:
		return hip.CallName("LaunchKernel", d) + "(legacy), A blocking"
	}
	return string(a)
}

// spinSensitive actions answer differently depending on whether B is still
// running, so their cell is valid only if the action started before B's
// spin kernel could have finished.
func (a Action) spinSensitive() bool {
	return a == QueryOtherStream || a == QueryUncapturedEvent
}

// needsCapturedEvent actions use evA, recorded inside the capture.
func (a Action) needsCapturedEvent() bool {
	return a == QueryCapturedEvent || a == SyncCapturedEvent
}

// blockingCapture actions capture on an A created blocking: the legacy
// stream conflicts only with such captures.
func (a Action) blockingCapture() bool { return a == LegacyStreamLaunchBlockingCapture }

// CellKey names one cell: the action, the mode the capture was begun with,
// whether the action runs on the capturing OS thread or another one, and
// the acting thread's interaction mode. Mode global is the default: the
// thread did not switch; relaxed and thread-local mean it switched itself
// around the call (hip.WithCaptureMode) and back.
type CellKey struct {
	Action  Action
	Capture hip.CaptureMode
	Other   bool
	Mode    hip.CaptureMode
}

// String is the key as expectation files and messages spell it:
// action/capture/thread/mode, e.g. query-other-stream/global/other/relaxed.
func (k CellKey) String() string {
	return fmt.Sprintf("%s/%s/%s/%s", k.Action, k.Capture, k.ThreadName(), k.Mode)
}

// ThreadName is "same" or "other".
func (k CellKey) ThreadName() string {
	if k.Other {
		return "other"
	}
	return "same"
}

// ThreadLabel is the acting-thread column: "same", "other", or with the
// mode the thread switched to, e.g. "other, relaxed{}".
func (k CellKey) ThreadLabel() string {
	if k.Mode == hip.CaptureModeGlobal {
		return k.ThreadName()
	}
	return k.ThreadName() + ", " + k.Mode.String() + "{}"
}

// Describe is a readable name of the cell, e.g.
// "cuStreamQuery(B), global capture, other thread in relaxed{}".
func (k CellKey) Describe(d hip.Dialect) string {
	s := fmt.Sprintf("%s, %s capture, %s thread", k.Action.Label(d), k.Capture, k.ThreadName())
	if k.Mode != hip.CaptureModeGlobal {
		s += " in " + k.Mode.String() + "{}"
	}
	return s
}

// ParseCellKey reads the form String writes.
func ParseCellKey(s string) (CellKey, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 {
		return CellKey{}, fmt.Errorf("cell %q: want action/capture/thread/mode", s)
	}
	return makeKey(parts[0], parts[1], parts[2], parts[3])
}

func makeKey(action, capture, thread, mode string) (CellKey, error) {
	var k CellKey
	var err error
	if k.Action, err = ParseAction(action); err != nil {
		return k, err
	}
	if k.Capture, err = hip.ParseCaptureMode(capture); err != nil {
		return k, fmt.Errorf("capture: %w", err)
	}
	switch thread {
	case "same":
	case "other":
		k.Other = true
	default:
		return k, fmt.Errorf("thread %q: want same or other", thread)
	}
	if k.Mode, err = hip.ParseCaptureMode(mode); err != nil {
		return k, fmt.Errorf("mode: %w", err)
	}
	if k.Action == EndCaptureOtherThread && !k.Other {
		return k, fmt.Errorf("%s is made from another thread only (thread: other)", k.Action)
	}
	return k, nil
}

// Matrix lists every cell in table order: by action, capture mode, same
// thread before other, then the acting thread's mode (global, thread-local,
// relaxed). Ending the capture is an action only from another thread.
func Matrix() []CellKey {
	var out []CellKey
	for _, a := range Actions {
		for _, c := range hip.CaptureModes {
			for _, other := range []bool{false, true} {
				if a == EndCaptureOtherThread && !other {
					continue
				}
				for _, m := range hip.CaptureModes {
					out = append(out, CellKey{Action: a, Capture: c, Other: other, Mode: m})
				}
			}
		}
	}
	return out
}

// CellsFor lists the matrix cells of the given actions, in matrix order;
// no actions means the whole matrix.
func CellsFor(actions ...Action) []CellKey {
	all := Matrix()
	if len(actions) == 0 {
		return all
	}
	var out []CellKey
	for _, k := range all {
		for _, a := range actions {
			if k.Action == a {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// CodeText prints a code with its vendor name, e.g.
// "900 STREAM_CAPTURE_UNSUPPORTED" or "900 hipErrorStreamCaptureUnsupported".
func CodeText(c hip.Code, d hip.Dialect) string {
	return fmt.Sprintf("%d %s", int(c), c.Short(d))
}
