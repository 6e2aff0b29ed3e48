package trace

import "fmt"

// PyFrame is one Python frame: the code's file, the line being run, the
// function's qualified name where the interpreter has one (co_qualname on
// 3.11+, read with the GIL held or on 3.13), else co_name.
type PyFrame struct {
	File     string
	Line     int // 0: unknown
	Function string
}

func (f PyFrame) String() string {
	if f.Line > 0 {
		return fmt.Sprintf("%s:%d in %s", f.File, f.Line, f.Function)
	}
	return fmt.Sprintf("%s in %s", f.File, f.Function)
}

// PyState says what the observer could read of the calling thread's
// Python stack.
type PyState string

const (
	PyNone        PyState = ""            // not collected (a record kind or path that never collects, a process without CPython)
	PyNative      PyState = "native"      // not a Python thread: no thread state (NCCL watchdog, driver threads)
	PyFrames      PyState = "frames"      // frames read (Frames may still be empty: a thread in C before any Python frame)
	PyUnavailable PyState = "unavailable" // a Python thread whose frames could not be read: Why says why
)

// PyStack is the calling thread's Python stack, as the observer read it.
type PyStack struct {
	State PyState
	// Why, for PyUnavailable: e.g. "CPython 3.9: not supported (3.10 to
	// 3.13 are)", "this thread does not hold the GIL, and
	// MIOTOOL_TRACE_PYTHON=held reads frames only with it; GIL held by
	// another thread".
	Why string
	// ThreadName is the thread's threading name
	// (threading.current_thread().name), read only where the thread held
	// the GIL; "" otherwise.
	ThreadName string
	// Version is the interpreter's, e.g. "3.12.1".
	Version string
	// Frames, innermost first.
	Frames []PyFrame
	// Omitted counts the frames that did not fit (at least this many).
	Omitted int
}
