package trace

import (
	"context"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/rules"
	"miotool/internal/testutil"
	"miotool/internal/trace"
	"miotool/internal/trace/tracetest"
)

// withRun is a command tree whose trace hands its options to runF.
func withRun(runF func(*TraceOptions) error) func(*cli.Factory) *cobra.Command {
	return cmdtest.Tree(func(f *cli.Factory) *cobra.Command { return cli.AddOutputFlags(f, NewCmdTrace(f, runF)) })
}

// faked runs the trace with fake observer builds and runs.
func faked(build func(context.Context, trace.BuildOptions) (string, error),
	run func(context.Context, trace.Options) (*trace.Result, error)) func(*cli.Factory) *cobra.Command {
	return cmdtest.Tree(func(f *cli.Factory) *cobra.Command {
		return cli.AddOutputFlags(f, NewCmdTrace(f, func(o *TraceOptions) error {
			o.BuildObserver, o.TraceProgram = build, run
			return f.Finish(o.Run(f.Context))
		}))
	})
}

func TestTraceOptions(t *testing.T) {
	tracetest.GCC(t) // skips without one
	obs, err := trace.Build(context.Background(), trace.BuildOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args    []string
		env     map[string]string
		program string
		progArg []string
		timeout time.Duration
		strict  bool
		obs     string
	}{
		{[]string{"trace", "--", "true"}, nil, "true", nil, 0, false, ""},
		{[]string{"trace", "--timeout", "90s", "--strict", "--observer", obs, "--", "sh", "-c", "exit 0", "--strict", "--timeout", "1s"},
			nil, "sh", []string{"-c", "exit 0", "--strict", "--timeout", "1s"}, 90 * time.Second, true, obs},
		{[]string{"--format", "json", "trace", "--", "sh", "--format", "x"}, map[string]string{"MIOTOOL_TRACE_OBSERVER": obs, "MIOTOOL_TRACE_TIMEOUT": "5m"},
			"sh", []string{"--format", "x"}, 5 * time.Minute, false, obs},
	}
	for _, c := range cases {
		h := cmdtest.New(t)
		h.F.LookupEnv = func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		var got *TraceOptions
		if code := h.Run(withRun(func(o *TraceOptions) error { got = o; return nil }), c.args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, h.ErrOut)
		}
		if got.Program != c.program || strings.Join(got.Args, " ") != strings.Join(c.progArg, " ") || got.Timeout != c.timeout ||
			got.Strict != c.strict || got.Observer != c.obs {
			t.Errorf("%v: options %+v", c.args, got)
		}
		if got.CommandLine != report.JoinCommandLine(append([]string{"miotool"}, c.args...)) {
			t.Errorf("%v: command line %q", c.args, got.CommandLine)
		}
	}
}

// TestTraceUsageErrors: each is exit 2, one line and the hint, before
// anything is built or run.
func TestTraceUsageErrors(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"trace"}, nil, "no program to trace: miotool trace [flags] -- PROGRAM [ARGS...]"},
		{[]string{"trace", "--"}, nil, "no program after --"},
		{[]string{"trace", "true"}, nil, "put -- before the program: miotool trace [flags] -- true"},
		{[]string{"trace", "python3", "--", "x.py"}, nil, `"python3" before --`},
		{[]string{"trace", "python3", "x.py", "--lr", "3"}, nil, "unknown flag: --lr (the program's own flags go after --"},
		{[]string{"trace", "--", "/nonexistent/prog"}, nil, "program /nonexistent/prog: no such file or directory"},
		{[]string{"trace", "--", "no-such-program-anywhere"}, nil, "program no-such-program-anywhere: not found in $PATH"},
		{[]string{"trace", "--", plain}, nil, "permission denied (not executable)"},
		{[]string{"trace", "--timeout", "-1s", "--", "true"}, nil, "--timeout -1s: want 0 (none) or a positive duration"},
		{[]string{"trace", "--observer", filepath.Join(dir, "none.so"), "--", "true"}, nil, "--observer " + filepath.Join(dir, "none.so") + ": no such file or directory"},
		{[]string{"trace", "--observer", dir, "--", "true"}, nil, "not a file (give the observer library, libmiotool-observer.so)"},
		{[]string{"trace", "--observer", plain, "--", "true"}, nil, "--observer: trace observer " + plain + ": not an ELF file"},
		{[]string{"trace", "--observer", "/bin/true", "--", "true"}, nil, "--observer: trace observer /bin/true: "},
		{[]string{"trace", "--", "true"}, map[string]string{"MIOTOOL_TRACE_OBSERVER": filepath.Join(dir, "gone.so")},
			"no such file or directory (from MIOTOOL_TRACE_OBSERVER=" + filepath.Join(dir, "gone.so") + " in the environment)"},
		{[]string{"trace", "--junit", filepath.Join(dir, "missing", "j.xml"), "--", "true"}, nil, "the folder " + filepath.Join(dir, "missing") + " does not exist"},
	}
	for _, c := range cases {
		h := cmdtest.New(t)
		h.F.LookupEnv = func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
		ran := false
		code := h.Run(faked(func(context.Context, trace.BuildOptions) (string, error) { ran = true; return "", errors.New("built") },
			func(context.Context, trace.Options) (*trace.Result, error) { ran = true; return nil, errors.New("ran") }), c.args...)
		lines := strings.Split(strings.TrimSuffix(h.ErrOut.String(), "\n"), "\n")
		if code != cli.ExitUsage || !strings.Contains(lines[0], c.want) || len(lines) != 2 || lines[1] != "Run 'miotool trace --help' for usage." {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 with %q and the hint", c.args, code, h.ErrOut, c.want)
		}
		if ran || h.Out.Len() != 0 {
			t.Errorf("%v: something was built or run, or printed: %q", c.args, h.Out)
		}
	}
}

// TestTraceBuildFailures: no compiler is exit 4 saying what to install;
// a compiler that fails is a tool failure; neither starts the program.
func TestTraceBuildFailures(t *testing.T) {
	ran := false
	run := func(context.Context, trace.Options) (*trace.Result, error) { ran = true; return nil, errors.New("ran") }
	cases := []struct {
		name   string
		err    error
		code   int
		stderr string
	}{
		{"no compiler", &trace.NoCompilerError{Tried: []string{"cc", "gcc", "clang"}}, cli.ExitSkipped,
			"no C compiler to build the trace observer with (tried cc, gcc, clang): install one (for example: apt-get install gcc), or give a prebuilt observer with --observer PATH or MIOTOOL_TRACE_OBSERVER"},
		{"the compiler failed", &trace.BuildError{Command: []string{"/usr/bin/cc", "-shared"}, Output: "observer.c:1: error: boom", Err: errors.New("exit status 1")},
			cli.ExitToolFailure, "building the trace observer failed (/usr/bin/cc -shared): exit status 1"},
	}
	for _, c := range cases {
		h := cmdtest.New(t)
		junit := filepath.Join(h.Dir, "j.xml")
		code := h.Run(faked(func(context.Context, trace.BuildOptions) (string, error) { return "", c.err }, run),
			"trace", "--junit", junit, "--", "true")
		if code != c.code || !strings.Contains(h.ErrOut.String(), c.stderr) {
			t.Errorf("%s: exit %d, stderr %s", c.name, code, h.ErrOut)
		}
		if ran || !strings.Contains(h.Out.String(), "the program was not started: true") {
			t.Errorf("%s: ran %v; stdout %s", c.name, ran, h.Out)
		}
		if _, err := os.Stat(junit); err != nil {
			t.Errorf("%s: no JUnit file: %v", c.name, err)
		}
	}
}

// frames are named callers, innermost first, each "object:function".
func frames(named ...string) []trace.Frame {
	out := make([]trace.Frame, len(named))
	for i, n := range named {
		obj, fn, _ := strings.Cut(n, ":")
		out[i] = trace.Frame{Module: "/usr/lib/" + obj, Symbol: fn, Source: "dynamic"}
	}
	return out
}

// pytorchLike is the trace of a second thread's synchronize during a
// global capture, with a hazard on another capture and many clean ones.
func pytorchLike(clean int) *trace.Result {
	cp := &trace.Capture{ID: 1, API: hip.DialectCUDA, PID: 7, TID: 485, Stream: 0x356a1150, Mode: hip.CaptureModeGlobal,
		Begin: 2_000_000_000, BeginName: "cuStreamBeginCapture_v2", End: &trace.Ending{TID: 485, Time: 2_500_000_000, Result: 901},
		Calls: 5, ByName: map[string]int{"cuLaunchKernel": 3, "cuCtxSynchronize": 1, "cuStreamEndCapture": 1}, ByThread: map[int]int{485: 4, 512: 1}}
	culprit := &trace.Call{PID: 7, TID: 512, Time: 2_100_000_000, API: hip.DialectCUDA, Name: "cuCtxSynchronize_v2", Result: 900,
		Callers: frames("libcudart.so.13:cudaDeviceSynchronize",
			"libc10_cuda.so:c10::cuda::device_synchronize", "libtorch_python.so:THCPModule_cudaSynchronize")}
	after := &trace.Call{PID: 7, TID: 485, Time: 2_200_000_000, API: hip.DialectCUDA, Name: "cuLaunchKernel", Stream: 0x356a1150, Result: 901,
		Callers: frames("libcudart.so.13:cudaLaunchKernel", "libtorch_cuda.so:at::native::add")}
	cp.Refused = []*trace.Call{culprit, after}
	relaxed := &trace.Capture{ID: 2, API: hip.DialectCUDA, PID: 7, TID: 485, Stream: 0xbeef, Mode: hip.CaptureModeRelaxed,
		Begin: 3_000_000_000, End: &trace.Ending{TID: 485, Time: 3_100_000_000}, Calls: 1, ByName: map[string]int{"cuStreamQuery": 1},
		ByThread: map[int]int{600: 1}}
	query := &trace.Call{PID: 7, TID: 600, Name: "cuStreamQuery", Stream: 0xb, Action: rules.QueryOtherStream, Callers: frames("prog:worker_query")}
	relaxed.Candidates = []*trace.Call{query}
	res := &trace.Result{Program: "python3", Args: []string{"train step.py"}, Exit: trace.Exit{Code: 0, Wall: 4 * time.Second},
		Processes: []*trace.Process{{PID: 7, Exe: "/usr/bin/python3.12"}, {PID: 9, PPID: 7, Exe: "/usr/bin/python3.12", Forked: true}},
		Notes: []trace.Note{{PID: 7, Topic: "cupti", Status: "ok", Text: "/opt/nvidia/cu13/lib/libcupti.so.13"},
			{PID: 7, Topic: "scope", Status: "narrow", Text: "24 driver callbacks on outside captures"},
			{PID: 9, Topic: "scope", Status: "full", Text: "cuptiEnableCallback(1, driver API, 311 cuStreamDestroy_v2) returned 1: " +
				"the whole driver domain stays on, and every driver call runs the observer's callback"},
			{PID: 7, Topic: "python", Status: "unnamed", Text: "thread 512: its threading name was not read within 50 ms (the GIL stayed held by another thread)"},
			{PID: 7, Topic: "python", Status: "unnamed", Text: "thread 600: its threading name was not read within 50 ms (the GIL stayed held by another thread)"}},
		Captures: []*trace.Capture{cp, relaxed}, Start: 1_000_000_000, Events: 100}
	for i := 0; i < clean; i++ {
		res.Captures = append(res.Captures, &trace.Capture{ID: 3 + i, API: hip.DialectCUDA, PID: 7, TID: 485, Stream: 0x10,
			Mode: hip.CaptureModeGlobal, Begin: 4_000_000_000, End: &trace.Ending{TID: 485, Time: 4_000_000_100},
			ByName: map[string]int{}, ByThread: map[int]int{}})
	}
	res.Hazards = []trace.Hazard{{Capture: relaxed, Call: query,
		Cell:    rules.CellKey{Action: rules.QueryOtherStream, Capture: hip.CaptureModeRelaxed, Other: true},
		Strict:  rules.CellKey{Action: rules.QueryOtherStream, Capture: hip.CaptureModeGlobal, Other: true},
		Would:   rules.Expected{Returns: 900, End: 901, Basis: rules.BasisMeasured},
		Table:   "configs/rules/h200-cuda.yaml",
		Reasons: []string{"the capture was begun in relaxed mode"}}}
	return res
}

// table is r's table whose title begins with title.
func table(t *testing.T, r *report.Result, title string) *report.Table {
	t.Helper()
	for _, tb := range r.Tables {
		if strings.HasPrefix(tb.Title, title) {
			return tb
		}
	}
	t.Fatalf("no table %q among %d", title, len(r.Tables))
	return nil
}

func cell(t *testing.T, tb *report.Table, row int, column string) string {
	t.Helper()
	for i, c := range tb.Columns {
		if c == column {
			return tb.Rows[row].Cells[i]
		}
	}
	t.Fatalf("table %q has no column %q: %v", tb.Title, column, tb.Columns)
	return ""
}

// TestFill holds the tables to what the trace saw: the capture table,
// the culprit table with vendor names and callers innermost first, the
// hazards with their rule and table, the notes and the checklist status.
func TestFill(t *testing.T) {
	res := pytorchLike(captureRows + 5)
	rulesTables, err := trace.BuiltinRules()
	if err != nil {
		t.Fatal(err)
	}
	r := report.New("trace", "miotool trace -- python3 'train step.py'", time.Unix(0, 0))
	judged(r, res, false, rulesTables, time.Unix(5, 0))

	if r.Verdict != report.Fail || !strings.HasPrefix(r.Summary, "cuCtxSynchronize from thread 512 (cudaDeviceSynchronize ← c10::cuda::device_synchronize) invalidated the global-mode capture begun by thread 485 of process 7 on stream 0x356a1150; end capture 901") {
		t.Errorf("headline %s - %s", r.Verdict, r.Summary)
	}
	prog := table(t, r, "program")
	if cell(t, prog, 0, "program") != "python3 'train step.py'" || cell(t, prog, 0, "exit") != "the program exited with status 0" ||
		cell(t, prog, 0, "processes observed") != "2" {
		t.Errorf("program table %+v", prog.Rows)
	}
	caps := table(t, r, "captures")
	if len(caps.Rows) != captureRows {
		t.Errorf("%d capture rows, want %d (the failing one, the hazard's and clean ones up to the bound)", len(caps.Rows), captureRows)
	}
	for col, want := range map[string]string{"#": "1", "begun by (pid/thread)": "7/485", "stream": "0x356a1150", "mode": "global",
		"began (ms)": "1000.000", "end capture": "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)", "calls during it": "5", "threads": "2",
		"refused": "2", "hazards": "0", "calls by name": "cuLaunchKernel 3, cuCtxSynchronize 1, cuStreamEndCapture 1"} {
		if got := cell(t, caps, 0, col); got != want {
			t.Errorf("capture 1 %s: %q, want %q", col, got, want)
		}
	}
	if got := cell(t, caps, 1, "hazards"); got != "1" {
		t.Errorf("capture 2 hazards %q", got)
	}
	refused := table(t, r, "refused calls")
	if len(refused.Rows) != 2 {
		t.Fatalf("refused rows %+v", refused.Rows)
	}
	if refused.Rows[0].Flag != "first culprit" || refused.Rows[1].Flag != "reports an earlier refusal" {
		t.Errorf("roles %q, %q", refused.Rows[0].Flag, refused.Rows[1].Flag)
	}
	for col, want := range map[string]string{"capture": "1", "call": "cuCtxSynchronize", "thread": "512 (another thread)", "stream": "-",
		"result":  "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900)",
		"callers": "cudaDeviceSynchronize ← libc10_cuda.so(c10::cuda::device_synchronize) ← libtorch_python.so(THCPModule_cudaSynchronize)"} {
		if got := cell(t, refused, 0, col); got != want {
			t.Errorf("culprit %s: %q, want %q", col, got, want)
		}
	}
	if got := cell(t, refused, 1, "thread"); got != "485 (the capturing thread)" {
		t.Errorf("the 901 launch's thread %q", got)
	}
	hz := table(t, r, "hazards")
	for col, want := range map[string]string{"capture": "2", "call": "cuStreamQuery", "succeeded because": "the capture was begun in relaxed mode",
		"rule": "query-other-stream/global/other/global", "global mode would": "return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900); end capture CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)",
		"basis": "measured", "rules table": "configs/rules/h200-cuda.yaml", "callers": "prog(worker_query)"} {
		if got := cell(t, hz, 0, col); got != want {
			t.Errorf("hazard %s: %q, want %q", col, got, want)
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{
		"CUDA: the driver API observed through CUPTI callbacks (/opt/nvidia/cu13/lib/libcupti.so.13) in process 7",
		"processes observed (2): 7 python3.12, 9 python3.12 (forked from 7)",
		"Python: threads 512, 600 shown without their threading name: another thread held the GIL",
		"7 more captures ended with success, nothing refused: counted, not listed",
		"configs/rules/h200-cuda.yaml for CUDA and configs/rules/hip.yaml for HIP",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	// The narrow scope, the usual case, is no news; the full one is.
	if want := "CUDA: in process 9, cuptiEnableCallback(1, driver API, 311 cuStreamDestroy_v2) returned 1: the whole driver domain stays on, " +
		"and every driver call runs the observer's callback (a launch-bound program runs a few percent slower under the trace)"; !strings.Contains(notes, want) {
		t.Errorf("notes lack %q:\n%s", want, notes)
	}
	if strings.Contains(notes, "24 driver callbacks") {
		t.Errorf("the narrow scope is noted:\n%s", notes)
	}
	if strings.Contains(notes, "HIP: calls to libamdhip64") {
		t.Errorf("a CUDA-only trace notes the HIP interposer:\n%s", notes)
	}
	row := r.ChecklistRow()
	if want := fmt.Sprintf("Failed (1/%d captures failed): cuCtxSynchronize refused (900); program exit 0", captureRows+7); row[3] != want {
		t.Errorf("checklist status %q", row[3])
	}
	if r.Backend != "cuda" || !strings.Contains(r.BackendReason, "CUPTI") {
		t.Errorf("backend %q (%s)", r.Backend, r.BackendReason)
	}
}

func TestStatus(t *testing.T) {
	clean := &trace.Capture{ID: 1, End: &trace.Ending{}, ByName: map[string]int{}, ByThread: map[int]int{}}
	cases := []struct {
		name    string
		res     *trace.Result
		verdict report.Verdict
		detail  string
	}{
		{"pass", &trace.Result{Processes: []*trace.Process{{PID: 1}}, Captures: []*trace.Capture{clean}}, report.Pass, "program exit 0"},
		{"nothing", &trace.Result{Processes: []*trace.Process{{PID: 1}}}, report.Skip, "no capture began; program exit 0"},
		{"nothing, and the program failed", &trace.Result{Processes: []*trace.Process{{PID: 1}}, Exit: trace.Exit{Code: 2}}, report.Fail, "no capture began; program exit 2"},
		{"not observed", &trace.Result{}, report.Error, "the program could not be observed; program exit 0"},
		{"not observed, and the program failed", &trace.Result{Exit: trace.Exit{Code: 1}}, report.Fail, "the program could not be observed; program exit 1"},
		{"crash", &trace.Result{Processes: []*trace.Process{{PID: 1}}, Exit: trace.Exit{Code: -1, Signal: syscall.SIGSEGV},
			Captures: []*trace.Capture{{ID: 1, ByName: map[string]int{}, ByThread: map[int]int{}}}}, report.Fail, "a capture never ended; program killed by SIGSEGV"},
		{"hung", &trace.Result{Processes: []*trace.Process{{PID: 1}}, Exit: trace.Exit{Code: -1, TimedOut: true, Timeout: time.Second, Signal: syscall.SIGKILL},
			Captures: []*trace.Capture{clean}}, report.Fail, "program hung (watchdog 1s)"},
	}
	for _, c := range cases {
		j := trace.Judge(c.res, false)
		if v, got := reportVerdict(j.Verdict), detail(c.res, j); v != c.verdict || got != c.detail {
			t.Errorf("%s: %s %q, want %s %q", c.name, v, got, c.verdict, c.detail)
		}
	}
}

// TestTraceJUnit: a FAIL is one failing test case, read back as a CI
// parser reads it.
func TestTraceJUnit(t *testing.T) {
	h := cmdtest.New(t)
	junit := filepath.Join(h.Dir, "trace.xml")
	res := pytorchLike(0)
	code := h.Run(faked(func(context.Context, trace.BuildOptions) (string, error) { return "/lib/observer.so", nil },
		func(_ context.Context, o trace.Options) (*trace.Result, error) {
			if o.Observer != "/lib/observer.so" || o.Program != "true" || o.InterruptSignal() != syscall.SIGINT {
				t.Errorf("options %+v", o)
			}
			return res, nil
		}), "trace", "--junit", junit, "--", "true")
	if code != cli.ExitCheckFailed {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName  xml.Name
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if doc.XMLName.Local != "testsuite" || doc.Tests != 1 || doc.Failures != 1 || len(doc.Cases) != 1 || doc.Cases[0].Failure == nil ||
		!strings.Contains(doc.Cases[0].Failure.Text, "cuCtxSynchronize from thread 512") ||
		!strings.HasPrefix(doc.Cases[0].Failure.Message, "Failed (") {
		t.Errorf("JUnit:\n%s", data)
	}
	t.Run("against junit-10.xsd", func(t *testing.T) { testutil.ValidateJUnit(t, data) })

	// A program that began no capture is a skipped case, not a pass.
	h = cmdtest.New(t)
	code = h.Run(faked(func(context.Context, trace.BuildOptions) (string, error) { return "/lib/observer.so", nil },
		func(context.Context, trace.Options) (*trace.Result, error) {
			return &trace.Result{Program: "true", Processes: []*trace.Process{{PID: 3}}}, nil
		}), "trace", "--junit", junit, "--", "true")
	data, err = os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if code != cli.ExitSkipped || !strings.Contains(string(data), `skipped="1"`) ||
		!strings.Contains(string(data), "no capture began: nothing to check") {
		t.Errorf("exit %d, JUnit:\n%s", code, data)
	}
	t.Run("skipped, against junit-10.xsd", func(t *testing.T) { testutil.ValidateJUnit(t, data) })
}

// TestHeadline: each trace verdict is the result's verdict of the same
// word, and one that could not observe the program is an ERROR.
func TestHeadline(t *testing.T) {
	for _, c := range []struct {
		v    trace.Verdict
		want report.Verdict
	}{
		{trace.Pass, report.Pass}, {trace.Fail, report.Fail}, {trace.NothingToCheck, report.Skip},
		{trace.Interrupted, report.Interrupted}, {trace.CouldNotObserve, report.Error}, {"MAYBE", report.Error},
	} {
		if got := reportVerdict(c.v); got != c.want {
			t.Errorf("%s: %s, want %s", c.v, got, c.want)
		}
	}
}

// TestDevice: the result names the device the captures began on as the
// runtime described it, once however many processes used it, and every
// device where there were several; the capture table says which capture
// was on which only then.
func TestDevice(t *testing.T) {
	h200 := trace.Device{PID: 7, API: hip.DialectCUDA, Ordinal: 0, Name: "NVIDIA H200", Arch: "sm_90", ComputeUnits: 132}
	mi300 := trace.Device{PID: 7, API: hip.DialectHIP, Ordinal: 1, Name: "AMD Instinct MI300X", Arch: "gfx942:sramecc+:xnack-", ComputeUnits: 304}
	again := h200
	again.PID = 8
	cases := []struct {
		name    string
		devices []trace.Device
		want    report.Device
		short   string
	}{
		{"none described", nil, report.Device{}, "none"},
		{"one", []trace.Device{h200}, report.Device{Name: "NVIDIA H200", Arch: "sm_90",
			Description: "NVIDIA H200 (sm_90, 132 CUs, cuda device 0)"}, "NVIDIA H200 (sm_90)"},
		{"one in two processes", []trace.Device{h200, again}, report.Device{Name: "NVIDIA H200", Arch: "sm_90",
			Description: "NVIDIA H200 (sm_90, 132 CUs, cuda device 0)"}, "NVIDIA H200 (sm_90)"},
		{"HIP's target features stay out of the architecture", []trace.Device{mi300}, report.Device{Name: "AMD Instinct MI300X", Arch: "gfx942",
			Description: "AMD Instinct MI300X (gfx942:sramecc+:xnack-, 304 CUs, hip device 1)"}, "AMD Instinct MI300X (gfx942)"},
		{"nameless", []trace.Device{{PID: 7, API: hip.DialectCUDA, Ordinal: 3}}, report.Device{Name: "cuda device 3",
			Description: "cuda device 3 (cuda device 3)"}, "cuda device 3"},
		{"two", []trace.Device{h200, mi300}, report.Device{Name: "NVIDIA H200 (sm_90), AMD Instinct MI300X (gfx942)",
			Description: "NVIDIA H200 (sm_90, 132 CUs, cuda device 0); AMD Instinct MI300X (gfx942:sramecc+:xnack-, 304 CUs, hip device 1)"},
			"NVIDIA H200 (sm_90), AMD Instinct MI300X (gfx942)"},
	}
	for _, c := range cases {
		got := device(&trace.Result{Devices: c.devices})
		if got != c.want || got.Short() != c.short {
			t.Errorf("%s:\n got %+v (%s)\nwant %+v (%s)", c.name, got, got.Short(), c.want, c.short)
		}
	}

	for _, c := range []struct {
		ordinals []int
		column   bool
	}{{[]int{0, 0}, false}, {[]int{0, 1}, true}, {[]int{-1, 0}, true}} {
		res := &trace.Result{}
		for i, o := range c.ordinals {
			res.Captures = append(res.Captures, &trace.Capture{ID: i + 1, API: hip.DialectCUDA, PID: 7, TID: 7, Device: o,
				End: &trace.Ending{}, ByName: map[string]int{}, ByThread: map[int]int{}})
		}
		r := report.New("trace", "miotool trace -- x", time.Unix(0, 0))
		captureTable(r, res)
		tb := table(t, r, "captures")
		has := slices.Contains(tb.Columns, "device")
		if has != c.column {
			t.Errorf("devices %v: device column %v, want %v", c.ordinals, has, c.column)
		}
		if has && (cell(t, tb, 0, "device") != deviceCell(res.Captures[0]) || cell(t, tb, 1, "device") != fmt.Sprintf("cuda %d", c.ordinals[1])) {
			t.Errorf("devices %v: cells %q, %q", c.ordinals, cell(t, tb, 0, "device"), cell(t, tb, 1, "device"))
		}
	}
}

// update rewrites the golden results from their records.
var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from their records")

// TestGolden holds judging to saved observer records: each
// testdata/golden/NAME.records is a stream of records as the observer sends
// them (MT1 lines) or as trace events in JSON (lines starting with "{",
// for what a stream written by hand needs), read by trace.Replay; its "#!"
// lines give the facts a run adds to the records:
//
//	#! program python3 train.py   the program and its arguments, as typed
//	#! path /usr/bin/python3.12   the file that ran (default: the program)
//	#! exit 1                     its exit status (default 0)
//	#! signal SIGSEGV             or the signal that ended it
//	#! interrupted SIGINT         or miotool was interrupted, forwarding it
//	#! static / #! setid          what the program's file said
//	#! strict                     judged with --strict
//
// NAME.golden is the result as `miotool trace` prints it, its exit status
// and its checklist row. The judgement is a pure function of these facts,
// so any stream replays the same anywhere.
//
// Adding a stream recorded on a GPU machine is one file. Record it with
// testdata/golden/record.py (it runs the program under the observer, as
// trace does, and writes every record the observer sends, with the exit
// status, to the file):
//
//	python3 internal/cmd/trace/testdata/golden/record.py OBSERVER \
//	    internal/cmd/trace/testdata/golden/NAME.records -- python3 prog.py
//
// where OBSERVER is the library `miotool --verbose trace -- true` names; then run
// `go test ./internal/cmd/trace -run TestGolden -update`, read
// NAME.golden, and commit both.
func TestGolden(t *testing.T) {
	rulesTables, err := trace.BuiltinRules()
	if err != nil {
		t.Fatal(err)
	}
	records, err := filepath.Glob(filepath.Join("testdata", "golden", "*.records"))
	if err != nil || len(records) == 0 {
		t.Fatalf("no golden records (%v)", err)
	}
	for _, path := range records {
		name := strings.TrimSuffix(filepath.Base(path), ".records")
		t.Run(name, func(t *testing.T) {
			got := goldenResult(t, path, rulesTables)
			want := strings.TrimSuffix(path, ".records") + ".golden"
			if *update {
				if err := os.WriteFile(want, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			data, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (run go test -run TestGolden -update to write it)", err)
			}
			if string(data) != string(got) {
				t.Errorf("%s differs from the judgement of %s (go test -run TestGolden -update rewrites it):\n%s",
					want, path, lineDiff(string(data), string(got)))
			}
		})
	}
}

// goldenResult replays a records file with its facts and renders the
// judged result as miotool prints it.
func goldenResult(t *testing.T, path string, rulesTables *trace.RulesTables) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	o, strict := goldenFacts(t, string(data))
	res, err := trace.Replay(strings.NewReader(string(data)), o)
	if err != nil {
		t.Fatal(err)
	}
	r := report.New("trace", report.JoinCommandLine(append([]string{"miotool", "trace", "--"}, append([]string{o.Program}, o.Args...)...)), time.Time{})
	r.Host, r.RunID = "", ""
	j := judged(r, res, strict, rulesTables, time.Time{})
	if strings.Contains(j.Summary, "\n") || r.Summary != j.Summary {
		t.Errorf("the headline is not the judgement's one line: %q", r.Summary)
	}
	var b strings.Builder
	if err := report.WriteText(&b, r, report.Options{}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "\nexit status: %d\nchecklist: %s\n", r.ExitCode(), strings.Join(r.ChecklistRow(), " | "))
	return []byte(b.String())
}

// goldenFacts reads a records file's "#!" lines.
func goldenFacts(t *testing.T, data string) (trace.ReplayOptions, bool) {
	t.Helper()
	o := trace.ReplayOptions{Program: "prog"}
	strict := false
	signals := map[string]syscall.Signal{"SIGSEGV": syscall.SIGSEGV, "SIGABRT": syscall.SIGABRT, "SIGKILL": syscall.SIGKILL,
		"SIGINT": syscall.SIGINT, "SIGTERM": syscall.SIGTERM}
	for line := range strings.Lines(data) {
		fact, ok := strings.CutPrefix(strings.TrimSpace(line), "#!")
		if !ok {
			continue
		}
		key, value, _ := strings.Cut(strings.TrimSpace(fact), " ")
		var err error
		switch key {
		case "program":
			words := shellWords(value)
			o.Program, o.Args = words[0], words[1:]
		case "path":
			o.Path = value
		case "exit":
			_, err = fmt.Sscan(value, &o.Exit.Code)
		case "signal":
			o.Exit.Code, o.Exit.Signal = -1, signals[value]
		case "interrupted":
			o.Exit.Code, o.Exit.Signal, o.Exit.Interrupted, o.Exit.Forwarded = -1, signals[value], true, signals[value]
		case "static":
			o.Executable = trace.ProgramFile{Read: true, Static: true}
		case "setid":
			o.Executable = trace.ProgramFile{Read: true, SetID: true}
		case "strict":
			strict = true
		default:
			err = fmt.Errorf("unknown fact")
		}
		if err != nil || (key == "signal" || key == "interrupted") && o.Exit.Signal == 0 {
			t.Fatalf("#!%s: %v", fact, err)
		}
	}
	if o.Path == "" {
		o.Path = o.Program
	}
	return o, strict
}

// shellWords splits a command line as a POSIX shell does, for the quoting
// record.py writes (shlex.join): words apart at blanks, '...' and "..."
// quoting, a backslash escaping the next character outside single quotes.
func shellWords(s string) []string {
	var words []string
	var word strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, c := range s {
		switch {
		case escaped:
			word.WriteRune(c)
			escaped = false
		case quote != 0 && c == quote:
			quote = 0
		case quote == '\'':
			word.WriteRune(c)
		case c == '\\':
			escaped, inWord = true, true
		case quote == '"':
			word.WriteRune(c)
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		default:
			word.WriteRune(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// lineDiff shows the first lines where two texts differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 8; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %q\n  got  %q\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

func TestShellWords(t *testing.T) {
	for in, want := range map[string][]string{
		"python3 train.py":                   {"python3", "train.py"},
		"./bin/t '--gtest_filter=*Capture*'": {"./bin/t", "--gtest_filter=*Capture*"},
		`python3 -c 'print("a b")' x`:        {"python3", "-c", `print("a b")`, "x"},
		`sh -c 'it'"'"'s' ''`:                {"sh", "-c", "it's", ""},
		`a\ b "c \"d\""`:                     {"a b", `c "d"`},
	} {
		if got := shellWords(in); !slices.Equal(got, want) {
			t.Errorf("shellWords(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRecordedStreamReplays: record.py, the way a GPU machine's streams
// are saved for TestGolden, records what the observer sends for a real
// run on the stand-in runtime, and the replay judges it as the trace of
// that run does.
func TestRecordedStreamReplays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the observer and runs a program")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not on PATH: record.py is not checked")
	}
	kit := tracetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	observer, err := trace.Build(ctx, trace.BuildOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Skip(err)
	}
	out := filepath.Join(t.TempDir(), "sync.records")
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "golden", "record.py"), observer, out, "--", kit.HIPProg, "sync-other-thread")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+kit.Lib)
	if output, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(output), "sync-other-thread: end capture 901") {
		t.Fatalf("record.py: %v\n%s", err, output)
	}
	rulesTables, err := trace.BuiltinRules()
	if err != nil {
		t.Fatal(err)
	}
	got := string(goldenResult(t, out, rulesTables))
	for _, want := range []string{"trace: FAIL - hipDeviceSynchronize from thread ", "(worker_synchronize) invalidated the global-mode capture begun by thread ",
		"command:  miotool trace -- " + kit.HIPProg + " sync-other-thread", "exit status: 1\n",
		"first culprit  hipDeviceSynchronize returned hipErrorStreamCaptureUnsupported (900)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the replayed recording lacks %q:\n%s", want, got)
		}
	}
}
