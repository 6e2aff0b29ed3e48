package repeat

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"miotool/internal/childproc"
)

// A crash in a library, reached from Python through ctypes, as the crash
// handler reports it: libc's frames first, then the library, the FFI and
// the interpreter.
func ctypesCrash(offset uint64, line int) Crash {
	return Crash{PID: 42, Signal: syscall.SIGSEGV, ThreadName: "conv-worker",
		Native: []NativeFrame{
			{Object: "/usr/lib/x86_64-linux-gnu/libc.so.6", Function: "__memmove_avx_unaligned_erms", Offset: 0x1a2b},
			{Object: "/opt/rocm/lib/libMIOpen.so.1", Function: "fdeep::model::predict", Offset: offset},
			{Object: "/opt/rocm/lib/libMIOpen.so.1", Function: "miopen::ai::GetFdeepModel", Offset: offset + 0x100},
			{Object: "/usr/lib/x86_64-linux-gnu/libffi.so.8", Function: "ffi_call_unix64", Offset: 0x77},
			{Object: "/usr/lib/python3.12/lib-dynload/_ctypes.cpython-312-x86_64-linux-gnu.so", Function: "_ctypes_callproc", Offset: 0x88},
			{Object: "/usr/bin/python3.12", Function: "_PyEval_EvalFrameDefault", Offset: 0x99},
			{Object: "/opt/rocm/lib/libMIOpen.so.1", Function: "miopenConvolutionForward", Offset: 0x500},
		},
		Python: PyStack{State: "frames", Frames: []PyFrame{
			{File: "/home/u/test_threads.py", Line: line, Function: "_worker"},
			{File: "/usr/lib/python3.12/threading.py", Line: 1010, Function: "run"},
			{File: "/usr/lib/python3.12/threading.py", Line: 1073, Function: "_bootstrap_inner"},
			{File: "/usr/lib/python3.12/threading.py", Line: 1030, Function: "_bootstrap"},
		}},
	}
}

func TestSignatureFromCrashReport(t *testing.T) {
	o := Outcome{Kind: RunCrashed, Signal: syscall.SIGSEGV, PID: 42}
	c := ctypesCrash(0x1000, 12)
	s := signatureOf(o, &c, "whatever stderr says")
	wantNative := []string{"libMIOpen.so.1(fdeep::model::predict)", "libMIOpen.so.1(miopen::ai::GetFdeepModel)", "libMIOpen.so.1(miopenConvolutionForward)"}
	wantPython := []string{"_worker (test_threads.py:12)", "run (threading.py:1010)", "_bootstrap_inner (threading.py:1073)"}
	if !slices.Equal(s.native, wantNative) || !slices.Equal(s.python, wantPython) || s.from != FromCrashReport || s.thread != "conv-worker" {
		t.Errorf("signature native %q python %q from %s thread %q; want %q, %q from the crash report, conv-worker", s.native, s.python, s.from, s.thread, wantNative, wantPython)
	}
	// Another build of the library (other offsets), another line of the
	// same function: the same place.
	c2 := ctypesCrash(0x2000, 14)
	if s2 := signatureOf(o, &c2, "other words"); s2.key != s.key {
		t.Errorf("the same functions at other offsets and lines gave another signature:\n%q\n%q", s.key, s2.key)
	}
	// Another signal in the same place, or another function: another group.
	abrt := Outcome{Kind: RunCrashed, Signal: syscall.SIGABRT}
	if signatureOf(abrt, &c, "").key == s.key {
		t.Error("SIGABRT and SIGSEGV at one place share a signature")
	}
	c3 := ctypesCrash(0x1000, 12)
	c3.Native[1].Function = "fdeep::internal::apply_layer"
	if signatureOf(o, &c3, "").key == s.key {
		t.Error("another innermost function shares the signature")
	}
}

func TestSignatureWithoutSymbols(t *testing.T) {
	c := Crash{Signal: syscall.SIGSEGV, Native: []NativeFrame{
		{Object: "/lib/libc.so.6", Function: "raise"},
		{Object: "/opt/lib/libstripped.so", Offset: 0x4242},
		{Object: "?", Offset: 0x10},
	}}
	s := signatureOf(Outcome{Kind: RunCrashed, Signal: syscall.SIGSEGV}, &c, "")
	if !slices.Equal(s.native, []string{"libstripped.so+0x4242"}) {
		t.Errorf("native %q: want the stripped library at its offset, libc and the unknown frame left out", s.native)
	}
	// Every frame in libc: the innermost ones as they are, rather than none.
	c.Native = []NativeFrame{{Object: "/lib/libc.so.6", Function: "abort"}, {Object: "/lib/libc.so.6", Function: "__libc_start_main"}}
	s = signatureOf(Outcome{Kind: RunCrashed, Signal: syscall.SIGABRT}, &c, "")
	if !slices.Equal(s.native, []string{"libc.so.6(abort)", "libc.so.6(__libc_start_main)"}) {
		t.Errorf("native %q: want libc's frames when there is nothing else", s.native)
	}
}

func TestSignatureFromStderr(t *testing.T) {
	segv := Outcome{Kind: RunCrashed, Signal: syscall.SIGSEGV}
	a := signatureOf(segv, nil, "starting run 3\npredicting with model 0x55d4a000 at 12:01:07\n")
	b := signatureOf(segv, nil, "starting run 41\npredicting with model 0x55d4f000 at 12:09:59\n")
	if a.key != b.key || a.from != FromStderr {
		t.Errorf("two runs whose last lines differ only in numbers: signatures %q and %q (from %s)", a.key, b.key, a.from)
	}
	if c := signatureOf(segv, nil, "starting run 3\npredicting with another model\n"); c.key == a.key {
		t.Error("other words share the signature")
	}
	// Only the last lines count: what a run printed long before its end
	// does not split a group.
	long := "setup line A\n" + strings.Repeat("progress\n", 3) + "boom\n"
	long2 := "setup line B\n" + strings.Repeat("progress\n", 3) + "boom\n"
	if signatureOf(segv, nil, long).key != signatureOf(segv, nil, long2).key {
		t.Error("lines before the last three split a group")
	}
	// Silence: the signal alone.
	if s := signatureOf(segv, nil, " \n"); s.from != FromStatus || s.key != "crashed SIGSEGV" {
		t.Errorf("silent crash: %q from %s", s.key, s.from)
	}
	failed := signatureOf(Outcome{Kind: RunFailed, Exit: 3}, nil, "wrong sum 14\n")
	if failed2 := signatureOf(Outcome{Kind: RunFailed, Exit: 4}, nil, "wrong sum 14\n"); failed.key == failed2.key {
		t.Error("exit statuses 3 and 4 share a signature")
	}
	// A hang is one group, whatever it printed last.
	if h1, h2 := signatureOf(Outcome{Kind: RunHung}, nil, "step 1"), signatureOf(Outcome{Kind: RunHung}, nil, "step 9 of x"); h1.key != h2.key {
		t.Error("two hangs in two groups")
	}
}

func TestFaulthandlerFrames(t *testing.T) {
	stderr := `Fatal Python error: Segmentation fault

Thread 0x00007f53b5e46b80 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 327 in wait
  File "t.py", line 31 in main

Current thread 0x00007f53b4fd26c0 (most recent call first):
  File "/home/u/t.py", line 18 in predict
  File "/home/u/t.py", line 22 in worker

Extension modules: numpy.core._multiarray_umath (total: 1)
`
	got, cut := faulthandlerFrames(stderr)
	want := []PyFrame{{"/home/u/t.py", 18, "predict"}, {"/home/u/t.py", 22, "worker"}}
	if !slices.Equal(got, want) || cut {
		t.Errorf("faulthandlerFrames = %+v (cut %v), want %+v", got, cut, want)
	}
	if got, _ := faulthandlerFrames("Segmentation fault\n"); got != nil {
		t.Error("frames from a standard error without faulthandler's report")
	}
}

// TestFaulthandlerCutShort: faulthandler walks the other threads first,
// and a second crash can end the process before it reaches the crashing
// thread's block. Such reports are one group that names no frames: the
// blocks printed are other threads'.
func TestFaulthandlerCutShort(t *testing.T) {
	segv := Outcome{Kind: RunCrashed, Signal: syscall.SIGSEGV}
	header := "Fatal Python error: Segmentation fault\n\n"
	other := "Thread 0x00007facf7fff6c0 (most recent call first):\n" +
		"  File \"/w/cache_race.py\", line 20 in predict\n  File \"/w/cache_race.py\", line 26 in worker\n"
	waiting := "Thread 0x00007fba3c9beb80 (most recent call first):\n" +
		"  File \"/usr/lib/python3.11/threading.py\", line 1139 in _wait_for_tstate_lock\n"
	for _, c := range []struct {
		name, stderr string
		cut          bool
	}{
		{"cut after the header", header, true},
		{"cut mid-block", header + other[:len(other)-9], true},
		{"cut after another thread", header + waiting + "\n" + other, true},
		{"thread blocks without a fatal error", other, false},
	} {
		got, cut := faulthandlerFrames(c.stderr)
		if got != nil || cut != c.cut {
			t.Errorf("%s: %+v (cut %v), want no frames (cut %v)", c.name, got, cut, c.cut)
		}
	}
	a := signatureOf(segv, nil, header+other)
	b := signatureOf(segv, nil, header+waiting+"\n"+other[:40])
	if a.key != b.key || a.from != FromFaulthandlerCut || len(a.python) != 0 {
		t.Errorf("cut reports: keys %q and %q from %s with frames %q; want one group that names no frames", a.key, b.key, a.from, a.python)
	}
	if full := signatureOf(segv, nil, header+"Current thread 0x1 (most recent call first):\n"+other[strings.Index(other, "\n")+1:]); full.key == a.key {
		t.Error("a complete report shares the cut reports' group")
	}
}

func TestPickCrash(t *testing.T) {
	child := Crash{PID: 7, Signal: syscall.SIGABRT}
	other := Crash{PID: 8, Signal: syscall.SIGSEGV}
	own := Crash{PID: 9, Signal: syscall.SIGSEGV}
	o := Outcome{Kind: RunCrashed, Signal: syscall.SIGSEGV, PID: 9}
	if c := pickCrash([]Crash{child, other, own}, o); c == nil || c.PID != 9 {
		t.Errorf("picked %+v, want the run's own process", c)
	}
	if c := pickCrash([]Crash{child, other}, o); c == nil || c.PID != 8 {
		t.Errorf("picked %+v, want the one with the run's signal", c)
	}
	if c := pickCrash([]Crash{child}, o); c == nil || c.PID != 7 {
		t.Errorf("picked %+v, want the only one", c)
	}
	if pickCrash(nil, o) != nil {
		t.Error("picked a crash from none")
	}
}

// TestMemoryGrowsWithSignatures holds a build's memory to its signatures:
// ten thousand runs of three signatures keep three groups; a program whose
// every failure reads differently keeps MaxGroups and counts the rest.
func TestMemoryGrowsWithSignatures(t *testing.T) {
	f := newBuildFacts(Build{Label: "x"}, 10000, nil)
	for r := range 10000 {
		switch r % 4 {
		case 0:
			f.add(r, -1, Outcome{Kind: RunPassed}, nil, "")
		case 1:
			f.add(r, -1, Outcome{Kind: RunCrashed, Signal: syscall.SIGSEGV}, nil, fmt.Sprintf("model %#x\n", r*4096))
		case 2:
			f.add(r, -1, Outcome{Kind: RunCrashed, Signal: syscall.SIGABRT}, nil, "double free\n")
		case 3:
			f.add(r, -1, Outcome{Kind: RunFailed, Exit: 3}, nil, fmt.Sprintf("wrong sum %d\n", r))
		}
	}
	if len(f.Groups) != 3 || f.Ungrouped != 0 || f.Finished() != 10000 || f.NotPassed() != 7500 {
		t.Fatalf("%d groups, %d ungrouped, %d finished, %d not passed", len(f.Groups), f.Ungrouped, f.Finished(), f.NotPassed())
	}
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
	g := newBuildFacts(Build{Label: "y"}, 1000, nil)
	for r := range 1000 {
		msg := words[r%10] + " " + words[(r/10)%10] + " " + words[(r/100)%10]
		g.add(r, -1, Outcome{Kind: RunFailed, Exit: 1}, nil, msg)
	}
	if len(g.Groups) != MaxGroups || g.Ungrouped != 1000-MaxGroups || g.Failed != 1000 {
		t.Errorf("%d groups, %d ungrouped, %d failed: want %d, %d, 1000", len(g.Groups), g.Ungrouped, g.Failed, MaxGroups, 1000-MaxGroups)
	}
}

func TestKeptStderr(t *testing.T) {
	long := strings.Repeat("x", 1000)
	lines := make([]string, 50)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d", i)
	}
	got := keptStderr(strings.Join(lines, "\n") + "\n" + long + "\n")
	kept := strings.Split(got, "\n")
	if len(kept) != stderrKeptLines || kept[0] != fmt.Sprintf("line %d", 50-stderrKeptLines+1) || len([]rune(kept[len(kept)-1])) != stderrLineWidth+1 {
		t.Errorf("kept %d lines from %q to a line of %d characters", len(kept), kept[0], len([]rune(kept[len(kept)-1])))
	}
}

func TestClassifyNotStarted(t *testing.T) {
	o := Classify(childproc.Result{}, errors.New("fork: resource temporarily unavailable"))
	if o.Kind != RunNotStarted || o.Err == nil {
		t.Errorf("Classify of a start failure = %+v", o)
	}
}
