package trace

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
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
	obs := filepath.Join(t.TempDir(), "observer.so")
	if err := os.WriteFile(obs, nil, 0o644); err != nil {
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
		Notes:     []trace.Note{{PID: 7, Topic: "cupti", Status: "ok", Text: "/opt/nvidia/cu13/lib/libcupti.so.13"}},
		Captures:  []*trace.Capture{cp, relaxed}, Start: 1_000_000_000, Events: 100}
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
	j := trace.Judge(res, false)
	r := report.New("trace", "miotool trace -- python3 'train step.py'", time.Unix(0, 0))
	fill(r, res, j, rulesTables)
	r.Finish(reportVerdict(j.Verdict), headlineSummary(res, j), time.Unix(5, 0))

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
		"began": "+1.000s", "end capture": "901 CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "calls during it": "5", "threads": "2",
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
		"result":  "900 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
		"callers": "libcudart.so.13(cudaDeviceSynchronize) ← libc10_cuda.so(c10::cuda::device_synchronize) ← libtorch_python.so(THCPModule_cudaSynchronize)"} {
		if got := cell(t, refused, 0, col); got != want {
			t.Errorf("culprit %s: %q, want %q", col, got, want)
		}
	}
	if got := cell(t, refused, 1, "thread"); got != "485 (the capturing thread)" {
		t.Errorf("the 901 launch's thread %q", got)
	}
	hz := table(t, r, "hazards")
	for col, want := range map[string]string{"capture": "2", "call": "cuStreamQuery", "succeeded because": "the capture was begun in relaxed mode",
		"rule": "query-other-stream/global/other/global", "global mode would": "return 900 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; end capture 901 CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
		"basis": "measured", "rules table": "configs/rules/h200-cuda.yaml", "callers": "prog(worker_query)"} {
		if got := cell(t, hz, 0, col); got != want {
			t.Errorf("hazard %s: %q, want %q", col, got, want)
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, want := range []string{
		"CUDA: the driver API observed through CUPTI callbacks (/opt/nvidia/cu13/lib/libcupti.so.13) in process 7",
		"processes observed (2): 7 python3.12, 9 python3.12 (forked from 7)",
		"7 more captures ended with success, nothing refused: counted, not listed",
		"configs/rules/h200-cuda.yaml for CUDA and configs/rules/hip.yaml for HIP",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "HIP: calls to libamdhip64") {
		t.Errorf("a CUDA-only trace notes the HIP interposer:\n%s", notes)
	}
	row := r.ChecklistRow()
	if want := fmt.Sprintf("Failed: cuCtxSynchronize refused (900); program exit 0 (%d/%d)", captureRows+6, captureRows+7); row[3] != want {
		t.Errorf("checklist status %q", row[3])
	}
	if r.Backend != "cuda" || !strings.Contains(r.BackendReason, "CUPTI") {
		t.Errorf("backend %q (%s)", r.Backend, r.BackendReason)
	}
}

func TestStatus(t *testing.T) {
	clean := &trace.Capture{ID: 1, End: &trace.Ending{}, ByName: map[string]int{}, ByThread: map[int]int{}}
	cases := []struct {
		name string
		res  *trace.Result
		want string
	}{
		{"pass", &trace.Result{Processes: []*trace.Process{{PID: 1}}, Captures: []*trace.Capture{clean}}, "Passed; program exit 0"},
		{"nothing", &trace.Result{Processes: []*trace.Process{{PID: 1}}, Exit: trace.Exit{Code: 2}}, "Skipped: no capture began; program exit 2"},
		{"crash", &trace.Result{Processes: []*trace.Process{{PID: 1}}, Exit: trace.Exit{Code: -1, Signal: syscall.SIGSEGV},
			Captures: []*trace.Capture{{ID: 1, ByName: map[string]int{}, ByThread: map[int]int{}}}}, "Failed: a capture never ended; program killed by SIGSEGV"},
		{"hung", &trace.Result{Processes: []*trace.Process{{PID: 1}}, Exit: trace.Exit{Code: -1, TimedOut: true, Timeout: time.Second, Signal: syscall.SIGKILL},
			Captures: []*trace.Capture{clean}}, "Failed; program hung (watchdog 1s)"},
	}
	for _, c := range cases {
		if got := status(c.res, trace.Judge(c.res, false)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
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
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(doc.Suites) != 1 || doc.Suites[0].Tests != 1 || doc.Suites[0].Failures != 1 || doc.Suites[0].Cases[0].Failure == nil ||
		!strings.Contains(doc.Suites[0].Cases[0].Failure.Text, "cuCtxSynchronize from thread 512") {
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
// word, and hazards that alone failed a trace name the flag that made
// them fail and how many there were.
func TestHeadline(t *testing.T) {
	two := &trace.Result{Hazards: make([]trace.Hazard, 2)}
	cases := []struct {
		j       trace.Judgement
		verdict report.Verdict
		summary string
	}{
		{trace.Judgement{Verdict: trace.Pass, Summary: "1 capture ended with success"}, report.Pass, "1 capture ended with success"},
		{trace.Judgement{Verdict: trace.Fail, Summary: "x invalidated"}, report.Fail, "x invalidated"},
		{trace.Judgement{Verdict: trace.Fail, Summary: "q succeeded only because", HazardsFailed: true}, report.Fail, "q succeeded only because (--strict; 2 hazards)"},
		{trace.Judgement{Verdict: trace.NothingToCheck, Summary: "no capture began"}, report.Skip, "no capture began"},
		{trace.Judgement{Verdict: trace.Interrupted, Summary: "interrupted"}, report.Interrupted, "interrupted"},
		{trace.Judgement{Verdict: "MAYBE"}, report.Error, ""},
	}
	for _, c := range cases {
		if v, s := reportVerdict(c.j.Verdict), headlineSummary(two, c.j); v != c.verdict || s != c.summary {
			t.Errorf("%s %q: got %s %q, want %s %q", c.j.Verdict, c.j.Summary, v, s, c.verdict, c.summary)
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
