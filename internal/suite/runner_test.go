package suite

import (
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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"miotool/internal/childproc"
	"miotool/internal/report"
)

// fakeChildEnv makes the test binary act as a fake miotool: the runner's
// tests re-execute it as each check's process.
const fakeChildEnv = "MIOTOOL_SUITE_FAKE_CHILD"

// fakeLogEnv names a file the fake appends its arguments to, one line per
// run, so tests see the order runs really happened in.
const fakeLogEnv = "MIOTOOL_SUITE_FAKE_LOG"

func TestMain(m *testing.M) {
	if os.Getenv(fakeChildEnv) == "1" {
		os.Exit(fakeMiotool(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeMiotool behaves as its first argument says and, like miotool with
// --format json, prints one result on stdout and exits with its verdict's
// code.
func fakeMiotool(args []string) int {
	// With the runner's ResultFlag, the result goes to the file it names
	// (it comes last of the runner's flags, before any "--").
	var resultFile string
	if i := slices.Index(args, "--export-json"); i >= 0 && i+1 < len(args) {
		resultFile = args[i+1]
		args = slices.Delete(args, i, i+2)
	}
	// The result flags end the check's own flags, before any "--".
	own := len(args)
	if i := slices.Index(args, "--"); i >= 0 {
		own = i
	}
	if own < 4 || !slices.Equal(args[own-3:own], []string{"--format", "json", "--no-progress"}) {
		fmt.Fprintf(os.Stderr, "fake miotool: the runner did not ask for --format json --no-progress: %q\n", args)
		return 2
	}
	args = slices.Delete(args, own-3, own)
	if p := os.Getenv(fakeLogEnv); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		fmt.Fprintln(f, strings.Join(args, " "))
		f.Close()
	}
	emit := func(v report.Verdict, status, summary string) int {
		r := report.New(args[0], "miotool "+strings.Join(args, " ")+" --format json --no-progress", time.Now())
		r.Backend = "sim"
		r.Device = report.Device{Name: "Fake GPU", Arch: "fx1", Description: "Fake GPU (fx1, 1 CUs, sim)"}
		r.Detail = status
		r.Finish(v, summary, time.Now())
		out := io.Writer(os.Stdout)
		if resultFile != "" {
			f, err := os.Create(resultFile)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			defer f.Close()
			out = f
		}
		if err := report.WriteJSON(out, r); err != nil {
			return 3
		}
		return v.ExitCode()
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch args[0] {
	case "pass":
		return emit(report.Pass, "", "all good")
	case "fail":
		return emit(report.Fail, "", "end capture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)")
	case "skip":
		return emit(report.Skip, "", "backend cuda unavailable")
	case "status":
		return emit(report.Pass, arg(1), "matrix as expected")
	case "echoenv":
		return emit(report.Pass, "", arg(1)+"="+os.Getenv(arg(1)))
	case "args":
		return emit(report.Pass, "", strings.Join(args[1:], " "))
	case "pwd":
		wd, _ := os.Getwd()
		return emit(report.Pass, "", wd)
	case "usage":
		fmt.Fprintln(os.Stderr, "miotool: --mode: unknown capture mode \"sideways\"")
		fmt.Fprintln(os.Stderr, "Run 'miotool capture --help' for usage.")
		return 2
	case "garbage":
		fmt.Println("hello, not JSON")
		return 0
	case "noisy":
		// A traced program's own output, then the result.
		fmt.Println(strings.Repeat("the program's own output\n", 10000))
		return emit(report.Pass, "", "passed beside its program's output")
	case "mismatch":
		emit(report.Pass, "", "claims to pass")
		return 1
	case "crash":
		fmt.Fprintln(os.Stderr, "fatal error: concurrent map writes")
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case "gate":
		// Opening the FIFO for writing blocks until the test opens it
		// to read: the test then knows this check is running.
		f, err := os.OpenFile(arg(1), os.O_WRONLY, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		f.Close()
		// Until the runner kills it: a sleep, not an empty select, which
		// the runtime would end as a deadlock when nothing else runs.
		time.Sleep(time.Hour)
		return 3
	case "meet-write", "meet-read":
		// Opening a FIFO blocks until the other end opens it too: the
		// two checks end only if they run side by side.
		flag := os.O_WRONLY
		if args[0] == "meet-read" {
			flag = os.O_RDONLY
		}
		f, err := os.OpenFile(arg(1), flag, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		f.Close()
		return emit(report.Pass, "", "met")
	case "writedb":
		// What find does with the db: a record in MIOPEN_USER_DB_PATH.
		dir := os.Getenv("MIOPEN_USER_DB_PATH")
		if err := os.WriteFile(filepath.Join(dir, "sim_2.SIM.ufdb.txt"), []byte("key=Solver:1,0,algo\n"), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "miotool:", err)
			return 3
		}
		return emit(report.Pass, "", dir)
	case "cases":
		r := report.New("cases", "miotool cases", time.Now())
		r.Cases = report.Cases{Passed: 24, Total: 24}
		r.Finish(report.Pass, "all 24 combinations as expected", time.Now())
		if err := report.WriteJSON(os.Stdout, r); err != nil {
			return 3
		}
		return 0
	case "hang":
		fmt.Fprintln(os.Stderr, "hanging on purpose")
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		<-c // the runner's timeout kills the process group with SIGKILL
		return 0
	}
	fmt.Fprintf(os.Stderr, "fake miotool: unknown command %q\n", args[0])
	return 2
}

func fakeRunner(t *testing.T, extraEnv ...string) *Runner {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A binary built with -race sleeps a second on exit unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return &Runner{
		Command:    []string{exe},
		ResultArgs: []string{"--format", "json", "--no-progress"},
		Environ:    mergeEnv(os.Environ(), append([]string{fakeChildEnv + "=1", "GORACE=" + gorace}, extraEnv...)),
		Host:       "testhost",
		Tool:       report.Tool{Version: "test"},
	}
}

func check(name string, expect report.Verdict, args ...string) Check {
	return Check{Name: name, Args: args, Expect: expect}
}

func runSuite(t *testing.T, r *Runner, f *File, opts Options) *report.SuiteResult {
	t.Helper()
	if f.Name == "" {
		f.Name = "test"
	}
	if f.Timeout == 0 {
		f.Timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := r.Run(ctx, f, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestRunnerClassifiesEachRun(t *testing.T) {
	f := &File{Checks: []Check{
		check("pass", report.Pass, "pass"),
		check("expected-fail", report.Fail, "fail"),
		check("own-status", report.Pass, "status", "Fails with --reclaim=lazy, passes with --reclaim=worker"),
		check("unexpected-fail", report.Pass, "fail"),
		check("crash", report.Pass, "crash"),
		check("usage", report.Pass, "usage"),
		check("garbage", report.Pass, "garbage"),
		check("mismatch", report.Pass, "mismatch"),
		check("expected-skip", report.Skip, "skip"),
	}}
	res := runSuite(t, fakeRunner(t), f, Options{})
	want := map[string]struct {
		verdict report.Verdict
		summary string // contained in the run's summary
		status  string
		tail    bool // the stderr tail is kept
	}{
		"pass":            {report.Pass, "all good", "Passed", false},
		"expected-fail":   {report.Fail, "(901)", "Fails as expected (1/1 run failed)", false},
		"own-status":      {report.Pass, "matrix as expected", "Passed (1/1 run): Fails with --reclaim=lazy, passes with --reclaim=worker", false},
		"unexpected-fail": {report.Fail, "(901)", "Failed (1/1 run failed; expected PASS)", false}, // kept, but it printed none
		"crash":           {report.Error, "killed by signal SIGKILL (killed) without a result on standard output: fatal error: concurrent map writes", "Error (1/1 run errored; expected PASS): killed by signal SIGKILL", true},
		"usage":           {report.Error, "exit status 2 without a result on standard output: miotool: --mode: unknown capture mode \"sideways\"", "Error (1/1 run errored; expected PASS): exit status 2", true},
		"garbage":         {report.Error, "exit status 0 without a result", "Error (1/1 run errored; expected PASS): exit status 0 without a result", false},
		"mismatch":        {report.Error, "exit status 1 does not match its result's verdict PASS", "Error (1/1 run errored; expected PASS): exit status 1 does not match", false},
		"expected-skip":   {report.Skip, "unavailable", "Skipped as expected (1/1 run skipped)", false},
	}
	if len(res.Checks) != len(want) {
		t.Fatalf("%d result rows, want %d", len(res.Checks), len(want))
	}
	for _, c := range res.Checks {
		w := want[c.Name]
		if len(c.Runs) != 1 {
			t.Fatalf("%s: %d runs", c.Name, len(c.Runs))
		}
		r := c.Runs[0]
		if r.Verdict != w.verdict || !strings.Contains(r.Summary, w.summary) || !strings.HasPrefix(c.Status(), w.status) {
			t.Errorf("%s: verdict %s summary %q status %q; want %s, %q, %q", c.Name, r.Verdict, r.Summary, c.Status(), w.verdict, w.summary, w.status)
		}
		if (r.StderrTail != "") != w.tail {
			t.Errorf("%s: stderr tail %q (kept: want %v)", c.Name, r.StderrTail, w.tail)
		}
		if r.Host != "testhost" || r.Iteration != 1 || r.Order == 0 {
			t.Errorf("%s: host %q iteration %d order %d", c.Name, r.Host, r.Iteration, r.Order)
		}
		if r.Verdict != report.Error && r.Device.Name != "Fake GPU" {
			t.Errorf("%s: device %+v", c.Name, r.Device)
		}
	}
	if res.ExitCode() != report.ExitFail {
		t.Errorf("suite exit %d, want 1 (checks missed their expectation)", res.ExitCode())
	}
	if res.Suite != "test" || !slices.Equal(res.Hosts, []string{"testhost"}) || res.Tool.Version != "test" {
		t.Errorf("suite header %+v", res)
	}
}

// One failing check makes the suite exit 1; without it, 0.
func TestSuiteExitCode(t *testing.T) {
	met := []Check{check("a", report.Pass, "pass"), check("b", report.Fail, "fail"),
		{Name: "later", Args: []string{"crash"}, Expect: report.Pass, Skip: "not today"}}
	res := runSuite(t, fakeRunner(t), &File{Checks: met}, Options{})
	if res.ExitCode() != 0 {
		t.Errorf("every check met its expectation: exit %d\n%+v", res.ExitCode(), res.Checks)
	}
	if c := res.Checks[2]; len(c.Runs) != 0 || c.Status() != "Not run (not today)" {
		t.Errorf("skipped check ran: %+v", c)
	}
	res = runSuite(t, fakeRunner(t), &File{Checks: append(met, check("c", report.Pass, "fail"))}, Options{})
	if res.ExitCode() != 1 {
		t.Errorf("one check failed: exit %d", res.ExitCode())
	}
}

func TestRunnerKillsAHungCheck(t *testing.T) {
	c := check("hang", report.Pass, "hang")
	// The child must start and write its line before the timeout kills it:
	// a wide margin for a loaded machine, and the test waits all of it.
	c.Timeout = 5 * time.Second
	res := runSuite(t, fakeRunner(t), &File{Checks: []Check{c, check("after", report.Pass, "pass")}}, Options{})
	r := res.Checks[0].Runs[0]
	if r.Verdict != report.Error || !strings.Contains(r.Summary, "no result within 5s; the process was killed: hanging on purpose") {
		t.Errorf("hung check: %s %q", r.Verdict, r.Summary)
	}
	if res.Checks[1].Runs[0].Verdict != report.Pass {
		t.Errorf("the suite did not go on after the hang: %+v", res.Checks[1].Runs)
	}
}

func TestEnvVariantsReachTheChild(t *testing.T) {
	f := &File{
		Env: []string{"MIOPEN_NAIVE_TIMEOUT=300"},
		Checks: []Check{
			check("queues", report.Pass, "echoenv", "GPU_MAX_HW_QUEUES"),
			check("timeout", report.Pass, "echoenv", "MIOPEN_NAIVE_TIMEOUT"),
			{Name: "own", Args: []string{"echoenv", "MIOPEN_FIND_MODE"}, Expect: report.Pass, Env: []string{"MIOPEN_FIND_MODE=FAST"}},
		},
	}
	var variants []Variant
	for _, s := range []string{"GPU_MAX_HW_QUEUES=3", "GPU_MAX_HW_QUEUES=8,MIOPEN_NAIVE_TIMEOUT=0"} {
		v, err := ParseVariant(s)
		if err != nil {
			t.Fatal(err)
		}
		variants = append(variants, v)
	}
	// The parent's own value is what the baseline sees; variants override it.
	res := runSuite(t, fakeRunner(t, "GPU_MAX_HW_QUEUES=1"), f, Options{Variants: variants})
	want := []struct{ test, summary, command string }{
		{"queues", "GPU_MAX_HW_QUEUES=1", "MIOPEN_NAIVE_TIMEOUT=300 miotool echoenv GPU_MAX_HW_QUEUES"},
		{"timeout", "MIOPEN_NAIVE_TIMEOUT=300", "MIOPEN_NAIVE_TIMEOUT=300 miotool echoenv MIOPEN_NAIVE_TIMEOUT"},
		{"own", "MIOPEN_FIND_MODE=FAST", "MIOPEN_NAIVE_TIMEOUT=300 MIOPEN_FIND_MODE=FAST miotool echoenv MIOPEN_FIND_MODE"},
		{"queues [GPU_MAX_HW_QUEUES=3]", "GPU_MAX_HW_QUEUES=3", "MIOPEN_NAIVE_TIMEOUT=300 GPU_MAX_HW_QUEUES=3 miotool echoenv GPU_MAX_HW_QUEUES"},
		{"timeout [GPU_MAX_HW_QUEUES=3]", "MIOPEN_NAIVE_TIMEOUT=300", ""},
		{"own [GPU_MAX_HW_QUEUES=3]", "MIOPEN_FIND_MODE=FAST", ""},
		{"queues [GPU_MAX_HW_QUEUES=8 MIOPEN_NAIVE_TIMEOUT=0]", "GPU_MAX_HW_QUEUES=8", ""},
		{"timeout [GPU_MAX_HW_QUEUES=8 MIOPEN_NAIVE_TIMEOUT=0]", "MIOPEN_NAIVE_TIMEOUT=0", ""},
		{"own [GPU_MAX_HW_QUEUES=8 MIOPEN_NAIVE_TIMEOUT=0]", "MIOPEN_FIND_MODE=FAST", ""},
	}
	if len(res.Checks) != len(want) {
		t.Fatalf("%d rows, want %d", len(res.Checks), len(want))
	}
	for i, w := range want {
		c := res.Checks[i]
		if c.Test() != w.test || c.Runs[0].Summary != w.summary {
			t.Errorf("row %d: %s saw %q; want %s seeing %q", i, c.Test(), c.Runs[0].Summary, w.test, w.summary)
		}
		if w.command != "" && c.CommandLine() != w.command {
			t.Errorf("row %d: command %q, want %q", i, c.CommandLine(), w.command)
		}
	}
	if !slices.Equal(res.Options.Variants, []string{"GPU_MAX_HW_QUEUES=3", "GPU_MAX_HW_QUEUES=8 MIOPEN_NAIVE_TIMEOUT=0"}) {
		t.Errorf("options %+v", res.Options)
	}
}

// Repeated, shuffled runs happen in the order the seed gives, the same
// order each time. (That another seed gives another order is Plan's test.)
func TestRepeatAndShuffleAreDeterministic(t *testing.T) {
	f := &File{}
	for _, n := range []string{"a", "b", "c", "d"} {
		f.Checks = append(f.Checks, check(n, report.Pass, "args", n))
	}
	const repeat, seed = 2, 99
	log := func() (string, *report.SuiteResult) {
		p := filepath.Join(t.TempDir(), "log")
		res := runSuite(t, fakeRunner(t, fakeLogEnv+"="+p), f, Options{Repeat: repeat, Shuffle: true, Seed: seed})
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(strings.ReplaceAll(string(data), "args ", ""), "\n", ""), res
	}
	first, res := log()
	second, _ := log()
	if first != second {
		t.Errorf("seed %d ran %s, then %s", seed, first, second)
	}
	var planned strings.Builder
	for _, st := range Plan(f, 1, repeat, true, seed) {
		planned.WriteString(f.Checks[st.Check].Name)
	}
	if first != planned.String() {
		t.Errorf("ran %s, the plan says %s", first, planned.String())
	}
	if first == "abcdabcd" {
		t.Errorf("seed %d left the file order", seed)
	}
	// The result lists checks in file order; each run knows its pass and
	// its place in the order.
	byOrder := make([]string, len(f.Checks)*repeat)
	for _, c := range res.Checks {
		if len(c.Runs) != repeat {
			t.Fatalf("%s: %d runs, want %d", c.Name, len(c.Runs), repeat)
		}
		for i, r := range c.Runs {
			if r.Iteration != i+1 {
				t.Errorf("%s: run %d has iteration %d", c.Name, i, r.Iteration)
			}
			byOrder[r.Order-1] = c.Name
		}
	}
	if strings.Join(byOrder, "") != first {
		t.Errorf("orders in the result give %s, the processes ran %s", strings.Join(byOrder, ""), first)
	}
	if !res.Options.Shuffle || res.Options.Seed != seed || res.Options.Repeat != repeat {
		t.Errorf("options %+v", res.Options)
	}
}

func TestRunnerRunsTheArgsItIsGivenInTheWorkdir(t *testing.T) {
	dir := t.TempDir()
	r := fakeRunner(t)
	r.Args = func(c Check) []string {
		if c.Name == "own-backend" {
			return append(slices.Clone(c.Args), "--device", "1")
		}
		return append(slices.Clone(c.Args), "--backend", "sim", "--device", "1")
	}
	f := &File{Workdir: dir, Checks: []Check{
		check("plain", report.Pass, "args", "x"),
		check("own-backend", report.Pass, "args", "--backend=cuda"),
		check("pwd", report.Pass, "pwd"),
	}}
	res := runSuite(t, r, f, Options{})
	if got := res.Checks[0].Runs[0].Summary; got != "x --backend sim --device 1" {
		t.Errorf("plain check got %q", got)
	}
	if got := res.Checks[1].Runs[0].Summary; got != "--backend=cuda --device 1" {
		t.Errorf("a check's own --backend was overridden: %q", got)
	}
	if got := res.Checks[0].Command; got != "miotool args x --backend sim --device 1" {
		t.Errorf("command cell %q", got)
	}
	wd, err := filepath.EvalSymlinks(res.Checks[2].Runs[0].Summary)
	want, _ := filepath.EvalSymlinks(dir)
	if err != nil || wd != want {
		t.Errorf("check ran in %q, want %q", res.Checks[2].Runs[0].Summary, dir)
	}
}

func TestInterruptStopsTheSuite(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	r := fakeRunner(t)
	var seen []string
	r.Progress = func(done, total int, current string) {
		seen = append(seen, fmt.Sprintf("%d/%d %s", done, total, current))
		if current == "second" {
			cancel(errors.New("interrupted by SIGINT"))
		}
	}
	f := &File{Name: "x", Timeout: 30 * time.Second, Checks: []Check{check("first", report.Pass, "pass"), check("second", report.Pass, "pass"), check("third", report.Pass, "pass")}}
	res, err := r.Run(ctx, f, Options{})
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(res.Checks[0].Runs) != 1 || len(res.Checks[1].Runs) != 0 || len(res.Checks[2].Runs) != 0 {
		t.Errorf("runs after the interrupt: %d %d %d", len(res.Checks[0].Runs), len(res.Checks[1].Runs), len(res.Checks[2].Runs))
	}
	// The checks never reached are not run: neither passed nor failed.
	if res.StatusOf(res.Checks[1]) != "Not run (the suite was interrupted before it started)" || res.Checks[1].Outcome() != report.Skip {
		t.Errorf("the check the interrupt came before: status %q outcome %s", res.StatusOf(res.Checks[1]), res.Checks[1].Outcome())
	}
	if res.Interrupted != "interrupted by SIGINT" || res.Verdict() != report.Interrupted || res.ExitCode() != report.ExitInterrupted {
		t.Errorf("interrupted %q, verdict %s, exit %d", res.Interrupted, res.Verdict(), res.ExitCode())
	}
	if tot := res.Totals(); tot != (report.SuiteTotals{Checks: 3, Met: 1, NotRun: 2}) {
		t.Errorf("totals %+v", tot)
	}
	if !slices.Equal(seen, []string{"0/3 first", "1/3 second"}) {
		t.Errorf("progress %q", seen)
	}
}

// The check that runs when the interrupt comes is interrupted, with the
// time it ran; it is not "not run", and the checks after it are.
func TestInterruptMarksTheRunningCheck(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	opened := make(chan error, 1)
	go func() {
		// Returns once the "gate" check has opened the FIFO: it runs.
		f, err := os.Open(fifo)
		if err == nil {
			f.Close()
		}
		opened <- err
	}()
	go func() {
		select {
		case err := <-opened:
			if err == nil {
				cancel(errors.New("interrupted by SIGINT"))
			}
		case <-ctx.Done():
		}
	}()
	r := fakeRunner(t)
	clock := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	r.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second) // every reading a second later
		return clock
	}
	f := &File{Name: "x", Timeout: 60 * time.Second, Checks: []Check{
		check("first", report.Pass, "cases"), check("running", report.Pass, "gate", fifo), check("later", report.Pass, "pass")}}
	res, err := r.Run(ctx, f, Options{})
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	running := res.Checks[1]
	if len(running.Runs) != 1 || running.Runs[0].Verdict != report.Interrupted || running.Outcome() != report.Interrupted {
		t.Fatalf("the running check: %+v", running.Runs)
	}
	if d := running.Runs[0].Duration; d != time.Second || res.StatusOf(running) != "Interrupted (0 of 1 run finished): interrupted by SIGINT after 1.00s" {
		t.Errorf("the running check ran %v by the clock; status %q", d, res.StatusOf(running))
	}
	if running.Runs[0].Summary != "interrupted by SIGINT while the check ran" || running.Runs[0].Order != 2 || running.Runs[0].Host != "testhost" {
		t.Errorf("the interrupted run: %+v", running.Runs[0])
	}
	if first := res.Checks[0]; first.Status() != "Passed (24/24)" || first.Runs[0].Cases != (report.Cases{Passed: 24, Total: 24}) {
		t.Errorf("the finished check: %q %+v", first.Status(), first.Runs[0].Cases)
	}
	if tot := res.Totals(); tot != (report.SuiteTotals{Checks: 3, Met: 1, Interrupted: 1, NotRun: 1}) {
		t.Errorf("totals %+v", tot)
	}
	want := "interrupted by SIGINT before the suite finished: 1 of 3 checks finished (every one met its expectation), 1 interrupted, 1 never started"
	if res.Summary() != want || res.Verdict() != report.Interrupted {
		t.Errorf("summary %q, verdict %s", res.Summary(), res.Verdict())
	}
}

func TestProgressHearsEveryRun(t *testing.T) {
	r := fakeRunner(t)
	var seen []string
	r.Progress = func(done, total int, current string) {
		seen = append(seen, fmt.Sprintf("%d/%d %s", done, total, current))
	}
	v, _ := ParseVariant("A=1")
	f := &File{Checks: []Check{check("p", report.Pass, "pass"), {Name: "s", Args: []string{"pass"}, Expect: report.Pass, Skip: "no"}}}
	runSuite(t, r, f, Options{Repeat: 2, Variants: []Variant{v}})
	want := []string{"0/4 p", "1/4 p", "2/4 p [A=1]", "3/4 p [A=1]", "4/4 "}
	if !slices.Equal(seen, want) {
		t.Errorf("progress %q, want %q", seen, want)
	}
}

func TestStartCPULoad(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	stop := StartCPULoad(2)
	if runtime.GOMAXPROCS(0) < 3 {
		t.Errorf("GOMAXPROCS %d while 2 workers run, want at least 3", runtime.GOMAXPROCS(0))
	}
	rounds := stop()
	if rounds == 0 {
		t.Error("the workers did no work")
	}
	if stop() != rounds {
		t.Error("a second stop changed the count")
	}
	if runtime.GOMAXPROCS(0) != before {
		t.Errorf("GOMAXPROCS %d after stop, want %d", runtime.GOMAXPROCS(0), before)
	}
	if StartCPULoad(0)() != 0 {
		t.Error("no workers did work")
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "A=base", "B=base"}, []string{"A=suite", "C=check", "A=variant"})
	want := []string{"PATH=/bin", "B=base", "C=check", "A=variant"}
	if !slices.Equal(got, want) {
		t.Errorf("mergeEnv = %q, want %q", got, want)
	}
}

// With a ResultFlag, each run's result is read from the file the flag
// names, so a check whose standard output carries something else (a
// traced program prints what it likes there) still has its result; a run
// that writes no file is an ERROR that says so.
func TestResultsComeFromTheResultFile(t *testing.T) {
	r := fakeRunner(t)
	r.ResultFlag = "--export-json"
	r.TempDir = t.TempDir()
	f := &File{Name: "x", Timeout: 60 * time.Second, Checks: []Check{
		check("noisy", report.Pass, "noisy"),
		check("usage", report.Pass, "usage"),
	}}
	res, err := r.Run(context.Background(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if run := res.Checks[0].Runs[0]; run.Verdict != report.Pass || run.Summary != "passed beside its program's output" {
		t.Errorf("noisy: %+v; want its result read from the file", run)
	}
	if run := res.Checks[1].Runs[0]; run.Verdict != report.Error ||
		!strings.Contains(run.Summary, "without writing its result file") || !strings.Contains(run.Summary, "unknown capture mode") {
		t.Errorf("usage: %+v; want an ERROR saying no result file came, with the child's error", run)
	}
	if left, _ := os.ReadDir(r.TempDir); len(left) != 0 {
		t.Errorf("the suite left %d entries in its temp folder", len(left))
	}
}

// TestAnInterruptedResultMayEndWithItsSignalsStatus: a check stopped by
// SIGTERM (a batch system's cancel) writes INTERRUPTED and may end with
// 143, the signal's status; any other status still disagrees with it.
func TestAnInterruptedResultMayEndWithItsSignalsStatus(t *testing.T) {
	dir := t.TempDir()
	result := report.New("replay", "miotool replay", time.Time{})
	result.Verdict = report.Interrupted
	var doc bytes.Buffer
	if err := report.WriteJSON(&doc, result); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "result.json")
	if err := os.WriteFile(file, doc.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		code int
		want report.Verdict
	}{{130, report.Interrupted}, {143, report.Interrupted}, {1, report.Error}, {0, report.Error}} {
		cmd := exec.Command("sh", "-c", fmt.Sprintf("exit %d", c.code))
		_ = cmd.Run()
		res := childproc.Result{PID: cmd.Process.Pid, State: cmd.ProcessState, Canceled: true}
		run, _ := (&Runner{}).judge(report.SuiteRun{}, res, nil, file, time.Minute)
		if run.Verdict != c.want {
			t.Errorf("exit %d with an INTERRUPTED result: %s (%s), want %s", c.code, run.Verdict, run.Summary, c.want)
		}
	}
}
