//go:build linux

package trace

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/report"
	"miotool/internal/trace/tracetest"
)

// The built-binary tests run miotool itself, built for the test, on the
// stand-in runtimes and programs of tracetest: exit codes, headlines, the
// program's own streams, signals, and the observer built on first use into
// a cache of the test's own. They skip without gcc or go.

func TestMain(m *testing.M) {
	code := m.Run()
	tracetest.Remove()
	os.Exit(code)
}

// binary is the built miotool and the environment it runs in.
type binary struct {
	bin  string
	kit  *tracetest.Kit
	env  []string
	home string
}

// newBinary builds miotool and the kit; the observer's cache is shared by
// every run of one test.
func newBinary(t *testing.T) *binary {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs miotool")
	}
	kit := tracetest.Shared(t)
	b := &binary{bin: cmdtest.BuildMiotool(t), kit: kit, home: t.TempDir()}
	b.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + b.home, "XDG_CACHE_HOME=" + filepath.Join(b.home, "cache"),
		"XDG_CONFIG_HOME=" + filepath.Join(b.home, "config"), "TMPDIR=" + os.TempDir(),
		// The CUDA program's observer finds the stand-in libcupti here.
		"LD_LIBRARY_PATH=" + kit.Lib}
	return b
}

// run is one finished miotool.
type run struct {
	code           int
	stdout, stderr string
}

// run runs miotool with args, stdin as its input, within the limit.
func (b *binary) run(t *testing.T, stdin string, env []string, args ...string) run {
	t.Helper()
	cmd := exec.Command(b.bin, args...)
	cmd.Env = append(append([]string{}, b.env...), env...)
	cmd.Dir = b.home
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
	case <-time.After(tracetest.Limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("miotool %v did not end within %v; stderr:\n%s", args, tracetest.Limit, errOut.String())
	}
	return run{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// progOutput is what prog.c prints on stdout for a scenario.
func progOutput(scenario string, lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s: %s\n", scenario, l)
	}
	return b.String()
}

// TestTraceBinary runs the built miotool trace on the stand-ins.
func TestTraceBinary(t *testing.T) {
	b := newBinary(t)
	k := b.kit
	t.Run("exit codes and headlines", func(t *testing.T) {
		cases := []struct {
			name   string
			args   []string
			code   int
			stdout string // the program's own output, exactly, before miotool's
			head   string // the first line of miotool's own output
			stderr string // all of it
		}{
			{"another thread's synchronize", []string{"trace", "--", k.HIPProg, "sync-other-thread"}, 1,
				progOutput("sync-other-thread", "begin 0", "launch 0", "device synchronize 900", "launch after 901", "end capture 901"),
				"trace: FAIL - hipDeviceSynchronize from thread ", "stderr: sync-other-thread\n"},
			{"a query on the capturing stream, CUDA", []string{"trace", "--", k.CUDAProg, "query-capturing"}, 1,
				progOutput("query-capturing", "begin 0", "launch 0", "query own stream 900", "end capture 901"),
				"trace: FAIL - cuStreamQuery from thread ", "stderr: query-capturing\n"},
			{"a clean capture", []string{"trace", "--", k.HIPProg, "clean"}, 0, progOutput("clean", "begin 0", "end capture 0"),
				"trace: PASS - 1 capture ended with success, nothing refused", "stderr: clean\n"},
			{"a hazard passes", []string{"trace", "--", k.HIPProg, "relaxed-other-query"}, 0,
				progOutput("relaxed-other-query", "begin 0", "launch 0", "query of another stream 0", "end capture 0"),
				"trace: PASS - 1 capture ended with success, nothing refused; 1 latent hazard, the first: hipStreamQuery from thread", "stderr: relaxed-other-query\n"},
			{"a hazard fails --strict", []string{"trace", "--strict", "--", k.HIPProg, "relaxed-other-query"}, 1,
				progOutput("relaxed-other-query", "begin 0", "launch 0", "query of another stream 0", "end capture 0"),
				"trace: FAIL - hipStreamQuery from thread", "stderr: relaxed-other-query\n"},
			{"no capture", []string{"trace", "--", k.HIPProg, "none"}, 4, progOutput("none", "query 0"),
				"trace: SKIP - no capture began: nothing to check", "stderr: none\nmiotool: trace: SKIP: no capture began: nothing to check\n"},
			{"true", []string{"trace", "--", "true"}, 4, "",
				"trace: SKIP - no capture began: nothing to check", "miotool: trace: SKIP: no capture began: nothing to check\n"},
			{"a crash inside the capture", []string{"trace", "--", k.HIPProg, "crash"}, 1, progOutput("crash", "begin 0", "query own stream 900"),
				"trace: FAIL - hipStreamQuery from thread ", "stderr: crash\n"},
			{"a status of its own", []string{"trace", "--", k.HIPProg, "exit3"}, 1, progOutput("exit3", "begin 0", "end capture 0"),
				"trace: FAIL - every capture ended well (1), but the program exited with status 3", "stderr: exit3\n"},
			{"the watchdog", []string{"trace", "--timeout", "300ms", "--", k.HIPProg, "hang"}, 1, progOutput("hang", "begin 0"),
				"trace: FAIL - the global-mode capture begun by thread ", "stderr: hang\n"},
			{"a program that forks", []string{"trace", "--", k.HIPProg, "fork"}, 1, "",
				"trace: FAIL - hipDeviceSynchronize from thread ", "stderr: fork\n"},
			{"a program that does not exist", []string{"trace", "--", "/nonexistent"}, 2, "", "",
				"miotool: program /nonexistent: no such file or directory\nRun 'miotool trace --help' for usage.\n"},
			{"no --", []string{"trace", k.HIPProg, "clean"}, 2, "", "",
				"miotool: put -- before the program: miotool trace [flags] -- " + k.HIPProg + " clean\nRun 'miotool trace --help' for usage.\n"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := b.run(t, "", nil, c.args...)
				if r.code != c.code {
					t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, c.code, r.stdout, r.stderr)
				}
				if r.stderr != c.stderr {
					t.Errorf("stderr %q, want %q", r.stderr, c.stderr)
				}
				if c.stdout != "" && !strings.HasPrefix(r.stdout, c.stdout) {
					t.Errorf("stdout does not begin with the program's own output, unchanged:\n%s\nwant first:\n%s", r.stdout, c.stdout)
				}
				mine := strings.TrimPrefix(r.stdout, c.stdout)
				if c.name == "a program that forks" {
					_, mine, _ = strings.Cut(r.stdout, "fork: child exited 0\n")
				}
				// On a pipe, where the program left its last line cannot
				// be read back: the result starts a line of its own.
				mine, ok := strings.CutPrefix(mine, "\n")
				if !ok && r.code != 2 { // a refused command writes nothing
					t.Errorf("the result does not start with a newline after the program's output on a pipe: %q", r.stdout)
				}
				if head, _, _ := strings.Cut(mine, "\n"); !strings.HasPrefix(head, c.head) {
					t.Errorf("miotool's first line %q, want it to begin %q", head, c.head)
				}
			})
		}
	})

	t.Run("callers, threads and the watchdog in the text", func(t *testing.T) {
		r := b.run(t, "", nil, "trace", "--", k.HIPProg, "sync-other-thread")
		for _, want := range []string{"(worker_synchronize) invalidated the global-mode capture begun by thread",
			"end capture 901", "hipErrorStreamCaptureUnsupported (900)", "hipprog(worker_synchronize)", "first culprit",
			"(another thread)", "processes observed (1)",
			"device:   Stand-in HIP device 0 (gfx942:sramecc+:xnack-, 304 CUs, hip device 0)"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.stdout)
			}
		}
		r = b.run(t, "", nil, "trace", "--timeout", "300ms", "--", k.HIPProg, "hang")
		if !strings.Contains(r.stdout, "never ended: the program hung: the watchdog killed it after 300ms") {
			t.Errorf("watchdog:\n%s", r.stdout)
		}
		r = b.run(t, "", nil, "trace", "--", k.HIPProg, "fork")
		if !strings.Contains(r.stdout, "(forked from ") || !strings.Contains(r.stdout, "processes observed (2)") {
			t.Errorf("fork:\n%s", r.stdout)
		}
	})

	t.Run("stdin reaches the program and its output is untouched", func(t *testing.T) {
		in := "line one\nline two\n\x00binary\xff\n"
		r := b.run(t, in, nil, "trace", "--", k.HIPProg, "echo")
		want := in + progOutput("echo", "begin 0", "end capture 0")
		if r.code != 0 || !strings.HasPrefix(r.stdout, want) || r.stderr != "stderr: echo\n" {
			t.Fatalf("exit %d, stdout %q, stderr %q; want stdout to begin %q", r.code, r.stdout, r.stderr, want)
		}
		if !strings.HasPrefix(strings.TrimPrefix(r.stdout, want), "\ntrace: PASS - ") {
			t.Errorf("miotool's result does not follow the program's output: %q", r.stdout)
		}
	})

	t.Run("formats", func(t *testing.T) {
		prog := progOutput("sync-other-thread", "begin 0", "launch 0", "device synchronize 900", "launch after 901", "end capture 901")
		junit := filepath.Join(t.TempDir(), "trace.xml")
		r := b.run(t, "", nil, "trace", "--format", "json", "--junit", junit, "--", k.HIPProg, "sync-other-thread")
		if r.code != 1 || !strings.HasPrefix(r.stdout, prog) {
			t.Fatalf("exit %d, stdout:\n%s", r.code, r.stdout)
		}
		res, err := report.ReadJSON(strings.NewReader(strings.TrimPrefix(r.stdout, prog)))
		if err != nil {
			t.Fatalf("the JSON after the program's output: %v\n%s", err, r.stdout)
		}
		if res.Verdict != report.Fail || res.Check != "trace" || !strings.HasPrefix(res.Summary, "hipDeviceSynchronize from thread") ||
			res.Device.Name != "Stand-in HIP device 0" || res.Device.Arch != "gfx942" ||
			!slices.ContainsFunc(res.Tables, func(t *report.Table) bool {
				return t.Title == "refused calls (callers innermost first, ← called from)"
			}) {
			t.Errorf("JSON result %+v", res)
		}
		data, err := os.ReadFile(junit)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			XMLName  xml.Name
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
		}
		if err := xml.Unmarshal(data, &doc); err != nil || doc.XMLName.Local != "testsuite" || doc.Tests != 1 || doc.Failures != 1 {
			t.Errorf("JUnit (%v):\n%s", err, data)
		}
		r = b.run(t, "", nil, "trace", "--format", "markdown", "--", k.HIPProg, "sync-other-thread")
		md := strings.TrimPrefix(r.stdout, prog)
		for _, want := range []string{"### trace: FAIL\n", "#### captures\n", "#### refused calls (callers innermost first, ← called from)\n",
			"#### Testing Checklist\n", "| trace ", "`miotool trace -- " + k.HIPProg + " sync-other-thread`",
			"| Failed (1/1 captures failed): hipDeviceSynchronize refused (900); program exit 0 |"} {
			if !strings.Contains(md, want) {
				t.Errorf("Markdown lacks %q:\n%s", want, md)
			}
		}
	})

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run("miotool interrupted by "+sig.String(), func(t *testing.T) {
			m := b.start(t, "trace", "--", k.HIPProg, "fork-hang")
			if err := m.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code, stdout := m.wait(t)
			want := map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143}[sig]
			if code != want {
				t.Fatalf("exit %d, want %d\n%s", code, want, stdout)
			}
			name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]
			if !strings.Contains(stdout, "trace: INTERRUPTED - interrupted: the program was stopped by miotool ("+name+"); 1 capture seen") {
				t.Errorf("output:\n%s", stdout)
			}
			tracetest.WantGone(t, m.program)
		})
	}

	t.Run("miotool killed", func(t *testing.T) {
		// SIGKILL, which miotool cannot catch, once the program has forked:
		// the program dies of its death signal, and the watcher miotool
		// started before the program kills its group (the forked child with
		// it) and removes the events socket's folder.
		m := b.start(t, "trace", "--", k.HIPProg, "fork-hang")
		if err := m.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		tracetest.WantGone(t, m.program)
		tracetest.WantPIDGone(t, m.child)
		tracetest.WantNoSocketFolder(t, m.tmp)
		if code, _ := m.wait(t); code != -1 {
			t.Errorf("miotool exited %d, want killed", code)
		}
	})

	// Not "nothing to check": the program's captures went unseen.
	t.Run("no libcupti for a CUDA program", func(t *testing.T) {
		r := b.run(t, "", []string{"LD_LIBRARY_PATH="}, "trace", "--", k.CUDAProg, "clean")
		if r.code != 3 || !strings.Contains(r.stdout, "trace: ERROR - the program's CUDA calls were not observed (process ") ||
			!strings.Contains(r.stderr, "libcupti could not be loaded") || !strings.Contains(r.stderr, "apt-get install cuda-cupti-13-0") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("no C compiler", func(t *testing.T) {
		empty := t.TempDir()
		r := b.run(t, "", []string{"PATH=" + empty, "XDG_CACHE_HOME=" + filepath.Join(empty, "cache"), "CC="}, "trace", "--", "/bin/true")
		if r.code != 4 || !strings.Contains(r.stderr, "no C compiler to build the trace observer with (tried cc, gcc, clang)") ||
			!strings.Contains(r.stderr, "apt-get install gcc") || !strings.Contains(r.stdout, "the program was not started") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
}

// started is a miotool trace running a fork-hang program: the program is
// in its capture, and its child forked.
type started struct {
	cmd     *exec.Cmd
	tmp     string // its TMPDIR
	program int    // its process id and group
	child   int
	out     *lockedBuffer
	lines   chan string
	exited  chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// start starts miotool with args (a fork-hang trace) and returns once the
// program says it has forked. What it started is killed when t ends.
func (b *binary) start(t *testing.T, args ...string) *started {
	t.Helper()
	cmd := exec.Command(b.bin, args...)
	s := &started{cmd: cmd, tmp: t.TempDir(), out: &lockedBuffer{}, lines: make(chan string, 64), exited: make(chan struct{})}
	cmd.Env, cmd.Dir = append(append([]string{}, b.env...), "TMPDIR="+s.tmp), b.home
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devnull.Close() })
	cmd.Stdin, cmd.Stderr = devnull, io.Discard
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.out.mu.Lock()
			s.out.b.WriteString(sc.Text() + "\n")
			s.out.mu.Unlock()
			select {
			case s.lines <- sc.Text():
			default:
			}
		}
	}()
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	s.exited = waited
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-waited })
	deadline := time.After(tracetest.Limit)
	for s.program == 0 {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("miotool ended before the program forked:\n%s", s.out)
			}
			if _, err := fmt.Sscanf(l, "fork-hang: child %d of %d", &s.child, &s.program); err == nil {
				tracetest.KillOnCleanup(t, s.program, s.child)
			}
		case <-deadline:
			t.Fatalf("the program did not fork within %v:\n%s", tracetest.Limit, s.out)
		}
	}
	return s
}

// wait waits for miotool within the limit and returns its exit status and
// standard output.
func (s *started) wait(t *testing.T) (int, string) {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(tracetest.Limit):
		t.Fatalf("miotool did not exit within %v:\n%s", tracetest.Limit, s.out)
	}
	// The output is complete once the pipe has closed (the program's
	// group, which shared it, is gone too).
	for range s.lines {
	}
	return s.cmd.ProcessState.ExitCode(), s.out.String()
}
