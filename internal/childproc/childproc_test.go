//go:build linux

package childproc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/term"

	"miotool/internal/testutil"
)

// fakeEnv makes this test binary, re-executed, a fake child (see TestMain).
const fakeEnv = "MIOTOOL_CHILDPROC_FAKE"

// limit bounds every wait in these tests: wide for a loaded machine, and
// a failure rather than a hang when something is left running.
const limit = 20 * time.Second

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		fakeChild(mode, os.Args[1:])
		os.Exit(0)
	}
	// The main thread is the one the runtime never ends, even under a
	// goroutine that locked it and returned: keep it to this goroutine, so
	// that the tests, and the children they start, run on threads that
	// can end (TestEndingOtherThreadsLeavesTheChildRunning).
	runtime.LockOSThread()
	code := m.Run()
	if left := leftFakes(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: processes of this test binary still running after the tests: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// leftFakes lists, once those still dying have had the limit to finish,
// the live processes other than this one that run this test binary, and
// kills them: every test must have ended what it started.
func leftFakes() []string {
	deadline := time.Now().Add(limit)
	for {
		left := liveCopies()
		if len(left) == 0 || time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return pidList(left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func liveCopies() []int {
	self, err := os.Stat("/proc/self/exe")
	if err != nil {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, path := range stats {
		p, ok := readStat(path)
		if !ok || p.zombie || p.pid == os.Getpid() {
			continue
		}
		if exe, err := os.Stat(fmt.Sprintf("/proc/%d/exe", p.pid)); err == nil && os.SameFile(self, exe) {
			out = append(out, p.pid)
		}
	}
	return out
}

func pidList(pids []int) []string {
	var s []string
	for _, p := range pids {
		s = append(s, strconv.Itoa(p))
	}
	return s
}

// fakeChild behaves as one of the children the tests run.
func fakeChild(mode string, args []string) {
	switch mode {
	case "sleep", "hang":
		time.Sleep(time.Hour)
	case "result":
		fmt.Println("result ok")
	case "fork-sleeper", "escape-sleeper", "setpgid-sleeper", "hidden-escape":
		// A descendant that inherits the output pipes and outlives this
		// process, in its group, or out of it: a session of its own, a
		// group of its own, or a session of its own and an environment
		// without the token.
		pid := startSleeper(mode)
		fmt.Printf("sleeper %d\nresult ok\n", pid)
	case "daemon":
		// A daemon's double fork: a process in a session of its own
		// starts the sleeper and exits, leaving it an orphan.
		mid := exec.Command(os.Args[0])
		mid.Env = append(os.Environ(), fakeEnv+"=daemon-middle")
		mid.Stdout, mid.Stderr = os.Stdout, os.Stderr
		mid.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := mid.Run(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Println("result ok")
	case "daemon-middle":
		fmt.Printf("sleeper %d\n", startSleeper("fork-sleeper"))
	case "family":
		// A child that started one process in its group and one out of
		// it, then hangs.
		inGroup, escaped := startSleeper("fork-sleeper"), startSleeper("escape-sleeper")
		fmt.Printf("family %d %d %d\n", os.Getpid(), inGroup, escaped)
		time.Sleep(time.Hour)
	case "go-segv":
		// A read of unmapped memory: the Go runtime reports the SIGSEGV
		// and exits with status 2.
		mem, err := syscall.Mmap(-1, 0, os.Getpagesize(), syscall.PROT_READ, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err == nil && syscall.Munmap(mem) == nil {
			fmt.Println(*(*int64)(unsafe.Pointer(&mem[0])))
		}
	case "flood":
		n, _ := strconv.Atoi(os.Getenv("FLOOD_BYTES"))
		w := bufio.NewWriter(os.Stdout)
		line := strings.Repeat("x", 99) + "\n"
		for written := 0; written < n; written += len(line) {
			_, _ = w.WriteString(line)
		}
		_, _ = w.WriteString("last line\n")
		_ = w.Flush()
	case "parent":
		fakeParent(args)
	case "cat":
		_, _ = io.Copy(os.Stdout, os.Stdin)
	case "drain-stdin":
		_, _ = io.Copy(io.Discard, os.Stdin)
	case "yes":
		// Writes until its reader has gone: Go exits by SIGPIPE on a
		// broken standard output, as a C program does.
		for {
			if _, err := os.Stdout.WriteString("y\n"); err != nil {
				fmt.Fprintln(os.Stderr, "write:", err)
				os.Exit(4)
			}
		}
	case "print":
		_, _ = os.Stdout.WriteString(os.Getenv("PRINT"))
	case "isatty":
		fmt.Fprintf(os.Stderr, "stdin %v stdout %v\n", term.IsTerminal(0), term.IsTerminal(1))
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "ready":
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "foreground-parent":
		// A shell's job on a terminal: the child gets the foreground while
		// it runs, and the terminal comes back after.
		child := fake("foreground-child")
		child.Stdin, child.Stdout, child.Foreground = os.Stdin, os.Stdout, true
		if _, err := Run(context.Background(), child); err != nil {
			fmt.Println("run:", err)
		}
		fmt.Printf("parent: in the foreground %v\n", inForegroundOf(os.Stdin))
	case "foreground-child":
		fmt.Printf("child: in the foreground %v\n", inForegroundOf(os.Stdin))
	}
}

// startSleeper starts a sleeping copy of this binary, as mode says
// (fakeChild), and returns its process id.
func startSleeper(mode string) int {
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), fakeEnv+"=sleep")
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	switch mode {
	case "escape-sleeper":
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	case "setpgid-sleeper":
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	case "hidden-escape":
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		c.Env = []string{fakeEnv + "=sleep"}
	}
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	return c.Process.Pid
}

// fakeParent is a miotool that starts "family" children with its own
// standard output, which the test reads, and is then killed: how it
// starts them is args[0].
func fakeParent(args []string) {
	family := fake("family")
	family.Stdout = os.Stdout
	var err error
	switch args[0] {
	case "unwatched":
		family.NoWatcher = true
		_, err = Run(context.Background(), family)
	case "watched":
		_, err = Run(context.Background(), family)
	case "killed-before-watch":
		// Killed after the child started and before the watcher knows
		// its group.
		testHookBeforeWatch = func(int) { select {} }
		_, err = Run(context.Background(), family)
	case "many":
		Many(context.Background(), 3, 3, func(int) Spec { return family }, func(int, Result, error) {})
	}
	fmt.Fprintln(os.Stderr, "the children ended:", err)
	os.Exit(3)
}

// fake is a Spec that runs this binary as the named fake child.
func fake(mode string, env ...string) Spec {
	return Spec{Path: os.Args[0], Env: append(append(os.Environ(), fakeEnv+"="+mode), env...)}
}

// processes lists the live (not zombie) processes whose process group is
// pgid, or whose id is pid when pgid is 0.
func processes(t *testing.T, pgid, pid int) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, path := range stats {
		p, ok := readStat(path)
		if ok && !p.zombie && (pgid != 0 && p.pgrp == pgid || pgid == 0 && p.pid == pid) {
			live = append(live, fmt.Sprintf("%d (group %d)", p.pid, p.pgrp))
		}
	}
	return live
}

// wantGone fails t unless, within limit, no live process is in group pgid
// (or has id pid when pgid is 0). A killed process takes a moment to
// finish dying after kill returns, so this waits for the condition itself.
func wantGone(t *testing.T, pgid, pid int) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("no /proc to look for processes in: %v", err)
	}
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		live := processes(t, pgid, pid)
		if len(live) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running after %v: %v", limit, live)
		}
		<-tick.C
	}
}

// killAtCleanup kills process pid, a fake child this test binary started
// (or one it started), when t ends, so that a failing assertion leaves
// nothing running: pid is killed only while it still runs this binary, not
// a process that took its number after it ended.
func killAtCleanup(t *testing.T, pid int) {
	t.Cleanup(func() {
		self, err := os.Stat("/proc/self/exe")
		if err != nil {
			return
		}
		if exe, err := os.Stat(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && os.SameFile(self, exe) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// sleeperPID reads the "sleeper PID" line a fake child printed.
func sleeperPID(t *testing.T, out []byte) int {
	t.Helper()
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(l, "sleeper "); ok {
			pid, err := strconv.Atoi(s)
			if err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no sleeper pid in %q", out)
	return 0
}

func TestAChildThatExitsIsReportedAndItsGroupKilled(t *testing.T) {
	res, err := Run(context.Background(), fake("fork-sleeper"))
	if err != nil {
		t.Fatal(err)
	}
	sleeper := sleeperPID(t, res.Stdout.Data)
	killAtCleanup(t, sleeper)
	if res.ExitCode() != 0 || res.TimedOut || res.PipeHeld || res.Escaped != 0 || !bytes.Contains(res.Stdout.Data, []byte("result ok\n")) {
		t.Fatalf("%s, timed out %v, pipe held %v, escaped %d, stdout %q", res.ExitText(), res.TimedOut, res.PipeHeld, res.Escaped, res.Stdout.Data)
	}
	wantGone(t, res.PID, 0)
	wantGone(t, 0, sleeper)
}

// A descendant that left the child's group, for a group or a session of
// its own, directly or as a daemon's orphan, is ended with the child: it
// came back to this process, the subreaper, and carries the child's token.
// The pipe it held is closed then, so the output is complete at once.
func TestAnEscapedDescendantIsEnded(t *testing.T) {
	for _, mode := range []string{"escape-sleeper", "setpgid-sleeper", "daemon"} {
		t.Run(mode, func(t *testing.T) {
			spec := fake(mode)
			spec.Timeout, spec.PipeGrace = limit, limit
			res, err := Run(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			sleeper := sleeperPID(t, res.Stdout.Data)
			killAtCleanup(t, sleeper)
			if res.ExitCode() != 0 || res.TimedOut || res.PipeHeld || res.Escaped != 1 || !bytes.Contains(res.Stdout.Data, []byte("result ok\n")) {
				t.Fatalf("%s, timed out %v, pipe held %v, escaped %d, stdout %q", res.ExitText(), res.TimedOut, res.PipeHeld, res.Escaped, res.Stdout.Data)
			}
			wantGone(t, 0, sleeper)
		})
	}
}

// A descendant that left the group and cleared its environment cannot be
// found: it costs only the grace, and the child's own result is reported.
func TestAnUnfindableDescendantCostsOnlyTheGrace(t *testing.T) {
	spec := fake("hidden-escape")
	spec.Timeout, spec.PipeGrace = limit, 100*time.Millisecond
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := sleeperPID(t, res.Stdout.Data)
	killAtCleanup(t, sleeper)
	// It is out of reach by construction; the test ends it.
	if err := syscall.Kill(sleeper, syscall.SIGKILL); err != nil {
		t.Errorf("killing the hidden sleeper %d: %v", sleeper, err)
	}
	if res.ExitCode() != 0 || res.TimedOut || !res.PipeHeld || res.Escaped != 0 || !bytes.Contains(res.Stdout.Data, []byte("result ok\n")) {
		t.Fatalf("%s, timed out %v, pipe held %v, escaped %d, stdout %q", res.ExitText(), res.TimedOut, res.PipeHeld, res.Escaped, res.Stdout.Data)
	}
	wantGone(t, res.PID, 0)
	wantGone(t, 0, sleeper)
}

func TestCrashes(t *testing.T) {
	t.Run("the Go runtime's report", func(t *testing.T) {
		res, err := Run(context.Background(), fake("go-segv"))
		if err != nil {
			t.Fatal(err)
		}
		if _, signalled := res.Signal(); signalled || res.ExitCode() != 2 || !bytes.Contains(res.Stderr.Data, []byte("[signal SIGSEGV")) {
			t.Fatalf("%s, stderr %q", res.ExitText(), res.Stderr.Last(400))
		}
		wantGone(t, res.PID, 0)
	})
	t.Run("killed by the signal", func(t *testing.T) {
		sh, err := exec.LookPath("sh")
		if err != nil {
			t.Skip("no sh")
		}
		res, err := Run(context.Background(), Spec{Path: sh, Args: []string{"-c", "echo partial; kill -SEGV $$"}})
		if err != nil {
			t.Fatal(err)
		}
		sig, ok := res.Signal()
		if !ok || sig != syscall.SIGSEGV || res.ExitCode() != -1 || res.ExitText() != "killed by signal SIGSEGV (segmentation fault)" || string(res.Stdout.Data) != "partial\n" {
			t.Fatalf("%s (%v %v), stdout %q", res.ExitText(), sig, ok, res.Stdout.Data)
		}
		wantGone(t, res.PID, 0)
	})
}

func TestTheWatchdogKillsAHang(t *testing.T) {
	spec := fake("hang")
	spec.Timeout = 200 * time.Millisecond
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := res.Signal()
	if !res.TimedOut || res.Canceled || sig != syscall.SIGKILL {
		t.Fatalf("timed out %v, canceled %v, %s", res.TimedOut, res.Canceled, res.ExitText())
	}
	wantGone(t, res.PID, 0)
}

func TestCancelKillsTheChild(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	spec := fake("hang")
	spec.Started = func(int) { cancel() }
	res, err := Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := res.Signal()
	if !res.Canceled || res.TimedOut || res.Forwarded != 0 || sig != syscall.SIGKILL {
		t.Fatalf("canceled %v, timed out %v, forwarded %v, %s", res.Canceled, res.TimedOut, res.Forwarded, res.ExitText())
	}
	wantGone(t, res.PID, 0)
}

// An interrupted child gets the Interrupt signal first, and SIGKILL after
// the grace only when it is still running then.
func TestAnInterruptIsForwardedThenKilled(t *testing.T) {
	for _, tt := range []struct {
		mode string
		want syscall.Signal // what ended it
	}{
		{"ready", syscall.SIGTERM},
		{"ignore-term", syscall.SIGKILL},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			spec := fake(tt.mode)
			spec.Stdout, spec.Timeout, spec.InterruptGrace = pw, limit, 200*time.Millisecond
			spec.Interrupt = func() syscall.Signal { return syscall.SIGTERM }
			spec.Started = func(pid int) { killAtCleanup(t, pid) }
			// Interrupt once the child says it is ready (its signal
			// handling is in place).
			testutil.Go(t, limit, func() {
				if line, err := bufio.NewReader(pr).ReadString('\n'); err == nil && line == "ready\n" {
					cancel()
				}
			})
			res, err := Run(ctx, spec)
			pw.Close()
			if err != nil {
				t.Fatal(err)
			}
			sig, _ := res.Signal()
			if !res.Canceled || res.Forwarded != syscall.SIGTERM || sig != tt.want {
				t.Fatalf("canceled %v, forwarded %v, %s; want ended by %v", res.Canceled, res.Forwarded, res.ExitText(), tt.want)
			}
			wantGone(t, res.PID, 0)
		})
	}
}

func TestNoChildStartsOnceTheContextHasEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	spec := fake("result")
	spec.Started = func(pid int) { killAtCleanup(t, pid); t.Errorf("child %d started", pid) }
	_, err := Run(ctx, spec)
	var se *StartError
	if !errors.As(err, &se) || se.Err != ErrNotStarted {
		t.Fatalf("err %v, want the not-started start error", err)
	}
}

func TestOutputOverTheCapKeepsItsEnd(t *testing.T) {
	const keep = 64 << 10
	spec := fake("flood", "FLOOD_BYTES="+strconv.Itoa(4*keep))
	spec.Keep = keep
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	d := res.Stdout.Data
	if res.Stdout.Cut < 3*keep || len(d) > keep || !bytes.HasSuffix(d, []byte("x\nlast line\n")) || d[0] != 'x' || bytes.Count(d[:100], []byte("\n")) != 1 {
		t.Fatalf("cut %d, kept %d bytes starting %q", res.Stdout.Cut, len(d), d[:min(len(d), 120)])
	}
	written := int64((4*keep+99)/100*100 + len("last line\n"))
	if res.Stdout.Cut+int64(len(d)) != written {
		t.Fatalf("cut %d + kept %d is not the %d bytes written", res.Stdout.Cut, len(d), written)
	}
	if got := res.Stdout.Last(25); got != "last line\n" {
		t.Fatalf("Last(25) = %q", got)
	}
	wantGone(t, res.PID, 0)
}

func TestTailKeepsTheLastBytes(t *testing.T) {
	for _, tt := range []struct {
		name   string
		writes []string
		keep   int
		want   string
		cut    int64
	}{
		{"under", []string{"a\n", "b\n"}, 8, "a\nb\n", 0},
		{"over, to a line", []string{"one\n", "two\n", "three\n"}, 8, "three\n", 8},
		{"one big write", []string{"0123456789\nab\n"}, 5, "ab\n", 11},
		{"no line boundary", []string{"abcdefgh"}, 4, "efgh", 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tl := &tail{keep: tt.keep}
			for _, w := range tt.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("write %q: %d, %v", w, n, err)
				}
			}
			out := tl.output()
			if string(out.Data) != tt.want || out.Cut != tt.cut {
				t.Fatalf("kept %q cut %d, want %q cut %d", out.Data, out.Cut, tt.want, tt.cut)
			}
		})
	}
}

// startParent starts this test binary as a fake miotool (fakeParent)
// that starts its children as how says, and returns it with the process
// ids of the families its children reported: child, the sleeper in its
// group, the escaped one. Everything is killed when t ends.
func startParent(t *testing.T, how string, families int) (*exec.Cmd, [][3]int) {
	t.Helper()
	parent := exec.Command(os.Args[0], how)
	parent.Env = append(os.Environ(), fakeEnv+"=parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	killAtCleanup(t, parent.Process.Pid)
	waited := make(chan struct{})
	go func() { _ = parent.Wait(); close(waited) }()
	t.Cleanup(func() { <-waited })
	lines := make(chan string)
	testutil.Go(t, limit, func() {
		defer close(lines)
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case lines <- s.Text():
			case <-waited:
				return
			}
		}
	})
	var got [][3]int
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for len(got) < families {
		select {
		case l, ok := <-lines:
			var f [3]int
			if _, err := fmt.Sscanf(l, "family %d %d %d", &f[0], &f[1], &f[2]); !ok || err != nil {
				t.Fatalf("the parent said %q (%v)", l, ok)
			}
			for _, pid := range f {
				killAtCleanup(t, pid)
			}
			got = append(got, f)
		case <-timer.C:
			t.Fatalf("the parent's children did not start within %v", limit)
		}
	}
	return parent, got
}

// A child, and what it started, outlive neither the watchdog nor miotool
// itself: when miotool is killed (it cannot catch SIGKILL), the kernel
// kills the child (its death signal), and the watcher, which started
// before it, kills its group and every process holding its token, also
// when miotool dies before it could tell the watcher the child's group,
// and for every child Many runs.
func TestChildrenDieWithTheirParent(t *testing.T) {
	for _, tt := range []struct {
		how      string
		families int
		gone     []int // which of child, its group's sleeper, the escaped sleeper must die
	}{
		{"unwatched", 1, []int{0}}, // the death signal alone
		{"watched", 1, []int{0, 1, 2}},
		{"killed-before-watch", 1, []int{0, 1, 2}},
		{"many", 3, []int{0, 1, 2}},
	} {
		t.Run(tt.how, func(t *testing.T) {
			parent, families := startParent(t, tt.how, tt.families)
			if err := parent.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				for _, i := range tt.gone {
					wantGone(t, 0, f[i])
				}
			}
		})
	}
}

func TestLastStartsAtALine(t *testing.T) {
	o := Output{Data: []byte("line 7\nline 8\nline 9\n")}
	for _, tt := range []struct {
		n    int
		want string
	}{{100, "line 7\nline 8\nline 9\n"}, {16, "line 8\nline 9\n"}, {14, "line 8\nline 9\n"}, {5, "ne 9\n"}} {
		if got := o.Last(tt.n); got != tt.want {
			t.Errorf("Last(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
