package trace

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/rules"
)

// runtimes are the two ways the test program is built: against the HIP
// stand-in (the interposer observes it) and against the CUDA stand-in (the
// CUPTI injection observes it).
type runtimeCase struct {
	name    string
	prog    func(*kit) string
	sync    string // the device-wide synchronize
	query   string
	event   string
	end     string
	malloc  string
	dialect hip.Dialect
	launch  string
	device  Device // what the stand-in runtime says of its device
}

var runtimes = []runtimeCase{
	{"hip", func(k *kit) string { return k.hipProg }, "hipDeviceSynchronize", "hipStreamQuery", "hipEventQuery",
		"hipStreamEndCapture", "hipMalloc", hip.DialectHIP, "hipLaunchKernel",
		Device{API: hip.DialectHIP, Ordinal: 0, Name: "Stand-in HIP device 0", Arch: "gfx942:sramecc+:xnack-", ComputeUnits: 304}},
	{"cuda", func(k *kit) string { return k.cudaProg }, "cuCtxSynchronize", "cuStreamQuery", "cuEventQuery",
		"cuStreamEndCapture", "cuMemAlloc", hip.DialectCUDA, "cuLaunchKernel",
		Device{API: hip.DialectCUDA, Ordinal: 1, Name: "Stand-in CUDA device 1", Arch: "sm_90", ComputeUnits: 132}},
}

// firstNamed is the first caller with a name.
func firstNamed(fs []Frame) Frame {
	for _, f := range fs {
		if f.Symbol != "" {
			return f
		}
	}
	return Frame{}
}

// wantOutput is what prog.c prints on stdout for a scenario, line by line.
func wantOutput(scenario string, lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s: %s\n", scenario, l)
	}
	return b.String()
}

// TestTraceNamesTheCulprit runs each failing scenario against both
// stand-in runtimes: the verdict, the call, its thread and its caller (the
// program's own function), the capture it broke and how that ended, and
// the program's own output and exit status, untouched.
func TestTraceNamesTheCulprit(t *testing.T) {
	k := standIns(t)
	for _, rt := range runtimes {
		cases := []struct {
			scenario    string
			culprit     string
			result      hip.Code
			otherThread bool
			caller      string
			end         hip.Code // -1: never ended
			stdout      string
			exitSignal  syscall.Signal
		}{
			{"sync-other-thread", rt.sync, 900, true, "worker_synchronize", 901,
				wantOutput("sync-other-thread", "begin 0", "launch 0", "device synchronize 900", "launch after 901",
					"end capture 901"), 0},
			{"query-capturing", rt.query, 900, false, "query_own_stream", 901,
				wantOutput("query-capturing", "begin 0", "launch 0", "query own stream 900", "end capture 901"), 0},
			{"captured-event-query", rt.event, 907, false, "main", 901,
				wantOutput("captured-event-query", "begin 0", "record 0", "query captured event 907", "end capture 901"), 0},
			{"crash", rt.query, 900, false, "query_own_stream", -1,
				wantOutput("crash", "begin 0", "query own stream 900"), syscall.SIGSEGV},
		}
		for _, c := range cases {
			t.Run(rt.name+"/"+c.scenario, func(t *testing.T) {
				tr := k.trace(t, false, rt.prog(k), []string{c.scenario})
				r, j := tr.r, tr.j
				if j.Verdict != Fail {
					t.Fatalf("verdict %s, want FAIL: %s", j.Verdict, j.Headline())
				}
				if j.Culprit == nil || j.Capture == nil {
					t.Fatalf("no culprit named: %s", j.Headline())
				}
				cp, call := j.Capture, j.Culprit
				if BaseName(call.Name) != c.culprit || call.Result != c.result || call.API != rt.dialect {
					t.Errorf("culprit %s (%s) → %d, want %s → %d", call.Name, call.API, call.Result, c.culprit, c.result)
				}
				if (call.TID != cp.TID) != c.otherThread || call.PID != cp.PID {
					t.Errorf("culprit on thread %d of %d, capture by thread %d of %d; want another thread: %v",
						call.TID, call.PID, cp.TID, cp.PID, c.otherThread)
				}
				if f := firstNamed(call.Callers); f.Symbol != c.caller || f.Module != rt.prog(k) {
					t.Errorf("first named caller %v (%s, from %s), want %s in %s; all: %v", f, f.Module, f.Source,
						c.caller, rt.prog(k), call.Callers)
				}
				for _, f := range call.Callers {
					if strings.Contains(f.Module, "libmiotool-observer") || strings.Contains(f.Module, "libcupti") ||
						strings.Contains(f.Module, "libamdhip64") || strings.Contains(f.Module, "libcuda.so") {
						t.Errorf("the callers include the runtime's or the observer's own frame %v", f)
					}
				}
				if cp.Mode != hip.CaptureModeGlobal || cp.Stream == 0 || !cp.Ran() {
					t.Errorf("capture %+v, want a global-mode one on a stream", cp)
				}
				switch {
				case c.end < 0 && cp.End != nil:
					t.Errorf("the capture ended (%d); the program crashed inside it", cp.End.Result)
				case c.end >= 0 && (cp.End == nil || cp.End.Result != c.end || cp.End.TID != cp.TID):
					t.Errorf("capture end %+v, want %d on the capturing thread", cp.End, c.end)
				}
				if !strings.Contains(j.Summary, c.culprit+" from thread "+fmt.Sprint(call.TID)) ||
					!strings.Contains(j.Summary, c.caller) || !strings.Contains(j.Summary, fmt.Sprintf("%#x", cp.Stream)) {
					t.Errorf("headline %q does not name the call, thread, caller and stream", j.Headline())
				}
				if tr.stdout != c.stdout || tr.stderr != "stderr: "+c.scenario+"\n" {
					t.Errorf("the program's output changed:\nstdout %q\nwant   %q\nstderr %q", tr.stdout, c.stdout, tr.stderr)
				}
				if r.Exit.Signal != c.exitSignal || (c.exitSignal == 0 && r.Exit.Code != 0) {
					t.Errorf("exit %+v, want signal %v", r.Exit, c.exitSignal)
				}
				if r.Malformed != 0 || len(r.Processes) != 1 {
					t.Errorf("%d malformed records, %d processes", r.Malformed, len(r.Processes))
				}
			})
		}
	}
}

// TestTraceVerdicts covers the other outcomes against both runtimes.
func TestTraceVerdicts(t *testing.T) {
	k := standIns(t)
	for _, rt := range runtimes {
		cases := []struct {
			scenario string
			strict   bool
			verdict  Verdict
			summary  string // a part of the headline
			hazards  int
			check    func(t *testing.T, tr traced)
		}{
			{"clean", false, Pass, "1 capture ended with success, nothing refused", 0, func(t *testing.T, tr traced) {
				if c := tr.r.Captures[0]; !c.EndedWell() || c.Calls != 3 || c.ByName["cuLaunchKernel"]+c.ByName["hipLaunchKernel"] != 3 {
					t.Errorf("capture %+v, want 3 launches counted", c)
				}
			}},
			{"two-captures", false, Pass, "2 captures ended with success, nothing refused", 0, func(t *testing.T, tr traced) {
				// The observer's own device queries at b's begin are
				// not calls made during a.
				for _, c := range tr.r.Captures {
					own := c.ByName["cuCtxGetDevice"] + c.ByName["cuDeviceGetName"] + c.ByName["cuDeviceGetAttribute"] +
						c.ByName["hipGetDevice"] + c.ByName["hipDeviceGetName"] + c.ByName["hipDeviceGetAttribute"]
					if own != 0 || c.ByName[rt.launch] != 1 || c.Device != rt.device.Ordinal {
						t.Errorf("capture %d: calls %v on device %d, want its one launch and none of the observer's device queries on device %d",
							c.ID, c.ByName, c.Device, rt.device.Ordinal)
					}
				}
				want := rt.device
				want.PID = tr.r.Processes[0].PID
				if len(tr.r.Devices) != 1 || tr.r.Devices[0] != want {
					t.Errorf("devices %+v, want %+v described once", tr.r.Devices, want)
				}
			}},
			{"none", false, NothingToCheck, "no capture began: nothing to check", 0, nil},
			{"exit3", false, Fail, "every capture ended well (1), but the program exited with status 3", 0, nil},
			{"crash-after", false, Fail, "but the program was killed by signal SIGSEGV", 0, nil},
			{"never-end", false, Fail, "never ended: the program exited with status 0", 0, nil},
			{"relaxed-other-query", false, Pass, "1 latent hazard", 1, func(t *testing.T, tr traced) {
				h := tr.r.Hazards[0]
				if h.Cell.Action != rules.QueryOtherStream || h.Cell.Capture != hip.CaptureModeRelaxed || !h.Cell.Other ||
					h.Strict.Capture != hip.CaptureModeGlobal || h.Would.Returns != 900 || h.Would.End != 901 {
					t.Errorf("hazard %+v", h)
				}
				if f := firstNamed(h.Call.Callers); f.Symbol != "worker_query" {
					t.Errorf("hazard caller %v, want worker_query", f)
				}
				if !strings.Contains(h.Because(), "relaxed mode") {
					t.Errorf("because %q", h.Because())
				}
			}},
			{"relaxed-other-query", true, Fail, "only because the capture was begun in relaxed mode", 1, nil},
			// A thread that relaxed itself around its allocation is the
			// sanctioned guard: counted, never a hazard, and --strict passes.
			{"relaxed-thread-malloc", true, Pass, "1 capture ended with success, nothing refused", 0, func(t *testing.T, tr traced) {
				if c := tr.r.Captures[0]; c.Guarded != 2 || c.GuardedByName[rt.malloc] != 1 {
					t.Errorf("guarded %d %v, want the relaxed thread's %s and free", c.Guarded, c.GuardedByName, rt.malloc)
				}
			}},
			{"wrong-thread-end", false, Fail, rt.end + " from thread", 0, func(t *testing.T, tr traced) {
				if tr.j.Culprit.Result != hip.ErrStreamCaptureWrongThread || tr.j.Culprit.Action != rules.EndCaptureOtherThread {
					t.Errorf("culprit %+v", tr.j.Culprit)
				}
			}},
			{"fork", false, Fail, rt.sync + " from thread", 0, func(t *testing.T, tr traced) {
				ps := tr.r.Processes
				if len(ps) != 2 || !ps[1].Forked || ps[1].PPID != ps[0].PID || tr.j.Capture.PID != ps[1].PID {
					t.Errorf("processes %+v, capture in %d: want the capture in the forked child", ps, tr.j.Capture.PID)
				}
				if !strings.Contains(tr.stdout, "fork: child exited 0") {
					t.Errorf("stdout %q", tr.stdout)
				}
			}},
			{"exec", false, Fail, rt.query + " from thread", 0, func(t *testing.T, tr traced) {
				if len(tr.r.Processes) != 1 || tr.stderr != "stderr: exec\nstderr: query-capturing\n" {
					t.Errorf("processes %+v, stderr %q", tr.r.Processes, tr.stderr)
				}
			}},
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s/strict=%v", rt.name, c.scenario, c.strict), func(t *testing.T) {
				tr := k.trace(t, c.strict, rt.prog(k), []string{c.scenario})
				if tr.j.Verdict != c.verdict || !strings.Contains(tr.j.Summary, c.summary) {
					t.Fatalf("%s\nwant %s with %q", tr.j.Headline(), c.verdict, c.summary)
				}
				if len(tr.r.Hazards) != c.hazards {
					t.Errorf("%d hazards, want %d: %+v", len(tr.r.Hazards), c.hazards, tr.r.Hazards)
				}
				if c.check != nil {
					c.check(t, tr)
				}
			})
		}
	}
}

// TestTraceKeepsTheInnermostCallers: a stack deeper than one record
// holds keeps its innermost callers, in order, and counts the rest.
func TestTraceKeepsTheInnermostCallers(t *testing.T) {
	k := standIns(t)
	for _, rt := range runtimes {
		tr := k.trace(t, false, rt.prog(k), []string{"deep"})
		c := tr.j.Culprit
		if c == nil || tr.r.Malformed != 0 {
			t.Fatalf("%s: %s (%d malformed)", rt.name, tr.j.Headline(), tr.r.Malformed)
		}
		if c.Omitted == 0 || len(c.Callers) < 10 {
			t.Errorf("%s: %d callers kept, %d omitted; want a full record and a count of the rest", rt.name, len(c.Callers), c.Omitted)
		}
		for i, f := range c.Callers {
			if f.Symbol != "descend_and_query" {
				t.Errorf("%s: caller %d is %v, want descend_and_query (the innermost frames)", rt.name, i, f)
				break
			}
		}
	}
}

// TestTraceNamesCallersWithoutDynamicSymbols: a program linked without
// -rdynamic has no dynamic symbol for its own functions; the trace names
// them from the file's symbol table.
func TestTraceNamesCallersWithoutDynamicSymbols(t *testing.T) {
	k := standIns(t)
	tr := k.trace(t, false, k.hipNoDyn, []string{"sync-other-thread"})
	if tr.j.Culprit == nil {
		t.Fatalf("no culprit: %s", tr.j.Headline())
	}
	f := firstNamed(tr.j.Culprit.Callers)
	if f.Symbol != "worker_synchronize" || f.Source != "elf" || f.Module != k.hipNoDyn {
		t.Errorf("first named caller %+v, want worker_synchronize from the ELF symbol table of %s", f, k.hipNoDyn)
	}
}

// TestTraceFindsARuntimeLoadedLocally: a library loaded with RTLD_LOCAL,
// as Python loads an extension, reaches the runtime through the
// interposer, which finds the runtime outside the global scope.
func TestTraceFindsARuntimeLoadedLocally(t *testing.T) {
	k := standIns(t)
	tr := k.trace(t, false, k.loader, []string{k.helper})
	if tr.stdout != "loader: helper end capture 901\n" {
		t.Fatalf("stdout %q: the helper's calls did not reach the runtime", tr.stdout)
	}
	if tr.j.Verdict != Fail || tr.j.Culprit == nil || BaseName(tr.j.Culprit.Name) != "hipStreamQuery" {
		t.Fatalf("%s", tr.j.Headline())
	}
	if f := firstNamed(tr.j.Culprit.Callers); f.Symbol != "helper_capture_query" || f.Object() != "libhelper.so" {
		t.Errorf("caller %+v", f)
	}
}

// TestTraceSurvivesAProgramThatClosesItsDescriptors: the program closes
// every descriptor above stderr (the observer's socket too) and opens a
// file of its own, which takes the socket's number; the events still
// arrive and nothing is written into the program's file.
func TestTraceSurvivesAProgramThatClosesItsDescriptors(t *testing.T) {
	k := standIns(t)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			own := filepath.Join(t.TempDir(), "own")
			tr := k.trace(t, false, rt.prog(k), []string{"closefds", own})
			if tr.j.Verdict != Fail || tr.j.Culprit == nil || BaseName(tr.j.Culprit.Name) != rt.query {
				t.Fatalf("%s", tr.j.Headline())
			}
			data, err := os.ReadFile(own)
			if err != nil || len(data) != 0 {
				t.Fatalf("the program's own file holds %q (%v): the observer wrote into it", data, err)
			}
			if !strings.Contains(tr.stdout, "own file fd 3 size 0") {
				t.Errorf("stdout %q: want the file on the socket's old number, empty", tr.stdout)
			}
			tr = k.trace(t, false, rt.prog(k), []string{"closefds-tcp"})
			if strings.Contains(tr.stdout, "no loopback TCP") {
				t.Skip("no loopback TCP here")
			}
			if tr.j.Verdict != Fail || tr.j.Culprit == nil || BaseName(tr.j.Culprit.Name) != rt.query {
				t.Fatalf("%s", tr.j.Headline())
			}
			if !strings.Contains(tr.stdout, "own socket fd 3, peer received 0") {
				t.Errorf("stdout %q: want the program's socket on the old number, nothing sent through it", tr.stdout)
			}
		})
	}
}

// TestTracePassesStdinThrough: the program reads its standard input.
func TestTracePassesStdinThrough(t *testing.T) {
	k := standIns(t)
	in := "line one\nline two\n\x00binary\xff\n"
	tr := k.trace(t, false, k.hipProg, []string{"echo"}, withStdin(in))
	want := in + wantOutput("echo", "begin 0", "end capture 0")
	if tr.stdout != want || tr.j.Verdict != Pass {
		t.Fatalf("stdout %q, want %q; %s", tr.stdout, want, tr.j.Headline())
	}
}

// TestTraceWatchdog: a program that hangs inside a capture is killed with
// its group after the timeout; the verdict says it hung.
func TestTraceWatchdog(t *testing.T) {
	k := standIns(t)
	tr := k.trace(t, false, k.hipProg, []string{"hang"}, withTimeout(500*time.Millisecond))
	if !tr.r.Exit.TimedOut || tr.r.Exit.Signal != syscall.SIGKILL || tr.j.Verdict != Fail ||
		!strings.Contains(tr.j.Summary, "never ended: the program hung: the watchdog killed it after 500ms") {
		t.Fatalf("exit %+v: %s", tr.r.Exit, tr.j.Headline())
	}
}

// TestTraceInterrupted: when miotool's context ends, the program's group
// gets SIGINT; one that ignores it is killed after the grace; either way
// the result is INTERRUPTED with what was seen.
func TestTraceInterrupted(t *testing.T) {
	k := standIns(t)
	cases := []struct {
		name   string
		prog   string
		args   []string
		signal syscall.Signal
	}{
		{"program exits on SIGINT", k.hipProg, []string{"hang"}, syscall.SIGINT},
		{"program ignores SIGINT", "/bin/sh", []string{"-c", "trap '' INT; echo ready; while :; do sleep 1; done"}, syscall.SIGKILL},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ready := make(chan int, 1)
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			o := Options{Program: c.prog, Args: c.args, Observer: k.observer, Stdout: pw, Stderr: pw, Timeout: limit,
				Grace: 300 * time.Millisecond, Started: func(pid int) { killOnCleanup(t, pid); ready <- pid }}
			// Cancel once the program has written its first line (it is in
			// its capture, or past the trap).
			go func() {
				buf := make([]byte, 1)
				if _, err := pr.Read(buf); err == nil {
					cancel()
				}
			}()
			r, err := Run(ctx, o)
			pw.Close()
			if err != nil {
				t.Fatal(err)
			}
			wantGone(t, <-ready)
			j := Judge(r, false)
			if !r.Exit.Interrupted || r.Exit.Forwarded != syscall.SIGINT || r.Exit.Signal != c.signal ||
				j.Verdict != Interrupted || !strings.HasPrefix(j.Summary, "interrupted: the program was stopped by miotool (SIGINT)") {
				t.Fatalf("exit %+v: %s", r.Exit, j.Headline())
			}
		})
	}
}

// TestTraceUnobservedCUDA: when CUPTI cannot be subscribed to (a profiler
// holds it), the trace says why it saw nothing, as an error: it could not
// observe the program, which is not "nothing happened".
func TestTraceUnobservedCUDA(t *testing.T) {
	k := standIns(t)
	tr := k.trace(t, false, k.cudaProg, []string{"clean"}, withEnv("STANDIN_CUPTI_BUSY=1"))
	if tr.j.Verdict != CouldNotObserve || !strings.Contains(tr.j.Summary, "were not observed (process ") ||
		!strings.Contains(tr.j.Summary, ": cuptiSubscribe") ||
		!strings.Contains(tr.j.Summary, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED") {
		t.Fatalf("%s", tr.j.Headline())
	}
	if tr.stdout != wantOutput("clean", "begin 0", "end capture 0") {
		t.Errorf("stdout %q", tr.stdout)
	}
}

// TestTraceWithoutCUPTI: where no libcupti can be loaded, a CUDA program's
// captures go unseen; the trace says so and what to install.
func TestTraceWithoutCUPTI(t *testing.T) {
	k := standIns(t)
	missing := filepath.Join(t.TempDir(), "libcupti.so.13")
	tr := k.trace(t, false, k.cudaProg, []string{"clean"}, withCUPTI(missing))
	if _, ok := tr.r.CUPTIMissing(); !ok {
		t.Fatalf("no missing-CUPTI note: %+v (is a libcupti.so.13 on the loader's path?)", tr.r.Notes)
	}
	if tr.j.Verdict != CouldNotObserve || !strings.Contains(tr.j.Summary, "libcupti could not be loaded; tried "+missing) ||
		!strings.Contains(tr.j.Summary, CUPTIInstall) {
		t.Fatalf("%s", tr.j.Headline())
	}
}

// TestTraceProgramErrors: a program that cannot be run is a usage error,
// said in one line.
func TestTraceProgramErrors(t *testing.T) {
	k := standIns(t)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ prog, observer, want string }{
		{"/nonexistent/prog", k.observer, "program /nonexistent/prog: no such file or directory"},
		{"no-such-program-anywhere", k.observer, "program no-such-program-anywhere: not found in $PATH"},
		{plain, k.observer, "permission denied (not executable)"},
		{dir, k.observer, "is a directory"},
		{"true", filepath.Join(dir, "none.so"), "trace observer " + filepath.Join(dir, "none.so") + ": no such file"},
	}
	for _, c := range cases {
		_, err := Run(context.Background(), Options{Program: c.prog, Observer: c.observer})
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want a one-line usage error with %q", c.prog, err, c.want)
		}
	}
}

// standInMiotool starts this test binary as a stand-in miotool that
// traces prog with args, with a temporary folder of the test's own, and
// returns it, the program's process id (also its group's) once it runs,
// and that folder. Both processes are killed when t ends, whatever the
// test made of them.
func standInMiotool(t *testing.T, k *kit, guard bool, prog string, args ...string) (*exec.Cmd, int, string) {
	t.Helper()
	tmp := t.TempDir()
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), helperEnv+"="+prog, helperArgsEnv+"="+strings.Join(args, " "), helperObserver+"="+k.observer,
		"TMPDIR="+tmp)
	if !guard {
		parent.Env = append(parent.Env, helperNoGuard+"=1")
	}
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	lines := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	var pid int
	select {
	case l := <-lines:
		if _, err := fmt.Sscanf(l, "program %d", &pid); err != nil {
			t.Fatalf("the stand-in miotool said %q", l)
		}
	case <-time.After(limit):
		t.Fatalf("the stand-in miotool did not start the program within %v", limit)
	}
	killOnCleanup(t, pid)
	return parent, pid, tmp
}

// TestTheProgramDiesWithMiotool: a stand-in miotool (this test binary),
// without the watcher of the program's group, traces a program that hangs
// in a capture and is killed with SIGKILL, which it cannot catch; the
// kernel kills the program with it (Pdeathsig).
func TestTheProgramDiesWithMiotool(t *testing.T) {
	k := standIns(t)
	parent, pid, _ := standInMiotool(t, k, false, k.hipProg, "hang")
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	wantGone(t, pid)
}

// TestTheProgramsChildrenDieWithMiotool: the program forks a child that
// waits to be killed; when the stand-in miotool is killed with SIGKILL,
// the program dies of its death signal and the child, which has none, is
// killed with the program's group by the watcher, which also removes the
// events socket's folder that the stand-in can no longer remove.
func TestTheProgramsChildrenDieWithMiotool(t *testing.T) {
	k := standIns(t)
	pidFile := filepath.Join(t.TempDir(), "child")
	parent, pid, tmp := standInMiotool(t, k, true, k.hipProg, "fork-hang", pidFile)
	child := waitForPID(t, pidFile)
	killOnCleanup(t, pid, child)
	if g, ok := groupOf(child); !ok || g != pid {
		t.Fatalf("the program's child %d is in group %d (alive: %v), want the program's %d", child, g, ok, pid)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	wantGone(t, pid)
	wantNoSocketFolder(t, tmp)
}

// TestCUPTIScope: outside every capture only the callbacks the observer
// needs there are on (those that begin a capture, change a thread's mode,
// end a capture, make or launch graphs), so two thousand launches outside
// a capture fire none; from a begin's entry to the last end, every call
// is seen. With a CUPTI that cannot turn callbacks on one by one, every
// callback stays on, the judgement is the same, and the observer says
// why. A CUPTI that goes on calling after the narrowing is narrowed once
// more; one that never stops is said to have the whole domain on.
func TestCUPTIScope(t *testing.T) {
	k := standIns(t)
	fired := regexp.MustCompile(`standin-cupti: (\d+) callbacks fired`)
	for _, tt := range []struct {
		name     string
		env      []string
		maxFired int      // 0: at least 4000 fired (every launch's two); -1: not counted (it depends on when CUPTI caught up)
		scope    []string // the scope notes, "status: text" prefixes, in order
	}{
		{"callbacks one by one", nil, 100, []string{"narrow: "}},
		{"an old CUPTI", []string{"STANDIN_CUPTI_OLD=1"}, 0,
			[]string{"full: CUPTI named none of the callbacks that begin or end a capture"}},
		{"callbacks refused one by one", []string{"STANDIN_CUPTI_NARROW=refused"}, 0,
			[]string{"full: cuptiEnableCallback(1, driver API, "}},
		{"the first narrowing ignored", []string{"STANDIN_CUPTI_NARROW=ignored-once"}, 700,
			[]string{"narrow: ", "renarrowed: CUPTI called the observer for 256 driver calls outside captures (cuLaunchKernel among them)"}},
		{"every narrowing ignored", []string{"STANDIN_CUPTI_NARROW=ignored"}, 0,
			[]string{"narrow: ", "renarrowed: ", "full: CUPTI went on calling the observer for driver calls outside captures (cuLaunchKernel among them) after it narrowed twice"}},
		// The narrowing takes after 600 callbacks each time, the second
		// too late for the observer, which turns the whole domain on: the
		// capture's calls are seen all the same.
		{"every narrowing late", []string{"STANDIN_CUPTI_NARROW=late"}, -1,
			[]string{"narrow: ", "renarrowed: ", "full: CUPTI went on calling"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := k.trace(t, false, k.cudaProg, []string{"launches-around-a-capture"}, withEnv(append(tt.env, "STANDIN_CUPTI_COUNT=1")...))
			if tr.j.Verdict != Pass || len(tr.r.Captures) != 1 || tr.r.Captures[0].Calls != 3 {
				t.Fatalf("%s; captures %d", tr.j.Headline(), len(tr.r.Captures))
			}
			m := fired.FindStringSubmatch(tr.stderr)
			if m == nil {
				t.Fatalf("the stand-in did not count its callbacks: %q", tr.stderr)
			}
			n, _ := strconv.Atoi(m[1])
			if tt.maxFired > 0 && n > tt.maxFired || tt.maxFired == 0 && n < 4000 {
				t.Errorf("%d callbacks fired for 2006 launches and a capture, want %s", n,
					map[bool]string{true: fmt.Sprintf("at most %d", tt.maxFired), false: "at least 4000"}[tt.maxFired > 0])
			}
			var scope []string
			for _, note := range tr.r.Notes {
				if note.Topic == "scope" {
					scope = append(scope, note.Status+": "+note.Text)
				}
			}
			if len(scope) != len(tt.scope) {
				t.Fatalf("scope notes %q, want %d: %q", scope, len(tt.scope), tt.scope)
			}
			for i, want := range tt.scope {
				if !strings.HasPrefix(scope[i], want) {
					t.Errorf("scope note %d %q, want it to begin %q", i, scope[i], want)
				}
			}
		})
	}
}
