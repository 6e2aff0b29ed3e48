package trace

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ended is how a program ended and what it wrote.
type ended struct {
	exit           int // -1 when a signal ended it
	signal         syscall.Signal
	stdout, stderr string
}

// runFor runs prog with env within limit, in a process group of its own
// that is killed when the test ends.
func runFor(t *testing.T, prog string, args, env []string) ended {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(prog, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killOnCleanup(t, cmd.Process.Pid)
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
		t.Fatalf("%s %v still ran after %v", prog, args, limit)
	}
	e := ended{exit: -1, stdout: stdout.String(), stderr: stderr.String()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.signal = ws.Signal()
	} else {
		e.exit = cmd.ProcessState.ExitCode()
	}
	return e
}

func watch(t *testing.T, k *kit) *CrashWatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	w, err := WatchCrashes(ctx, k.observer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w
}

// crashRun runs prog with the crash handler, wants it killed by sig, and
// returns its one crash.
func crashRun(t *testing.T, k *kit, prog string, args []string, sig syscall.Signal) Crash {
	t.Helper()
	w := watch(t, k)
	e := runFor(t, prog, args, w.EnvFor(os.Environ(), "run-1"))
	if e.signal != sig {
		t.Fatalf("%s %v: exit %d signal %v, want %v\nstderr: %s", prog, args, e.exit, e.signal, sig, e.stderr)
	}
	crashes := w.Crashes("run-1")
	if len(crashes) != 1 {
		t.Fatalf("%d crashes, want 1: %+v", len(crashes), crashes)
	}
	return crashes[0]
}

func frameNames(fs []Frame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Name())
	}
	return out
}

// TestCrashHandler: a crash is reported with its signal, code, address,
// thread and native stack, and the program ends exactly as it would
// without the handler: its own handlers run whether installed before the
// observer loaded or after, and the exit status is its own.
func TestCrashHandler(t *testing.T) {
	k, x := extras(t)
	cases := []struct {
		scenario string
		env      []string
		crashes  int
		code     int
		function string // in the stack
		stderr   string
	}{
		{scenario: "segv", crashes: 1, code: 1, function: "crash_in_named_function"},
		{scenario: "abort", crashes: 1, code: -6, function: "abort_in_named_function"},
		{scenario: "own-handler", crashes: 1, code: 1, function: "crash_in_named_function", stderr: "own handler called"},
		{scenario: "handler-exit", crashes: 1, code: 1, function: "crash_in_named_function", stderr: "exiting handler called"},
		{scenario: "early-handler", env: []string{"CRASH_EARLY_HANDLER=1"}, crashes: 1, code: 1,
			function: "crash_in_named_function", stderr: "early handler called"},
		{scenario: "raise-ignored", stderr: "still here"},
		{scenario: "exit"},
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			env := append(os.Environ(), c.env...)
			plain := runFor(t, x.crashProg, []string{c.scenario}, env)
			w := watch(t, k)
			got := runFor(t, x.crashProg, []string{c.scenario}, w.EnvFor(env, "run-"+c.scenario))
			if got.exit != plain.exit || got.signal != plain.signal || got.stderr != plain.stderr {
				t.Fatalf("with the crash handler: exit %d signal %v stderr %q; without: exit %d signal %v stderr %q",
					got.exit, got.signal, got.stderr, plain.exit, plain.signal, plain.stderr)
			}
			if c.stderr != "" && !strings.Contains(got.stderr, c.stderr) {
				t.Errorf("stderr %q, want %q", got.stderr, c.stderr)
			}
			if strings.Contains(got.stderr, "does not give back") {
				t.Errorf("the program's sigaction did not give back the handler it set: %q", got.stderr)
			}
			crashes := w.Crashes("run-" + c.scenario)
			if len(crashes) != c.crashes {
				t.Fatalf("%d crashes, want %d: %+v", len(crashes), c.crashes, crashes)
			}
			if c.crashes == 0 {
				return
			}
			cr := crashes[0]
			want := map[bool]string{true: "SIGABRT", false: "SIGSEGV"}[c.scenario == "abort"]
			if cr.SignalName != want || cr.Code != c.code || cr.Addr != 0 || cr.ThreadName != "crashprog" ||
				cr.Python.State != PyNone || cr.PID == 0 || cr.TID != cr.PID {
				t.Errorf("crash %+v, want %s code %d at address 0 on thread crashprog", cr, want, c.code)
			}
			names := frameNames(cr.Callers)
			found := false
			for _, n := range names {
				found = found || n == c.function
			}
			if !found {
				t.Errorf("stack %v, want %s in it", names, c.function)
			}
			for _, f := range cr.Callers {
				if strings.Contains(f.Module, "miotool-observer") || f.Module == k.observer {
					t.Errorf("the observer's own frame %v in the stack", f)
				}
			}
		})
	}
}

// TestCrashHandlerReachesEveryProcessOfARun: a process the program starts
// reports its crash under the run's token; another run's crashes are
// another run's.
func TestCrashHandlerReachesEveryProcessOfARun(t *testing.T) {
	k, x := extras(t)
	w := watch(t, k)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	got := runFor(t, sh, []string{"-c", x.crashProg + " segv; echo $?"}, w.EnvFor(os.Environ(), "run-a"))
	if got.exit != 0 || strings.TrimSpace(got.stdout) != "139" {
		t.Fatalf("the shell: exit %d, printed %q", got.exit, got.stdout)
	}
	runFor(t, x.crashProg, []string{"abort"}, w.EnvFor(os.Environ(), "run-b"))
	a, b := w.Crashes("run-a"), w.Crashes("run-b")
	if len(a) != 1 || a[0].SignalName != "SIGSEGV" || len(b) != 1 || b[0].SignalName != "SIGABRT" {
		t.Fatalf("run-a %+v, run-b %+v", a, b)
	}
	if again := w.Crashes("run-a"); len(again) != 0 {
		t.Errorf("Crashes forgets what it returned: %+v", again)
	}
	if w.Malformed() != 0 {
		t.Errorf("%d malformed datagrams", w.Malformed())
	}
}

// TestCrashWatchEnv keeps the program's own LD_PRELOAD after the observer
// and asks for the crash handler only.
func TestCrashWatchEnv(t *testing.T) {
	k := standIns(t)
	w := watch(t, k)
	env := w.EnvFor([]string{"LD_PRELOAD=/a.so /b.so", "PATH=/bin"}, "r1")
	if v := lookupEnv(env, "LD_PRELOAD"); v != w.observer+":/a.so:/b.so" {
		t.Errorf("LD_PRELOAD=%q", v)
	}
	if lookupEnv(env, EnvCrashRun) != "r1" || lookupEnv(env, EnvCrashSocket) == "" || lookupEnv(env, EnvSocket) != "" ||
		lookupEnv(env, "CUDA_INJECTION64_PATH") != "" || lookupEnv(env, "PATH") != "/bin" {
		t.Errorf("environment %v", env)
	}
	t.Setenv("LD_PRELOAD", "/c.so")
	added := w.Env("r2")
	if len(added) != 3 || lookupEnv(added, "LD_PRELOAD") != w.observer+":/c.so" || lookupEnv(added, EnvCrashRun) != "r2" {
		t.Errorf("Env: %v", added)
	}
	if _, err := WatchCrashes(context.Background(), "/nonexistent/observer.so"); err == nil {
		t.Error("a missing observer was accepted")
	}
}

// TestCrashWithAReaderThatStoppedReading: a crash handler whose socket's
// queue is full (its reader stopped reading) gives the record up after a
// short wait: the program still dies of its signal, in its time.
func TestCrashWithAReaderThatStoppedReading(t *testing.T) {
	k, x := extras(t)
	l := listenForTest(t)
	// The listener reads as records arrive: a socket of the test's own,
	// never read, is what a stuck reader looks like.
	dir := filepath.Dir(l.path)
	path := filepath.Join(dir, "stuck")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	filled := 0
	for ; filled < 100000; filled++ {
		if err := syscall.Sendto(fd, []byte("filler\n"), syscall.MSG_DONTWAIT, &syscall.SockaddrUnix{Name: path}); err != nil {
			if err == syscall.EAGAIN {
				break
			}
			t.Fatal(err)
		}
	}
	if filled == 100000 {
		t.Skip("the socket's queue never filled")
	}
	start := time.Now()
	got := runFor(t, x.crashProg, []string{"segv"}, append(os.Environ(), "LD_PRELOAD="+k.observer, EnvCrashSocket+"="+path))
	if got.signal != syscall.SIGSEGV {
		t.Fatalf("exit %d signal %v, want SIGSEGV", got.exit, got.signal)
	}
	t.Logf("a full queue of %d datagrams: the program died of its signal after %v", filled, time.Since(start).Round(time.Millisecond))
}
