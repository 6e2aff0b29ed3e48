package trace

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/rules"
)

const (
	global      = hip.CaptureModeGlobal
	threadLocal = hip.CaptureModeThreadLocal
	relaxed     = hip.CaptureModeRelaxed
)

func ids(cs []*Capture) []int {
	var out []int
	for _, c := range cs {
		out = append(out, c.ID)
	}
	return out
}

func sameIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAttribution holds the attribution rule to its cases: which captures
// count a call, and which a refused call is held to have broken.
func TestAttribution(t *testing.T) {
	// Process 1: capture 1 global by thread 10 on stream 0xa, capture 2
	// relaxed by thread 11 on 0xb, capture 3 thread-local by thread 12 on
	// 0xc, capture 4 a HIP one on 0xa.
	active := []*Capture{
		{ID: 1, API: hip.DialectCUDA, PID: 1, TID: 10, Stream: 0xa, Mode: global},
		{ID: 2, API: hip.DialectCUDA, PID: 1, TID: 11, Stream: 0xb, Mode: relaxed},
		{ID: 3, API: hip.DialectCUDA, PID: 1, TID: 12, Stream: 0xc, Mode: threadLocal},
		{ID: 4, API: hip.DialectHIP, PID: 1, TID: 10, Stream: 0xa, Mode: global},
	}
	cases := []struct {
		name            string
		call            Call
		counted, broken []int
	}{
		{"a launch on a capturing stream is that capture's alone",
			Call{API: hip.DialectCUDA, PID: 1, TID: 12, Name: "cuLaunchKernel", Stream: 0xb}, []int{2}, nil},
		{"a refused query of a capturing stream broke that capture",
			Call{API: hip.DialectCUDA, PID: 1, TID: 10, Name: "cuStreamQuery", Stream: 0xc, Result: 900}, []int{3}, []int{3}},
		{"an unrelated call counts in every capture of its runtime",
			Call{API: hip.DialectCUDA, PID: 1, TID: 13, Name: "cuStreamQuery", Stream: 0xd}, []int{1, 2, 3}, nil},
		{"device synchronize breaks every capture of its runtime",
			Call{API: hip.DialectCUDA, PID: 1, TID: 13, Name: "cuCtxSynchronize_v2", Result: 900}, []int{1, 2, 3}, []int{1, 2, 3}},
		{"a global-mode thread's refused query breaks the global captures and its own",
			Call{API: hip.DialectCUDA, PID: 1, TID: 12, Name: "cuStreamQuery", Stream: 0xd, Result: 900}, []int{1, 2, 3}, []int{1, 3}},
		{"a relaxed thread's refusal falls back to every capture when no rule names one",
			Call{API: hip.DialectCUDA, PID: 1, TID: 13, Name: "cuEventQuery", Result: 900, ThreadMode: relaxed}, []int{1, 2, 3}, []int{1, 2, 3}},
		{"a thread-local thread's refusal is its own capture's",
			Call{API: hip.DialectCUDA, PID: 1, TID: 12, Name: "cuMemAlloc_v2", Result: 900, ThreadMode: threadLocal}, []int{1, 2, 3}, []int{3}},
		{"HIP's synchronous copy breaks every HIP capture",
			Call{API: hip.DialectHIP, PID: 1, TID: 20, Name: "hipMemcpy", Result: 906, ThreadMode: relaxed}, []int{4}, []int{4}},
	}
	for _, c := range cases {
		call := c.call
		counted, broken := attribute(&call, active)
		if !sameIDs(ids(counted), c.counted) || !sameIDs(ids(broken), c.broken) {
			t.Errorf("%s: counted %v broken %v, want %v and %v", c.name, ids(counted), ids(broken), c.counted, c.broken)
		}
	}
}

func ev(kind string, pid, tid int, t int64, api hip.Dialect, name string, stream uint64, result hip.Code) Event {
	return Event{Kind: kind, PID: pid, TID: tid, Time: t, API: api, Name: name, Stream: stream, Result: result}
}

func TestCollector(t *testing.T) {
	cu := hip.DialectCUDA
	c := newCollector(Limits{Calls: 2, Threads: 2, Processes: 2}, nil)
	for _, e := range []Event{
		{Kind: kindHello, PID: 1, TID: 1, Time: 1, PPID: 0, Exe: "/bin/a"},
		ev(kindBegin, 1, 1, 10, cu, "cuStreamBeginCapture_v2", 0xa, 0),
		ev(kindCall, 1, 1, 11, cu, "cuLaunchKernel", 0xa, 0),
		ev(kindCall, 1, 2, 12, cu, "cuStreamQuery", 0xa, 900),
		ev(kindCall, 1, 3, 13, cu, "cuStreamQuery", 0xa, 900),
		ev(kindCall, 1, 4, 14, cu, "cuStreamQuery", 0xa, 900),
		ev(kindEnd, 1, 1, 20, cu, "cuStreamEndCapture", 0xa, 901),
		// Made before the end, arrived after it.
		ev(kindCall, 1, 5, 19, cu, "cuMemAlloc_v2", 0, 0),
		// After the end: in no capture.
		ev(kindCall, 1, 5, 21, cu, "cuMemAlloc_v2", 0, 0),
		{Kind: kindHello, PID: 1, TID: 1, Time: 30, Exe: "/bin/b"}, // an exec
		{Kind: kindFork, PID: 2, TID: 2, Time: 31, PPID: 1, Exe: "/bin/b"},
		ev(kindBegin, 2, 2, 32, cu, "cuStreamBeginCapture_v2", 0xb, 0),
		{Kind: kindGone, PID: 2, TID: 2, Time: 33, API: cu, Stream: 0xb},
		ev(kindBegin, 2, 2, 34, cu, "cuStreamBeginCapture", 0, 900),
		{Kind: kindHello, PID: 3, TID: 3, Time: 35, Exe: "/bin/c"}, // past the limit
	} {
		c.add(e)
	}
	if len(c.procs) != 2 || c.procsOmitted != 1 || c.procs[0].Exe != "/bin/b" || !c.procs[1].Forked || c.procs[1].PPID != 1 {
		t.Errorf("processes %+v %+v", c.procs[0], c.procs[1])
	}
	if len(c.captures) != 3 {
		t.Fatalf("%d captures", len(c.captures))
	}
	a := c.captures[0]
	if a.Calls != 5 || a.ByName["cuStreamQuery"] != 3 || a.ByName["cuMemAlloc"] != 1 || len(a.ByThread) != 2 || a.OtherThreads != 3 {
		t.Errorf("counts %d %v %v other %d", a.Calls, a.ByName, a.ByThread, a.OtherThreads)
	}
	if len(a.Refused) != 2 || a.RefusedOmitted != 1 || !a.Invalidated() || a.End.TID != 1 {
		t.Errorf("refused %d (+%d), end %+v", len(a.Refused), a.RefusedOmitted, a.End)
	}
	if len(a.Candidates) != 1 || a.Candidates[0].Action != rules.Malloc || a.Candidates[0].TID != 5 {
		t.Errorf("candidates %+v", a.Candidates)
	}
	if c.stray != 1 {
		t.Errorf("stray %d, want the call after the end", c.stray)
	}
	if b := c.captures[1]; b.End == nil || !b.End.StreamGone || b.EndedWell() {
		t.Errorf("capture on a destroyed stream: %+v", b.End)
	}
	if f := c.captures[2]; f.Ran() || len(c.active[2]) != 0 {
		t.Errorf("a failed begin ran: %+v", f)
	}
}

func TestCollectorWrongThreadEnd(t *testing.T) {
	for _, api := range []hip.Dialect{hip.DialectHIP, hip.DialectCUDA} {
		c := newCollector(Limits{}, nil)
		c.add(ev(kindBegin, 1, 1, 10, api, "begin", 0xa, 0))
		c.add(ev(kindEnd, 1, 2, 11, api, "end", 0xa, 908))
		cp := c.captures[0]
		if len(cp.Refused) != 1 || cp.Refused[0].Action != rules.EndCaptureOtherThread {
			t.Errorf("%s: refused %+v", api, cp.Refused)
		}
		// HIP keeps the capture; CUDA tears it down.
		if ended := cp.End != nil; ended != (api == hip.DialectCUDA) {
			t.Errorf("%s: end %+v", api, cp.End)
		}
	}
}

func TestCollectorKeepsBoundedCaptures(t *testing.T) {
	c := newCollector(Limits{Captures: 3}, nil)
	for i := 0; i < 10; i++ {
		c.add(ev(kindBegin, 1, 1, int64(10*i), hip.DialectHIP, "begin", 0xa, 0))
		res := hip.Success
		if i == 7 {
			res = 901
		}
		c.add(ev(kindEnd, 1, 1, int64(10*i+5), hip.DialectHIP, "end", 0xa, res))
	}
	r := &Result{Captures: c.captures, CapturesOmitted: c.omitted}
	if len(c.captures) > 4 || r.Ran() != 10 || len(r.Failing()) != 1 {
		t.Errorf("kept %d, ran %d, failing %d", len(c.captures), r.Ran(), len(r.Failing()))
	}
	// Their end records name no graph, so they say nothing of its nodes:
	// no capture is taken for an empty one.
	if n := len(r.Empty()); n != 0 {
		t.Errorf("%d captures read as empty from end records that do not say", n)
	}
}

func frames(names ...string) []Frame {
	var out []Frame
	for _, n := range names {
		out = append(out, Frame{Module: "/lib/x.so", Symbol: n})
	}
	return out
}

func TestFirstCulprit(t *testing.T) {
	sync := &Call{TID: 2, Time: 20, Name: "cuCtxSynchronize_v2", Result: 900}
	launch := &Call{TID: 1, Time: 15, Name: "cuLaunchKernel", Result: 901}
	late := &Call{TID: 3, Time: 50, Name: "cuStreamQuery", Result: 900}
	other := &Call{TID: 4, Time: 5, Name: "cuStreamQuery", Result: 905}
	inv := &Capture{ID: 1, Begin: 10, End: &Ending{Time: 40, Result: 901}, Refused: []*Call{launch, sync, late}}
	ok := &Capture{ID: 2, Begin: 1, End: &Ending{Time: 60}, Refused: []*Call{other}}
	r := &Result{Captures: []*Capture{ok, inv}}
	if c, cp := r.FirstCulprit(); c != sync || cp != inv {
		t.Errorf("culprit %+v in %v, want the synchronize before the invalidated end", c, cp)
	}
	r = &Result{Captures: []*Capture{ok}}
	if c, _ := r.FirstCulprit(); c != other {
		t.Errorf("culprit %+v, want the refusal of a capture that ended well when there is no other", c)
	}
	r = &Result{Captures: []*Capture{{End: &Ending{Result: 901}, Refused: []*Call{launch}}}}
	if c, _ := r.FirstCulprit(); c != nil {
		t.Errorf("culprit %+v: a 901 only reports an earlier refusal", c)
	}
}

// TestTheCulpritIsTheEarliest: of two refused calls before a capture's
// end, the culprit is the earlier one, whatever order their records
// arrived in (threads report independently): the later one may be its
// consequence, never its cause. The capture's own screen agrees.
func TestTheCulpritIsTheEarliest(t *testing.T) {
	first := &Call{PID: 1, TID: 533, Time: 20, Name: "cuEventQuery", Result: 900}
	second := &Call{PID: 1, TID: 561, Time: 30, Name: "cuCtxSynchronize_v2", Result: 900}
	then1 := &Call{PID: 1, TID: 485, Time: 31, Name: "cuLaunchKernel", Stream: 0xa, Result: 901}
	then2 := &Call{PID: 1, TID: 485, Time: 32, Name: "cuLaunchKernel", Stream: 0xa, Result: 901}
	for _, order := range [][]*Call{{second, first, then1, then2}, {then2, then1, first, second}} {
		cp := &Capture{ID: 1, PID: 1, TID: 485, Stream: 0xa, Begin: 10, End: &Ending{TID: 485, Time: 40, Result: 901}, Refused: order}
		r := &Result{Captures: []*Capture{cp}}
		if c, at := r.FirstCulprit(); c != first || at != cp {
			t.Errorf("culprit %+v, want the earlier refusal %+v", c, first)
		}
		if j := Judge(r, false); j.Culprit != first || !strings.HasPrefix(j.Summary, "cuEventQuery from thread 533") {
			t.Errorf("headline %s, want the earlier refusal", j.Headline())
		}
		if c := cp.FirstRefused(); c != first {
			t.Errorf("the capture's first refused call %+v, want %+v", c, first)
		}
		qs := cp.Consequences(first)
		if len(qs) != 2 || qs[0].TID != 561 || qs[0].Calls != 1 || qs[1].TID != 485 || qs[1].Calls != 2 ||
			qs[1].Result != 901 || qs[1].ByName["cuLaunchKernel"] != 2 || qs[1].First != 31 {
			t.Errorf("consequences %+v, want the later synchronize, then 2 launches on thread 485 that returned 901", qs)
		}
	}
	// A capture that saw only consequences shows the earliest of them.
	only := &Capture{End: &Ending{Time: 40, Result: 901}, Refused: []*Call{then2, then1}}
	if c := only.FirstRefused(); c != then1 {
		t.Errorf("first refused %+v, want the earliest 901", c)
	}
}

func TestJudge(t *testing.T) {
	ok := Exit{Code: 0}
	clean := func() *Capture {
		return &Capture{ID: 1, API: hip.DialectCUDA, PID: 7, TID: 485, Stream: 0x356a1150, Mode: global, Begin: 1,
			End: &Ending{TID: 485, Time: 9}}
	}
	culprit := &Call{PID: 7, TID: 512, Time: 5, API: hip.DialectCUDA, Name: "cuCtxSynchronize_v2", Result: 900,
		Callers: frames("cudaDeviceSynchronize", "c10::cuda::device_synchronize", "THPModule_cudaSynchronize")}
	invalidated := func() *Capture {
		c := clean()
		c.End.Result = 901
		c.Refused = []*Call{culprit}
		return c
	}
	open := func() *Capture {
		c := invalidated()
		c.End = nil
		return c
	}
	hazardous := func() (*Capture, Hazard) {
		c := clean()
		c.Mode = relaxed
		call := &Call{PID: 7, TID: 600, Name: "cuStreamQuery", Stream: 0xb, Action: rules.QueryOtherStream,
			Callers: frames("worker_query")}
		c.Candidates = []*Call{call}
		return c, Hazard{Capture: c, Call: call, Strict: rules.CellKey{Action: rules.QueryOtherStream, Other: true},
			Would: rules.Expected{Returns: 900, End: 901, Basis: rules.BasisMeasured}, Table: "configs/rules/h200-cuda.yaml",
			Reasons: []string{"the capture was begun in relaxed mode"}}
	}
	hc, h := hazardous()
	escaped := func() *Capture {
		c := clean()
		c.Outside = []*Call{{PID: 7, TID: 485, Time: 4, API: hip.DialectCUDA, Name: "cuLaunchKernel", Stream: 0x77, Outside: true,
			Callers: frames("launch_side")}}
		return c
	}
	proc := []*Process{{PID: 7}}
	cases := []struct {
		name    string
		r       *Result
		strict  bool
		verdict Verdict
		summary string
	}{
		{"a call invalidated a capture", &Result{Processes: proc, Exit: ok, Captures: []*Capture{invalidated()}}, false, Fail,
			"cuCtxSynchronize from thread 512 (cudaDeviceSynchronize ← c10::cuda::device_synchronize) invalidated the global-mode capture begun by thread 485 on stream 0x356a1150; end capture 901"},
		{"a crash inside a capture after a refusal", &Result{Processes: proc, Exit: Exit{Code: -1, Signal: syscall.SIGSEGV}, Captures: []*Capture{open()}}, false, Fail,
			"was refused (900) during the global-mode capture begun by thread 485 on stream 0x356a1150, which never ended: the program was killed by signal SIGSEGV"},
		{"every capture ended well and the program crashed", &Result{Processes: proc, Exit: Exit{Code: -1, Signal: syscall.SIGABRT}, Captures: []*Capture{clean()}}, false, Fail,
			"every capture ended well (1), but the program was killed by signal SIGABRT"},
		{"every capture ended well and the program hung", &Result{Processes: proc, Exit: Exit{Code: -1, Signal: syscall.SIGKILL, TimedOut: true, Timeout: time.Minute}, Captures: []*Capture{clean()}}, false, Fail,
			"but the program hung: the watchdog killed it after 1m0s"},
		{"every capture ended well and the program exited 1", &Result{Processes: proc, Exit: Exit{Code: 1}, Captures: []*Capture{clean()}}, false, Fail,
			"but the program exited with status 1"},
		{"a clean run", &Result{Processes: proc, Exit: ok, Captures: []*Capture{clean(), clean()}}, false, Pass,
			"2 captures ended with success, nothing refused"},
		{"clean captures only counted still count", &Result{Processes: proc, Exit: ok, CapturesOmitted: 5}, false, Pass,
			"5 captures ended with success"},
		{"a hazard is reported", &Result{Processes: proc, Exit: ok, Captures: []*Capture{hc}, Hazards: []Hazard{h}}, false, Pass,
			"1 latent hazard, the first: cuStreamQuery from thread 600 (worker_query) succeeded during the relaxed-mode capture begun by thread 485 on stream 0x356a1150 only because the capture was begun in relaxed mode; a global-mode capture refuses it: query-other-stream/global/other/global returns 900, end 901 (measured, configs/rules/h200-cuda.yaml)"},
		{"a hazard fails a strict trace", &Result{Processes: proc, Exit: ok, Captures: []*Capture{hc}, Hazards: []Hazard{h}}, true, Fail,
			"cuStreamQuery from thread 600 (worker_query) succeeded during the relaxed-mode capture begun by thread 485 on stream 0x356a1150 only because the capture was begun in relaxed mode; a global-mode capture refuses it: query-other-stream/global/other/global returns 900, end 901 (measured, configs/rules/h200-cuda.yaml) (--strict: 1 hazard)"},
		{"no capture", &Result{Processes: proc, Exit: ok}, false, NothingToCheck, "no capture began: nothing to check"},
		{"no capture, and the program failed: the failure is not hidden", &Result{Processes: proc, Exit: Exit{Code: 2}}, false, Fail,
			"the program exited with status 2, and began no capture"},
		{"no capture, and graphs built without capture were launched", &Result{Processes: proc, Exit: ok, Graphs: GraphUse{Launches: 9, Launched: 3, Uncaptured: 3}}, false, NothingToCheck,
			"no capture began; 3 graphs built without capture were launched: nothing to judge"},
		{"no capture, graphs launched, and the program failed", &Result{Processes: proc, Exit: Exit{Code: -1, Signal: syscall.SIGABRT}, Graphs: GraphUse{Launched: 1, Uncaptured: 1}}, false, Fail,
			"the program was killed by signal SIGABRT (aborted), and began no capture; 1 graph built without capture was launched"},
		{"the observer never loaded: it could not observe", &Result{Exit: ok}, false, CouldNotObserve, "the observer never loaded into the program: no process reported it"},
		{"the observer never loaded and the program failed: both are said", &Result{Exit: Exit{Code: 3}, Path: "/opt/app"}, false, Fail,
			"the program exited with status 3; the observer never loaded into the program: no process reported it"},
		{"a static program", &Result{Exit: ok, Path: "/opt/static-app", Executable: ProgramFile{Read: true, Static: true}}, false, CouldNotObserve,
			"the observer never loaded into the program: /opt/static-app is statically linked: no dynamic loader loads the observer into it"},
		{"a setuid program", &Result{Exit: ok, Path: "/usr/bin/su-app", Executable: ProgramFile{Read: true, SetID: true}}, false, CouldNotObserve,
			"/usr/bin/su-app is set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD for it"},
		{"a nested trace whose inner trace failed", &Result{Program: "miotool", Args: []string{"trace", "--", "python3", "x.py"}, Exit: Exit{Code: 1},
			Processes: []*Process{{PID: 7, Exe: "/usr/local/bin/miotool"}}}, false, Fail,
			"the program exited with status 1; the program is miotool trace itself, whose own observer reports to it and not to this trace: this trace could not observe what it ran (trace it once: miotool trace -- python3 x.py)"},
		{"a nested trace that passed is still not observed", &Result{Program: "./bin/miotool", Path: "./bin/miotool", Args: []string{"--format", "json", "trace", "--", "prog"}, Exit: ok,
			Processes: []*Process{{PID: 7, Exe: "/work/bin/miotool"}}}, false, CouldNotObserve,
			"the program is miotool trace itself"},
		{"a nested trace through a shell", &Result{Program: "sh", Path: "/bin/sh", Args: []string{"-c", "exec ./miotool --format json trace -- ./prog --x"}, Exit: ok,
			Processes: []*Process{{PID: 7, Exe: "/work/miotool"}}}, false, CouldNotObserve,
			"this trace could not observe what it ran (trace it once: miotool trace -- ./prog --x)"},
		{"a shell whose program's arguments say trace", &Result{Program: "sh", Path: "/bin/sh", Args: []string{"-c", "./prog trace"}, Exit: ok,
			Processes: []*Process{{PID: 7, Exe: "/bin/sh"}}}, false, NothingToCheck, "no capture began: nothing to check"},
		{"miotool's other commands are observed", &Result{Program: "miotool", Args: []string{"capture", "--", "trace"}, Exit: ok, Processes: []*Process{{PID: 7, Exe: "/usr/local/bin/miotool"}}}, false, NothingToCheck,
			"no capture began: nothing to check"},
		{"CUPTI was not subscribed", &Result{Processes: proc, Exit: ok, Notes: []Note{{PID: 7, Topic: "cupti", Status: "error", Text: "libcupti could not be loaded"}}}, false, CouldNotObserve,
			"the program's CUDA calls were not observed (process 7): libcupti could not be loaded"},
		{"a begin that failed", &Result{Processes: proc, Exit: ok, Captures: []*Capture{{API: hip.DialectCUDA, TID: 3, Stream: 1, BeginName: "cuStreamBeginCapture_v2", BeginResult: 900}}}, false, Fail,
			"cuStreamBeginCapture on stream 0x1 from thread 3 returned 900 STREAM_CAPTURE_UNSUPPORTED: the capture never began"},
		{"an invalidation nobody was seen to cause", &Result{Processes: proc, Exit: ok, Captures: []*Capture{func() *Capture { c := clean(); c.End.Result = 901; return c }()}}, false, Fail,
			"was invalidated (end capture 901) by a call the observer did not see"},
		{"a capture that never ended", &Result{Processes: proc, Exit: ok, Captures: []*Capture{func() *Capture { c := clean(); c.End = nil; return c }()}}, false, Fail,
			"the global-mode capture begun by thread 485 on stream 0x356a1150 never ended: the program exited with status 0"},
		{"an unjoined capture", &Result{Processes: proc, Exit: ok, Captures: []*Capture{func() *Capture { c := clean(); c.End.Result = 904; return c }()}}, false, Fail,
			"ended with 904 STREAM_CAPTURE_UNJOINED"},
		{"interrupted after a failure", &Result{Processes: proc, Exit: Exit{Code: -1, Signal: syscall.SIGINT, Interrupted: true, Forwarded: syscall.SIGINT}, Captures: []*Capture{invalidated()}}, false, Interrupted,
			"interrupted: the program was stopped by miotool (SIGINT); 1 capture seen; cuCtxSynchronize from thread 512"},
		{"interrupted with nothing wrong", &Result{Processes: proc, Exit: Exit{Interrupted: true, Forwarded: syscall.SIGTERM}, Captures: []*Capture{clean()}}, false, Interrupted,
			"(SIGTERM); 1 capture seen, none failed so far"},
		{"Ctrl-C on the program's terminal", &Result{Processes: proc, Exit: Exit{Code: -1, Signal: syscall.SIGINT}, Captures: []*Capture{clean()}}, false, Interrupted,
			"interrupted: the program was killed by signal SIGINT (interrupt); 1 capture seen, none failed so far"},
		{"no libcupti to load", &Result{Processes: proc, Exit: ok, Notes: []Note{{PID: 7, Topic: "cupti", Status: "missing", Text: "libcupti could not be loaded; tried libcupti.so.13; "}}}, false, CouldNotObserve,
			"the program's CUDA calls were not observed (process 7): libcupti could not be loaded; tried libcupti.so.13; " + CUPTIInstall},
		{"work outside the capture is reported", &Result{Processes: proc, Exit: ok, Captures: []*Capture{escaped()}}, false, Pass,
			"1 capture ended with success, nothing refused; 1 call enqueued work outside a capture, the first: cuLaunchKernel from thread 485 (launch_side) enqueued work into stream 0x77, which was not capturing, during the global-mode capture begun by thread 485 on stream 0x356a1150: the graph does not hold it"},
		{"work outside the capture alone fails a strict trace", &Result{Processes: proc, Exit: ok, Captures: []*Capture{escaped()}}, true, Fail,
			"the graph does not hold it (--strict: 1 call outside a capture)"},
		{"work outside the capture fails a strict trace", &Result{Processes: proc, Exit: ok, Captures: []*Capture{escaped(), hc}, Hazards: []Hazard{h}}, true, Fail,
			"cuLaunchKernel from thread 485 (launch_side) enqueued work into stream 0x77, which was not capturing, during the global-mode capture begun by thread 485 on stream 0x356a1150: the graph does not hold it (--strict: 1 hazard, 1 call outside a capture)"},
		{"an empty capture is reported", &Result{Processes: proc, Exit: ok, Captures: []*Capture{func() *Capture {
			c := clean()
			c.End.Graph, c.End.NodesKnown = 0x9, true
			return c
		}()}}, false, Pass, "1 capture ended with success, nothing refused; 1 capture captured no work (an empty graph)"},
		{"several processes are named", &Result{Processes: []*Process{{PID: 6}, {PID: 7}}, Exit: ok, Captures: []*Capture{invalidated()}}, false, Fail,
			"the global-mode capture begun by thread 485 of process 7 on stream 0x356a1150"},
	}
	for _, c := range cases {
		j := Judge(c.r, c.strict)
		if j.Verdict != c.verdict || !strings.Contains(j.Summary, c.summary) {
			t.Errorf("%s:\n got %s\nwant %s with %q", c.name, j.Headline(), c.verdict, c.summary)
		}
		if strings.Contains(j.Summary, "\n") {
			t.Errorf("%s: the summary is not one line: %q", c.name, j.Summary)
		}
		// Only the strict cases here have findings that alone fail them.
		if j.StrictFailed != c.strict || j.HazardsFailed {
			t.Errorf("%s: findings failed the trace: %v (hazards: %v)", c.name, j.StrictFailed, j.HazardsFailed)
		}
	}
}

func TestHazards(t *testing.T) {
	tables, err := BuiltinRules()
	if err != nil {
		t.Fatal(err)
	}
	cu, hp := hip.DialectCUDA, hip.DialectHIP
	cases := []struct {
		name    string
		api     hip.Dialect
		mode    hip.CaptureMode
		call    Call
		because string // "" when no hazard
	}{
		{"a relaxed capture lets another thread query another stream", cu, relaxed,
			Call{TID: 2, Name: "cuStreamQuery", ThreadMode: global, Action: rules.QueryOtherStream}, "the capture was begun in relaxed mode"},
		{"a relaxed thread's free is judged in its own mode: no hazard", cu, global,
			Call{TID: 2, Name: "cuMemFree_v2", ThreadMode: relaxed, Action: rules.Free}, ""},
		{"a relaxed thread's query of another stream during a relaxed capture: no hazard", hp, relaxed,
			Call{TID: 1, Name: "hipStreamQuery", ThreadMode: relaxed, Action: rules.QueryOtherStream}, ""},
		{"a thread-local capture does not restrict other threads", hp, threadLocal,
			Call{TID: 2, Name: "hipMalloc", ThreadMode: global, Action: rules.Malloc}, "thread-local mode, which does not restrict other threads"},
		{"a relaxed capture lets its own thread query another stream", hp, relaxed,
			Call{TID: 1, Name: "hipStreamQuery", ThreadMode: global, Action: rules.QueryOtherStream}, "the capture was begun in relaxed mode"},
		{"a relaxed capture ended from another thread", cu, relaxed,
			Call{TID: 2, Name: "cuStreamEndCapture", ThreadMode: global, Action: rules.EndCaptureOtherThread}, "relaxed mode"},
		{"the strict situation itself is no hazard", cu, global,
			Call{TID: 2, Name: "cuStreamQuery", ThreadMode: global, Action: rules.QueryOtherStream}, ""},
		{"CUDA allows a synchronous copy in every mode", cu, relaxed,
			Call{TID: 2, Name: "cuMemcpyHtoD_v2", ThreadMode: relaxed, Action: rules.SyncMemcpy}, ""},
		{"a call the table refuses even relaxed is not a mode's hazard", cu, relaxed,
			Call{TID: 1, Name: "cuStreamQuery", ThreadMode: relaxed, Action: rules.QueryCapturingStream}, ""},
		{"a call without an action", cu, relaxed, Call{TID: 2, Name: "cuLaunchKernel"}, ""},
	}
	for _, c := range cases {
		call := c.call
		cp := &Capture{API: c.api, PID: 0, TID: 1, Mode: c.mode, Candidates: []*Call{&call}}
		hs := Hazards([]*Capture{cp}, tables)
		switch {
		case c.because == "" && len(hs) != 0:
			t.Errorf("%s: hazard %+v", c.name, hs[0])
		case c.because != "" && (len(hs) != 1 || !strings.Contains(hs[0].Because(), c.because)):
			t.Errorf("%s: %+v, want one hazard because %q", c.name, hs, c.because)
		case c.because != "" && (hs[0].Strict.Capture != global || hs[0].Strict.Mode != c.call.ThreadMode || !refusal(hs[0].Would.Returns)):
			t.Errorf("%s: strict cell %v would %+v", c.name, hs[0].Strict, hs[0].Would)
		}
	}
}

func TestActionFor(t *testing.T) {
	cp := &Capture{Stream: 0xa, capturedEvents: map[uint64]bool{0xe1: true}}
	cases := []struct {
		call Call
		want rules.Action
	}{
		{Call{Name: "cuStreamQuery", Stream: 0xa}, rules.QueryCapturingStream},
		{Call{Name: "hipStreamSynchronize", Stream: 0xb}, rules.SyncOtherStream},
		{Call{Name: "cuStreamQuery", Stream: 0}, ""}, // the null stream: not in the tables
		{Call{Name: "cuStreamSynchronize_ptsz", Stream: 2}, ""},
		{Call{Name: "cuEventQuery", Event: 0xe1}, rules.QueryCapturedEvent},
		{Call{Name: "hipEventSynchronize", Event: 0xe2}, rules.SyncUncapturedEvent},
		{Call{Name: "cuMemAlloc_v2"}, rules.Malloc},
		{Call{Name: "hipFree"}, rules.Free},
		{Call{Name: "cuMemsetD8_v2"}, rules.SyncMemset},
		{Call{Name: "hipMemcpyDtoH"}, rules.SyncMemcpy},
		{Call{Name: "cuCtxSynchronize_v2"}, rules.DeviceSync},
		{Call{Name: "cuMemHostAlloc"}, rules.HostAlloc},
		{Call{Name: "cuMemAllocHost_v2"}, rules.HostAlloc},
		{Call{Name: "hipHostMalloc"}, rules.HostAlloc},
		{Call{Name: "cuMemFreeHost"}, rules.HostFree},
		{Call{Name: "cuMemHostRegister_v2"}, rules.HostRegister},
		{Call{Name: "hipHostUnregister"}, rules.HostUnregister},
		{Call{Name: "cuModuleUnload"}, rules.ModuleUnload},
		{Call{Name: "cuLaunchKernel", Stream: 0xa}, ""},
	}
	for _, c := range cases {
		call := c.call
		got, ok := actionFor(&call, cp)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s on %#x: %q %v, want %q", c.call.Name, c.call.Stream, got, ok, c.want)
		}
	}
}

// TestGuardedCalls: a call its own thread made in relaxed mode is the
// sanctioned guard (ScopedRelaxedCaptureMode, PyTorch's
// cudaMallocMaybeCapturing): counted as guarded, never a hazard candidate,
// whoever began the capture and in whichever mode. A call that only the
// capture's mode let through stays a hazard.
func TestGuardedCalls(t *testing.T) {
	tables, err := BuiltinRules()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		api        hip.Dialect
		capture    hip.CaptureMode
		tid        int
		call       string
		threadMode hip.CaptureMode
		guarded    int
		hazards    int
	}{
		{"PyTorch's allocator on the capturing thread, global capture", hip.DialectCUDA, global, 1, "cuMemAlloc_v2", relaxed, 1, 0},
		{"another thread's relaxed malloc during a global capture", hip.DialectCUDA, global, 2, "cuMemAlloc_v2", relaxed, 1, 0},
		{"another thread's relaxed free during a thread-local capture", hip.DialectHIP, threadLocal, 2, "hipFree", relaxed, 1, 0},
		{"MIOpen's relaxed query of another stream during a relaxed capture", hip.DialectHIP, relaxed, 1, "hipStreamQuery", relaxed, 1, 0},
		{"a thread-local exchange on another thread guards it too", hip.DialectCUDA, global, 2, "cuMemAlloc_v2", threadLocal, 1, 0},
		{"a thread-local exchange on the capturing thread does not", hip.DialectCUDA, relaxed, 1, "cuMemAlloc_v2", threadLocal, 0, 1},
		{"a malloc only the relaxed capture let through", hip.DialectCUDA, relaxed, 2, "cuMemAlloc_v2", global, 0, 1},
		{"a malloc a thread-local capture does not restrict", hip.DialectCUDA, threadLocal, 2, "cuMemAlloc_v2", global, 0, 1},
	}
	for _, c := range cases {
		coll := newCollector(Limits{}, nil)
		coll.tables = tables
		coll.add(Event{Kind: kindHello, PID: 1, TID: 1, Time: 1, Exe: "/usr/bin/python3"})
		coll.add(Event{Kind: kindBegin, PID: 1, TID: 1, Time: 2, API: c.api, Name: "begin", Stream: 0xa, Mode: c.capture})
		coll.add(Event{Kind: kindCall, PID: 1, TID: c.tid, Time: 3, API: c.api, Name: c.call, Stream: 0xb, Mode: c.threadMode})
		coll.add(Event{Kind: kindEnd, PID: 1, TID: 1, Time: 4, API: c.api, Name: "end", Stream: 0xa})
		r := coll.result()
		cp := r.Captures[0]
		if cp.Guarded != c.guarded || len(r.Hazards) != c.hazards || len(cp.Candidates) != c.hazards {
			t.Errorf("%s: %d guarded, %d candidates, %d hazards; want %d guarded, %d hazards", c.name, cp.Guarded,
				len(cp.Candidates), len(r.Hazards), c.guarded, c.hazards)
		}
		if c.guarded > 0 && cp.GuardedByName[BaseName(c.call)] != c.guarded {
			t.Errorf("%s: guarded by name %v", c.name, cp.GuardedByName)
		}
		if j := Judge(r, true); (j.Verdict == Pass) != (c.hazards == 0) {
			t.Errorf("%s: strict %s", c.name, j.Headline())
		}
	}
}

// TestRelaxedRowsGuardEveryCapture holds the guard to the measured
// tables: in each shipped table, the calls a thread guards by relaxing
// itself (allocating, freeing, querying or synchronizing other work) are
// refused in no capture mode, from the capturing thread or another
// (the relaxed{...} rows), while the same calls in global mode are.
func TestRelaxedRowsGuardEveryCapture(t *testing.T) {
	tables, err := BuiltinRules()
	if err != nil {
		t.Fatal(err)
	}
	guardable := []rules.Action{rules.Malloc, rules.Free, rules.QueryOtherStream, rules.SyncOtherStream,
		rules.QueryUncapturedEvent, rules.SyncUncapturedEvent}
	for d, table := range tables.ByDialect {
		for _, a := range guardable {
			for _, other := range []bool{false, true} {
				if !SafeInEveryCapture(table, a, other, relaxed) {
					t.Errorf("%s: %s (other thread %v) in relaxed mode is refused in some capture mode", d, a, other)
				}
			}
			if SafeInEveryCapture(table, a, true, global) {
				t.Errorf("%s: %s in global mode is safe in every capture mode: nothing to guard", d, a)
			}
		}
		if SafeInEveryCapture(table, rules.QueryCapturingStream, false, relaxed) || SafeInEveryCapture(table, rules.EndCaptureOtherThread, true, relaxed) {
			t.Errorf("%s: a call refused in relaxed mode too counts as guarded", d)
		}
	}
}
