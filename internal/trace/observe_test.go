package trace

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"miotool/internal/trace/tracetest"
)

// The tests of this file run programs under the observer themselves, with
// ObserverEnv, and read the records it sent as they are: the fields the
// collector consumes are held here to what the programs did.

// extraKit is what these tests build beside the shared kit: the crash
// programs, the Python helper, a program's own injection library.
type extraKit struct {
	crashProg string // testdata/progs/crash.c, linked to libcrashearly.so
	pyHelper  string // testdata/python/pyhelper.c, linked to the stand-in libcuda
	inject    string // testdata/progs/inject.c, linked to the stand-in libcupti
	drive     string // testdata/python/drive.py
}

var (
	extraOnce sync.Once
	theExtra  extraKit
	extraErr  error
)

func extras(t testing.TB) (*kit, *extraKit) {
	t.Helper()
	k := standIns(t)
	gcc := gccOrSkip(t)
	src := tracetest.Source(t)
	extraOnce.Do(func() {
		bin := filepath.Join(k.dir, "bin")
		x := extraKit{crashProg: filepath.Join(bin, "crashprog"), pyHelper: filepath.Join(k.lib, "libpyhelper.so"),
			inject: filepath.Join(k.lib, "libinject.so"), drive: filepath.Join(src, "python", "drive.py")}
		early := filepath.Join(k.lib, "libcrashearly.so")
		rpath := "-Wl,-rpath," + k.lib
		warn := []string{"-std=gnu11", "-O0", "-g", "-Wall", "-Wextra", "-Werror"}
		steps := [][]string{
			{"-shared", "-fPIC", "-o", early, filepath.Join(src, "progs", "crashearly.c")},
			{"-rdynamic", "-o", x.crashProg, filepath.Join(src, "progs", "crash.c"), "-Wl,--no-as-needed", early, rpath},
			{"-shared", "-fPIC", "-o", x.pyHelper, filepath.Join(src, "python", "pyhelper.c"), filepath.Join(k.lib, "libcuda.so.1"), rpath, "-pthread"},
			{"-shared", "-fPIC", "-o", x.inject, filepath.Join(src, "progs", "inject.c"), k.cupti, rpath},
		}
		for _, s := range steps {
			args := append(append([]string{}, warn...), s...)
			if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
				extraErr = fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
		theExtra = x
	})
	if extraErr != nil {
		t.Fatal(extraErr)
	}
	return k, &theExtra
}

// observed is one run of a program under the observer.
type observed struct {
	events         []Event
	malformed      []string
	exit           int // -1 when a signal ended it
	signal         syscall.Signal
	stdout, stderr string
}

// records are the events of kind, in the order they arrived.
func (o observed) records(kind string) []Event {
	var out []Event
	for _, e := range o.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// call is the call records of the named call (its base name).
func (o observed) calls(name string) []Event {
	var out []Event
	for _, e := range o.records(kindCall) {
		if BaseName(e.Name) == name {
			out = append(out, e)
		}
	}
	return out
}

// listener is a socket the observer reports to, read as records arrive
// (a Unix datagram queue holds few: max_dgram_qlen is 10 on many
// systems, and a sender waits while it is full).
type listener struct {
	path  string
	conn  *net.UnixConn
	lines chan string
}

func listenForTest(t *testing.T) *listener {
	t.Helper()
	dir, err := os.MkdirTemp("", "mt-obs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l := &listener{path: filepath.Join(dir, "ev"), lines: make(chan string, 1<<16)}
	l.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: l.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.conn.SetReadBuffer(4 << 20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(l.lines)
		buf := make([]byte, 1<<16)
		for {
			n, err := l.conn.Read(buf)
			if err != nil {
				return
			}
			l.lines <- strings.TrimRight(string(buf[:n]), "\n")
		}
	}()
	t.Cleanup(func() {
		l.conn.Close()
		<-done
	})
	return l
}

// drain returns every record sent before it was called.
func (l *listener) drain(t *testing.T) []string {
	t.Helper()
	token := randomToken()
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: l.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("MT1\teof\t0\t0\t0\t" + token + "\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	var out []string
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				t.Fatal("the socket closed before the mark came back")
			}
			if line == "MT1\teof\t0\t0\t0\t"+token {
				return out
			}
			out = append(out, line)
		case <-deadline.C:
			t.Fatalf("the mark did not come back within %v", limit)
		}
	}
}

type obsOpt func(*exec.Cmd)

func obsEnv(kv ...string) obsOpt { return func(c *exec.Cmd) { c.Env = append(c.Env, kv...) } }

// observe runs prog under the observer, reporting to a socket of its own,
// and returns what the observer sent.
func (k *kit) observe(t *testing.T, prog string, args []string, opts ...obsOpt) observed {
	t.Helper()
	l := listenForTest(t)
	env, err := ObserverEnv(append(os.Environ(), EnvCUPTI+"="+k.cupti), k.observer, l.path)
	if err != nil {
		t.Fatal(err)
	}
	return runObserved(t, l, prog, args, env, opts...)
}

func runObserved(t *testing.T, l *listener, prog string, args []string, env []string, opts ...obsOpt) observed {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(prog, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, o := range opts {
		o(cmd)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, cmd.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		t.Fatalf("%s %v still ran after %v (a deadlock?)\nstdout: %s\nstderr: %s", prog, args, limit, stdout.String(), stderr.String())
	}
	o := observed{exit: -1, stdout: stdout.String(), stderr: stderr.String()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		o.signal = ws.Signal()
	} else {
		o.exit = cmd.ProcessState.ExitCode()
	}
	for _, line := range l.drain(t) {
		e, err := ParseEvent([]byte(line))
		if err != nil {
			o.malformed = append(o.malformed, fmt.Sprintf("%v: %q", err, line))
			continue
		}
		o.events = append(o.events, e)
	}
	if len(o.malformed) > 0 {
		t.Errorf("malformed records: %v", o.malformed)
	}
	return o
}

// symbols are the functions of a record's native callers, named as the
// trace names them.
func symbols(e Event) []string {
	var out []string
	for _, f := range NewSymbolizer().Frames(e.Callers) {
		out = append(out, f.Symbol)
	}
	return out
}

func hasSymbol(e Event, name string) bool {
	for _, s := range symbols(e) {
		if s == name {
			return true
		}
	}
	return false
}

var kitRuntimes = []struct {
	name string
	prog func(*kit) string
}{
	{"hip", func(k *kit) string { return k.hipProg }},
	{"cuda", func(k *kit) string { return k.cudaProg }},
}

// TestObserverNamesTheThread: the records that carry callers carry the
// calling thread's OS name; a process without CPython has no Python
// section.
func TestObserverNamesTheThread(t *testing.T) {
	k := standIns(t)
	for _, rt := range kitRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			o := k.observe(t, rt.prog(k), []string{"sync-other-thread"})
			begins, ends := o.records(kindBegin), o.records(kindEnd)
			refused := o.calls(map[string]string{"hip": "hipDeviceSynchronize", "cuda": "cuCtxSynchronize"}[rt.name])
			if len(begins) != 1 || len(ends) != 1 || len(refused) != 1 {
				t.Fatalf("%d begins, %d ends, %d refused synchronizes: %+v", len(begins), len(ends), len(refused), o.events)
			}
			main := filepath.Base(rt.prog(k))
			for _, c := range []struct {
				e    Event
				want string
			}{{begins[0], main}, {ends[0], main}, {refused[0], "syncer"}} {
				if c.e.ThreadName != c.want || c.e.Python.State != PyNone {
					t.Errorf("%s on thread %d: named %q, Python %+v; want %q and no Python section", c.e.Name, c.e.TID, c.e.ThreadName, c.e.Python, c.want)
				}
			}
			if refused[0].Result != 900 || !hasSymbol(refused[0], "worker_synchronize") {
				t.Errorf("refused call: %d by %v", refused[0].Result, symbols(refused[0]))
			}
			for _, e := range o.records(kindCall) {
				if len(e.Callers) == 0 && (e.ThreadName != "" || e.Python.State != PyNone) {
					t.Errorf("%s without callers names its thread %q: a call record without callers carries no sections", e.Name, e.ThreadName)
				}
			}
		})
	}
}

// TestObserverGraphs: an end names its graph and its node count; an
// instantiation names its graph, executable graph and node count; only
// the first launch of an executable graph is reported, with the graph it
// was made from, captured or built node by node.
func TestObserverGraphs(t *testing.T) {
	k := standIns(t)
	for _, rt := range kitRuntimes {
		t.Run(rt.name+"/empty capture", func(t *testing.T) {
			o := k.observe(t, rt.prog(k), []string{"empty-capture"})
			ends := o.records(kindEnd)
			if len(ends) != 1 || ends[0].Result != 0 || ends[0].Graph == 0 || ends[0].Nodes != 0 {
				t.Fatalf("ends %+v, want one that made a graph of 0 nodes", ends)
			}
		})
		t.Run(rt.name+"/captured", func(t *testing.T) {
			o := k.observe(t, rt.prog(k), []string{"graph-captured"})
			ends, graphs := o.records(kindEnd), o.records(kindGraph)
			if len(ends) != 1 || ends[0].Graph == 0 || ends[0].Nodes != 2 {
				t.Fatalf("ends %+v, want one graph of 2 nodes", ends)
			}
			if len(graphs) != 2 {
				t.Fatalf("graph records %+v, want an instantiation and one launch (of three)", graphs)
			}
			inst, launch := graphs[0], graphs[1]
			if !strings.Contains(inst.Name, "Instantiate") || inst.Graph != ends[0].Graph || inst.Exec == 0 || inst.Nodes != 2 || inst.Result != 0 {
				t.Errorf("instantiation %+v, want graph %#x of 2 nodes", inst, ends[0].Graph)
			}
			if BaseName(launch.Name) != map[string]string{"hip": "hipGraphLaunch", "cuda": "cuGraphLaunch"}[rt.name] ||
				launch.Exec != inst.Exec || launch.Graph != inst.Graph || launch.Stream == 0 || launch.Nodes != -1 {
				t.Errorf("launch %+v, want executable graph %#x of graph %#x", launch, inst.Exec, inst.Graph)
			}
		})
		t.Run(rt.name+"/built node by node", func(t *testing.T) {
			o := k.observe(t, rt.prog(k), []string{"graph-no-capture"})
			graphs := o.records(kindGraph)
			if len(o.records(kindBegin)) != 0 || len(graphs) != 2 {
				t.Fatalf("%d begins, graph records %+v; want no capture, an instantiation and one launch (of two)", len(o.records(kindBegin)), graphs)
			}
			if graphs[0].Nodes != 3 || graphs[0].Graph == 0 || graphs[1].Exec != graphs[0].Exec || graphs[1].Graph != graphs[0].Graph {
				t.Errorf("graph records %+v, want a graph of 3 nodes instantiated and launched", graphs)
			}
		})
	}
}

// TestObserverTellsWorkOutsideTheCapture: a launch into a stream that is
// not capturing, while a capture is active, is outside; one into the
// capture's stream is not, and the observer's own query of the stream is
// not reported as the program's call.
func TestObserverTellsWorkOutsideTheCapture(t *testing.T) {
	k := standIns(t)
	for _, rt := range kitRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			o := k.observe(t, rt.prog(k), []string{"launch-outside"})
			launches := o.calls(map[string]string{"hip": "hipLaunchKernel", "cuda": "cuLaunchKernel"}[rt.name])
			begins := o.records(kindBegin)
			if len(launches) != 2 || len(begins) != 1 {
				t.Fatalf("launches %+v, begins %+v", launches, begins)
			}
			if launches[0].Stream != begins[0].Stream || launches[0].Outside {
				t.Errorf("the launch into the capture's stream: %+v", launches[0])
			}
			if launches[1].Stream == begins[0].Stream || !launches[1].Outside {
				t.Errorf("the launch into the other stream: %+v, want Outside", launches[1])
			}
			if n := len(o.calls(map[string]string{"hip": "hipStreamIsCapturing", "cuda": "cuStreamIsCapturing"}[rt.name])); n != 0 {
				t.Errorf("the observer's own stream queries reported as %d calls of the program", n)
			}
		})
		t.Run(rt.name+"/a stream that joined the capture", func(t *testing.T) {
			o := k.observe(t, rt.prog(k), []string{"launch-joined"})
			launches := o.calls(map[string]string{"hip": "hipLaunchKernel", "cuda": "cuLaunchKernel"}[rt.name])
			begins, ends := o.records(kindBegin), o.records(kindEnd)
			if len(launches) != 1 || len(begins) != 1 || len(ends) != 1 || launches[0].Stream == begins[0].Stream {
				t.Fatalf("launches %+v, begins %+v", launches, begins)
			}
			if launches[0].Outside || ends[0].Result != 0 || ends[0].Nodes < 1 {
				t.Errorf("a launch into a stream that joined the capture: %+v; end %+v", launches[0], ends[0])
			}
		})
	}
}

// TestRecordsSurviveTheProgramsEnd: a program that aborts, exits 1 from
// its error check, or is killed right after a refused call still has its
// culprit's record, callers and all: each record is sent before the call
// returns to the program.
func TestRecordsSurviveTheProgramsEnd(t *testing.T) {
	k := standIns(t)
	cases := []struct {
		how    string
		exit   int
		signal syscall.Signal
	}{{"abort", -1, syscall.SIGABRT}, {"exit", 1, 0}, {"kill", -1, syscall.SIGKILL}}
	for _, rt := range kitRuntimes {
		for _, c := range cases {
			t.Run(rt.name+"/"+c.how, func(t *testing.T) {
				o := k.observe(t, rt.prog(k), []string{"refuse-" + c.how})
				if o.exit != c.exit || o.signal != c.signal {
					t.Fatalf("exit %d signal %v, want %d %v", o.exit, o.signal, c.exit, c.signal)
				}
				q := o.calls(map[string]string{"hip": "hipStreamQuery", "cuda": "cuStreamQuery"}[rt.name])
				if len(q) != 1 || q[0].Result != 900 || !hasSymbol(q[0], "query_own_stream") || !hasSymbol(q[0], "refuse_then_end") ||
					q[0].ThreadName == "" {
					t.Fatalf("the refused query: %+v", q)
				}
			})
		}
	}
}

// TestObserverChainsTheProgramsInjection: a program's own
// CUDA_INJECTION64_PATH is loaded and initialized after the observer,
// never dropped; CUPTI refuses its subscription (one subscriber), the
// library gets CUPTI's own answer, and the trace is told who was refused.
func TestObserverChainsTheProgramsInjection(t *testing.T) {
	k, x := extras(t)
	o := k.observe(t, k.cudaProg, []string{"clean"}, obsEnv())
	if len(o.records(kindBegin)) != 1 {
		t.Fatalf("without an injection library of its own: %+v", o.events)
	}
	l := listenForTest(t)
	env, err := ObserverEnv(append(os.Environ(), EnvCUPTI+"="+k.cupti, "CUDA_INJECTION64_PATH="+x.inject), k.observer, l.path)
	if err != nil {
		t.Fatal(err)
	}
	o = runObserved(t, l, k.cudaProg, []string{"clean"}, env)
	if !strings.Contains(o.stderr, "user injection initialized: cuptiSubscribe returned 39") {
		t.Errorf("the program's injection library did not run, or was not refused as CUPTI refuses a second subscriber: %q", o.stderr)
	}
	var chained, refused bool
	for _, n := range o.records(kindNote) {
		chained = chained || n.Topic == "inject" && n.Status == "chained" && strings.Contains(n.Text, x.inject)
		refused = refused || n.Topic == "cupti" && n.Status == "refused" && strings.Contains(n.Text, filepath.Base(x.inject)) &&
			strings.Contains(n.Text, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
	}
	if !chained || !refused {
		t.Errorf("notes %+v: want the library chained and its subscription's refusal named", o.records(kindNote))
	}
	if len(o.records(kindBegin)) != 1 {
		t.Errorf("the trace saw %d captures, want 1", len(o.records(kindBegin)))
	}

	missing := filepath.Join(t.TempDir(), "libgone.so")
	l = listenForTest(t)
	env, err = ObserverEnv(append(os.Environ(), EnvCUPTI+"="+k.cupti, "CUDA_INJECTION64_PATH="+missing), k.observer, l.path)
	if err != nil {
		t.Fatal(err)
	}
	o = runObserved(t, l, k.cudaProg, []string{"clean"}, env)
	notes := o.records(kindNote)
	found := false
	for _, n := range notes {
		found = found || n.Topic == "inject" && n.Status == "error" && strings.Contains(n.Text, missing)
	}
	if !found {
		t.Errorf("a library that cannot load: notes %+v, want an error naming it", notes)
	}
}

// TestNestedTraceObservesTheSameProgram: a trace inside a trace (each with
// its own socket, the inner one with another copy of the observer) has
// every record reach both, once: the outer trace observes the same
// program. A second copy of the observer in the process stays silent.
func TestNestedTraceObservesTheSameProgram(t *testing.T) {
	k := standIns(t)
	data, err := os.ReadFile(k.observer)
	if err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(t.TempDir(), ObserverLibrary)
	if err := os.WriteFile(inner, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, rt := range kitRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			outerL, innerL := listenForTest(t), listenForTest(t)
			env, err := ObserverEnv(append(os.Environ(), EnvCUPTI+"="+k.cupti), k.observer, outerL.path)
			if err != nil {
				t.Fatal(err)
			}
			if env, err = ObserverEnv(env, inner, innerL.path); err != nil {
				t.Fatal(err)
			}
			o := runObserved(t, innerL, rt.prog(k), []string{"sync-other-thread"}, env)
			var outer []Event
			for _, line := range outerL.drain(t) {
				e, err := ParseEvent([]byte(line))
				if err != nil {
					t.Fatal(err)
				}
				outer = append(outer, e)
			}
			if len(o.events) == 0 || len(outer) != len(o.events) {
				t.Fatalf("inner trace %d records, outer %d: want the same records in both", len(o.events), len(outer))
			}
			for i := range outer {
				if outer[i].Kind != o.events[i].Kind || outer[i].Name != o.events[i].Name || outer[i].Time != o.events[i].Time {
					t.Errorf("record %d: outer %+v, inner %+v", i, outer[i], o.events[i])
				}
			}
			if n := len(o.records(kindHello)); n != 1 {
				t.Errorf("%d hello records, want 1", n)
			}
		})
	}
	// Both copies preloaded, the second one named as the injection
	// library too: the first one reports, each call once.
	for _, rt := range kitRuntimes {
		t.Run(rt.name+"/two copies loaded", func(t *testing.T) {
			l := listenForTest(t)
			env := append(os.Environ(), EnvCUPTI+"="+k.cupti, EnvSocket+"="+l.path, "LD_PRELOAD="+k.observer+":"+inner,
				"CUDA_INJECTION64_PATH="+inner)
			o := runObserved(t, l, rt.prog(k), []string{"sync-other-thread"}, env)
			hellos := o.records(kindHello)
			if len(hellos) != 1 || len(o.records(kindBegin)) != 1 || len(o.records(kindEnd)) != 1 {
				t.Fatalf("%d hellos, %d begins, %d ends: want one of each", len(hellos), len(o.records(kindBegin)), len(o.records(kindEnd)))
			}
			seen := map[string]int{}
			for _, e := range o.records(kindCall) {
				seen[fmt.Sprintf("%d %d %s", e.TID, e.Time, e.Name)]++
			}
			for c, n := range seen {
				if n > 1 {
					t.Errorf("%s reported %d times", c, n)
				}
			}
		})
	}
}
