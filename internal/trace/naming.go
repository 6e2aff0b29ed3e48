package trace

import (
	"fmt"
	"path/filepath"
	"strings"
)

// commLength is how many bytes of a thread's OS name the kernel keeps.
const commLength = 15

// comm is the OS name a program's threads start with: its file name, cut
// as the kernel cuts it.
func comm(path string) string {
	base := filepath.Base(path)
	if len(base) > commLength {
		base = base[:commLength]
	}
	return base
}

// process is the traced process pid; nil when the trace did not list it.
func (r *Result) process(pid int) *Process {
	for _, p := range r.Processes {
		if p.PID == pid {
			return p
		}
	}
	return nil
}

// inheritedName says whether name is the OS name every thread of process
// pid starts with (its main thread's, or its program's file name), which
// says nothing of the thread.
func (r *Result) inheritedName(pid int, name string) bool {
	if p := r.process(pid); p != nil && (name == p.MainThreadName || name == comm(p.Exe)) {
		return true
	}
	return r.Program != "" && name == comm(r.Program)
}

// ThreadNames is how a line names a thread after its id: its Python
// threading name, with its OS name where that says something else
// (`"metrics"`, `"metrics" (OS name "pt_io")`), or its OS name where it
// has no Python name and its own OS name (`"pt_nccl_watchdg"`). A Python
// thread whose threading name could not be read (PyTorch, CuPy and most
// libraries release the GIL around their runtime calls, and the observer's
// naming thread, which takes it instead, waits for it a bounded time) is
// named by the function it was started in, from its stack (`(started in
// log_metrics)`), or as the main thread where its stack begins in the main
// program's top level. "" where nothing says anything.
func ThreadNames(r *Result, pid int, osName string, py PyStack) string {
	// The OS keeps 15 bytes of a name: a Python name cut there (as
	// CPython 3.14 names its threads) says nothing more.
	cut := len(osName) == commLength && strings.HasPrefix(py.ThreadName, osName)
	own := osName != "" && !r.inheritedName(pid, osName) && !cut
	switch {
	case py.ThreadName != "" && own && osName != py.ThreadName:
		return fmt.Sprintf("%q (OS name %q)", py.ThreadName, osName)
	case py.ThreadName != "":
		return fmt.Sprintf("%q", py.ThreadName)
	case own:
		return fmt.Sprintf("%q", osName)
	}
	return threadEntry(pid, py)
}

// threadEntry names a Python thread by its stack's outermost frames: the
// function threading started it in, "(started in log_metrics)", or the
// main program's top level on the process's main thread, "(the main
// thread)"; "" where the stack says neither.
func threadEntry(pid int, py PyStack) string {
	if py.State != PyFrames || len(py.Frames) == 0 || py.Omitted > 0 {
		return "" // the outermost frames are not all there
	}
	outer := len(py.Frames) - 1
	if py.Frames[outer].Function == "<module>" {
		if py.Frames[outer].File == "" || strings.HasPrefix(py.Frames[outer].File, "<frozen") {
			return ""
		}
		return "(the main thread)"
	}
	// threading's own frames (_bootstrap, _bootstrap_inner, run) come
	// first; the function after them is the thread's target.
	for i := outer; i >= 0; i-- {
		if filepath.Base(py.Frames[i].File) == "threading.py" {
			continue
		}
		if i == outer {
			return "" // not a thread threading started
		}
		return fmt.Sprintf("(started in %s)", py.Frames[i].Function)
	}
	return ""
}

// threadLabel is "thread 561 \"metrics\"", or "native thread 533
// \"pt_nccl_watchdg\"" for a thread with no Python state in a process that
// runs Python.
func threadLabel(r *Result, pid, tid int, osName string, py PyStack) string {
	s := fmt.Sprintf("thread %d", tid)
	if py.State == PyNative {
		if p := r.process(pid); p != nil && p.Python {
			s = "native " + s
		}
	}
	if names := ThreadNames(r, pid, osName, py); names != "" {
		s += " " + names
	}
	return s
}

// CaptureName is how a line names a capture: "the global-mode capture
// begun by thread 485 on stream 0x356a1150", with the program's Python
// line where the trace read it ("begun at train.py:30 in step by thread
// 485 \"MainThread\""), and the process where the trace saw several.
func CaptureName(r *Result, c *Capture) string {
	s := fmt.Sprintf("the %s-mode capture begun", c.Mode)
	if at := c.BeginPython.Call().Where; at != nil {
		s += " at " + at.String()
	}
	s += " by " + threadLabel(r, c.PID, c.TID, c.BeginThreadName, c.BeginPython)
	if len(r.Processes)+r.ProcessesOmitted > 1 {
		s += fmt.Sprintf(" of process %d", c.PID)
	}
	return s + fmt.Sprintf(" on stream %#x", c.Stream)
}

// CallName is how a line names a call. Where the calling thread's Python
// stack was read, by the program's line and the Python function it was
// in: `torch.cuda.synchronize() at train.py:42 in log_metrics, thread 561
// "metrics" (cuCtxSynchronize)`; a line that called native code directly
// is followed by the runtime call and its callers. Otherwise by the
// runtime call, its thread and its callers outside the runtime, innermost
// first, ← read as "called from": `cuCtxSynchronize from thread 512
// (cudaDeviceSynchronize ← c10::cuda::device_synchronize)`.
func CallName(r *Result, c *Call) string {
	callers := ReadableCallers(c.Callers).Summary(2)
	thread := threadLabel(r, c.PID, c.TID, c.ThreadName, c.Python)
	py := c.Python.Call()
	switch {
	case py.Where != nil && py.Called != "":
		return fmt.Sprintf("%s() at %s, %s (%s)", py.Called, py.Where, thread, BaseName(c.Name))
	case py.Where != nil && callers != "":
		return fmt.Sprintf("%s at %s, %s (%s)", BaseName(c.Name), py.Where, thread, callers)
	case py.Where != nil:
		return fmt.Sprintf("%s at %s, %s", BaseName(c.Name), py.Where, thread)
	case callers != "":
		return fmt.Sprintf("%s from %s (%s)", BaseName(c.Name), thread, callers)
	}
	return fmt.Sprintf("%s from %s", BaseName(c.Name), thread)
}
