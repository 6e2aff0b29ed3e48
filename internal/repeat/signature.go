package repeat

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"miotool/internal/childproc"
	"miotool/internal/words"
)

// CrashSource is where the crash reports of the runs' processes come from:
// the observer's crash handler, which a run asks for through its
// environment. A run's processes, and every process they start, report a
// crash with the run's token.
type CrashSource interface {
	// Env is what run's processes add to their environment so that a
	// crash is reported with the token run.
	Env(run string) []string
	// Crashes returns, and forgets, what run's processes reported, in the
	// order they arrived.
	Crashes(run string) []Crash
}

// Crash is one crash report: the crashing thread's stacks.
type Crash struct {
	PID        int
	Signal     syscall.Signal
	ThreadName string
	// Native is the crashing thread's native stack, innermost first,
	// every frame (libc and the runtimes included).
	Native []NativeFrame
	// Python is its Python stack when it is a CPython thread.
	Python PyStack
}

// NativeFrame is one native frame.
type NativeFrame struct {
	// Object is the file name of the module, e.g. libMIOpen.so.1; "" or
	// "?" when unknown.
	Object string
	// Function is the symbol, demangled; "" when no symbol names it.
	Function string
	// Offset is the address's offset in the module.
	Offset uint64
}

// String is the frame as a signature shows it: libfoo.so(bar), or
// libfoo.so+0x1a2b without a symbol.
func (f NativeFrame) String() string {
	obj := f.Object
	if obj == "" {
		obj = "?"
	}
	if f.Function == "" {
		return fmt.Sprintf("%s+%#x", obj, f.Offset)
	}
	return obj + "(" + f.Function + ")"
}

// PyFrame is one Python frame.
type PyFrame struct {
	File     string
	Line     int // 0: unknown
	Function string
}

// String is the frame as a group shows it: predict (model.py:31).
func (f PyFrame) String() string {
	where := filepath.Base(f.File)
	if f.Line > 0 {
		where += fmt.Sprintf(":%d", f.Line)
	}
	return f.Function + " (" + where + ")"
}

// PyStack is what could be read of the crashing thread's Python stack.
type PyStack struct {
	// State: "" not collected, "native" not a Python thread, "frames"
	// read, "unavailable" a Python thread whose frames could not be read.
	State  string
	Why    string
	Frames []PyFrame // innermost first
}

// signatureFrames is how many frames of each stack a signature holds: the
// innermost frames outside libc and the runtimes say where it crashed;
// more would split one crash site by the paths that reach it.
const signatureFrames = 3

// runtimeObjects are the modules whose frames a signature skips: the C
// library and the dynamic loader, the C++ and compiler runtimes (abort's
// and terminate's frames), and the Python interpreter with its FFI
// (its frames are the Python stack's to show).
var runtimeObjects = regexp.MustCompile(`^(libc[.-]|libpthread|libdl[.-]|librt[.-]|libm[.-]|ld-linux|ld-musl|ld\.so|libgcc_s|libstdc\+\+|libc\+\+|libunwind|libpython|python[0-9.]*$|libffi|_ctypes|linux-vdso|\[vdso\]|libmiotool-observer)`)

// skipFrame reports whether a frame is outside what a signature shows:
// unknown, or in libc or a runtime.
func skipFrame(f NativeFrame) bool {
	obj := filepath.Base(f.Object)
	return f.Object == "" || f.Object == "?" || runtimeObjects.MatchString(obj)
}

// topNative is the innermost frames of stack outside libc and the
// runtimes; the innermost frames as they are when every frame is.
func topNative(stack []NativeFrame) []NativeFrame {
	var out []NativeFrame
	for _, f := range stack {
		if !skipFrame(f) {
			out = append(out, NativeFrame{Object: filepath.Base(f.Object), Function: f.Function, Offset: f.Offset})
			if len(out) == signatureFrames {
				return out
			}
		}
	}
	if len(out) == 0 {
		for _, f := range stack[:min(len(stack), signatureFrames)] {
			out = append(out, NativeFrame{Object: filepath.Base(f.Object), Function: f.Function, Offset: f.Offset})
		}
	}
	return out
}

// signature is what groups a run that did not pass with others: its kind,
// its signal or exit status, and where it happened. A crash that was
// reported is placed by the innermost frames of its stacks outside libc
// and the runtimes (a symbol's name, not its offset, so that one function
// is one place); one that was not, and every failure and hang, by the last
// lines of its standard error with the numbers in them masked, which is
// what a reader would group them by.
type signature struct {
	key    string
	native []string
	python []string
	thread string
	from   Source
}

// Source says where a group's signature came from.
type Source string

// The sources of a signature.
const (
	FromCrashReport Source = "crash report"   // the observer's crash handler
	FromStderr      Source = "standard error" // the last lines of the run's standard error
	// FromFaulthandler: the crashing thread's Python frames as CPython's
	// faulthandler printed them on standard error.
	FromFaulthandler Source = "faulthandler"
	// FromFaulthandlerCut: a faulthandler report that ended before it
	// named the crashing thread (see faulthandlerFrames): the crash is
	// counted, its place is not known.
	FromFaulthandlerCut Source = "faulthandler, cut short before the crashing thread"
	FromStatus          Source = "the exit status" // nothing else: a hang, or silence
)

// stderrSignatureLines is how many last lines of standard error a
// signature without a crash report holds.
const stderrSignatureLines = 3

func signatureOf(o Outcome, crash *Crash, stderr string) signature {
	var head string
	switch o.Kind {
	case RunCrashed:
		head = "crashed " + childproc.SignalName(o.Signal)
	case RunFailed:
		head = fmt.Sprintf("failed %d", o.Exit)
	default:
		head = string(o.Kind)
	}
	if crash != nil {
		s := signature{from: FromCrashReport, thread: crash.ThreadName}
		keys := []string{head}
		for _, f := range topNative(crash.Native) {
			s.native = append(s.native, f.String())
			if f.Function != "" {
				keys = append(keys, f.Object+"("+f.Function+")")
			} else {
				keys = append(keys, f.String())
			}
		}
		keys = append(keys, "|")
		for _, f := range crash.Python.Frames[:min(len(crash.Python.Frames), signatureFrames)] {
			s.python = append(s.python, f.String())
			keys = append(keys, filepath.Base(f.File)+":"+f.Function)
		}
		s.key = strings.Join(keys, "\x00")
		return s
	}
	if o.Kind == RunHung {
		// A hang's last words are wherever it was when killed.
		return signature{key: head, from: FromStatus}
	}
	frames, cut := faulthandlerFrames(stderr)
	if len(frames) > 0 {
		s := signature{from: FromFaulthandler}
		keys := []string{head, "|"}
		for _, f := range frames[:min(len(frames), signatureFrames)] {
			s.python = append(s.python, f.String())
			keys = append(keys, filepath.Base(f.File)+":"+f.Function)
		}
		s.key = strings.Join(keys, "\x00")
		return s
	}
	if cut {
		// Its last lines are wherever another thread was: one group.
		return signature{key: head + "\x00faulthandler cut short", from: FromFaulthandlerCut}
	}
	tail := maskNumbers(words.LastLines(stderr, stderrSignatureLines))
	if tail == "" {
		return signature{key: head, from: FromStatus}
	}
	return signature{key: head + "\x00" + tail, from: FromStderr}
}

var faulthandlerFrame = regexp.MustCompile(`^\s+File "(.*)", line (\d+) in (.+)$`)

// faulthandlerFrames are the crashing thread's Python frames, innermost
// first, from what CPython's faulthandler (python -X faulthandler,
// PYTHONFAULTHANDLER=1, pytest's default) printed on a fatal signal: the
// block under its "Current thread" line. The other threads' blocks say
// where they were, which changes from run to run. Nil without one.
//
// cut says that faulthandler began a report ("Fatal Python error") and
// never reached its "Current thread" block: it walks the other threads
// first, while they run on, and a second crash (another racing thread's,
// or its own on a frame being freed) ends the process mid-report. The
// blocks it did print are other threads', so the crash's frames are not
// known.
func faulthandlerFrames(stderr string) (frames []PyFrame, cut bool) {
	lines := strings.Split(stderr, "\n")
	current, fatal := -1, false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "Fatal Python error: "):
			fatal = true
		case strings.HasPrefix(l, "Current thread 0x") && strings.Contains(l, "most recent call first"):
			current = i
		}
	}
	if current < 0 {
		return nil, fatal
	}
	return framesAfter(lines, current), false
}

// framesAfter reads the frame lines that follow a thread's header line.
func framesAfter(lines []string, header int) []PyFrame {
	var out []PyFrame
	for _, l := range lines[header+1:] {
		m := faulthandlerFrame.FindStringSubmatch(strings.TrimRight(l, "\r"))
		if m == nil {
			break
		}
		line, _ := strconv.Atoi(m[2])
		out = append(out, PyFrame{File: m[1], Line: line, Function: m[3]})
	}
	return out
}

var (
	hexNumber = regexp.MustCompile(`0[xX][0-9a-fA-F]+`)
	decNumber = regexp.MustCompile(`[0-9]+`)
	blanks    = regexp.MustCompile(`[ \t]+`)
)

// maskNumbers hides what changes from run to run in the same message:
// addresses, process ids, times, counts.
func maskNumbers(s string) string {
	s = hexNumber.ReplaceAllString(s, "0x#")
	s = decNumber.ReplaceAllString(s, "#")
	return blanks.ReplaceAllString(s, " ")
}

// pickCrash is the report that explains a run's end: from the run's own
// process with the signal that ended it, else any with that signal (a
// child process's crash that took the run down), else the first; nil when
// there is none.
func pickCrash(crashes []Crash, o Outcome) *Crash {
	if len(crashes) == 0 {
		return nil
	}
	for _, want := range []func(Crash) bool{
		func(c Crash) bool { return c.PID == o.PID && c.Signal == o.Signal },
		func(c Crash) bool { return c.Signal == o.Signal },
	} {
		for i := range crashes {
			if want(crashes[i]) {
				return &crashes[i]
			}
		}
	}
	return &crashes[0]
}
