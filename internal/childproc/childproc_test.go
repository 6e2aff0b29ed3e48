package childproc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"miotool/internal/testutil"
)

// fakeEnv makes this test binary, re-executed, a fake child (see TestMain).
const fakeEnv = "MIOTOOL_CHILDPROC_FAKE"

// limit bounds every wait in these tests: wide for a loaded machine, and
// a failure rather than a hang when something is left running.
const limit = 20 * time.Second

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		fakeChild(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeChild behaves as one of the children the tests run.
func fakeChild(mode string) {
	switch mode {
	case "sleep":
		time.Sleep(time.Hour)
	case "result":
		fmt.Println("result ok")
	case "fork-sleeper", "escape-sleeper":
		// A descendant that inherits the output pipes and outlives this
		// process; "escape" puts it in a session (and group) of its own,
		// out of reach of the group's kill.
		c := exec.Command(os.Args[0])
		c.Env = append(os.Environ(), fakeEnv+"=sleep")
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if mode == "escape-sleeper" {
			c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		}
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Printf("sleeper %d\nresult ok\n", c.Process.Pid)
	case "go-segv":
		// A read of unmapped memory: the Go runtime reports the SIGSEGV
		// and exits with status 2.
		mem, err := syscall.Mmap(-1, 0, os.Getpagesize(), syscall.PROT_READ, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err == nil && syscall.Munmap(mem) == nil {
			fmt.Println(*(*int64)(unsafe.Pointer(&mem[0])))
		}
	case "hang":
		time.Sleep(time.Hour)
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
		// A miotool that starts a sleeping child and is then killed: the
		// child must die with it.
		_, err := Run(context.Background(), Spec{Path: os.Args[0], Env: append(os.Environ(), fakeEnv+"=sleep"),
			Started: func(pid int) { fmt.Printf("child %d\n", pid) }})
		fmt.Fprintln(os.Stderr, "the child ended:", err)
		os.Exit(3)
	}
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
		data, err := os.ReadFile(path)
		if err != nil {
			continue // it ended while we looked
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		id, _ := strconv.Atoi(strings.Fields(s[:i])[0])
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		group, _ := strconv.Atoi(f[2])
		if pgid != 0 && group == pgid || pgid == 0 && id == pid {
			live = append(live, strings.TrimSpace(s[:i+1])+" "+f[0])
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
	if res.ExitCode() != 0 || res.TimedOut || res.PipeHeld || !bytes.Contains(res.Stdout.Data, []byte("result ok\n")) {
		t.Fatalf("%s, timed out %v, pipe held %v, stdout %q", res.ExitText(), res.TimedOut, res.PipeHeld, res.Stdout.Data)
	}
	wantGone(t, res.PID, 0)
	wantGone(t, 0, sleeper)
}

// A descendant that left the group keeps the output pipe open: the child's
// own result is reported after the grace, not a hang.
func TestAnEscapedDescendantCostsOnlyTheGrace(t *testing.T) {
	spec := fake("escape-sleeper")
	spec.Timeout, spec.PipeGrace = limit, 100*time.Millisecond
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	sleeper := sleeperPID(t, res.Stdout.Data)
	killAtCleanup(t, sleeper)
	// It is out of the group's reach by construction; the test ends it.
	if err := syscall.Kill(sleeper, syscall.SIGKILL); err != nil {
		t.Errorf("killing the escaped sleeper %d: %v", sleeper, err)
	}
	if res.ExitCode() != 0 || res.TimedOut || !res.PipeHeld || !bytes.Contains(res.Stdout.Data, []byte("result ok\n")) {
		t.Fatalf("%s, timed out %v, pipe held %v, stdout %q", res.ExitText(), res.TimedOut, res.PipeHeld, res.Stdout.Data)
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
	if !res.Canceled || res.TimedOut {
		t.Fatalf("canceled %v, timed out %v, %s", res.Canceled, res.TimedOut, res.ExitText())
	}
	wantGone(t, res.PID, 0)
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

// A child outlives neither the watchdog nor miotool itself: when the
// process that started it is killed, the kernel kills it too.
func TestTheChildDiesWithItsParent(t *testing.T) {
	parent := exec.Command(os.Args[0])
	parent.Env = append(os.Environ(), fakeEnv+"=parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	testutil.Go(t, limit, func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	})
	// Killing the parent closes the pipe, which ends the reader.
	t.Cleanup(func() { _ = parent.Process.Kill(); _ = parent.Wait() })
	var child int
	select {
	case l := <-lines:
		if _, err := fmt.Sscanf(l, "child %d", &child); err != nil {
			t.Fatalf("the parent said %q", l)
		}
		killAtCleanup(t, child)
	case <-time.After(limit):
		t.Fatalf("the parent did not start its child within %v", limit)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	wantGone(t, 0, child)
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
