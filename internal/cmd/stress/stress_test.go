package stress

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/aiheur/cache"
	"miotool/internal/buildinfo"
	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/hip"
	"miotool/internal/report"
	stressscen "miotool/internal/scenario/stress"
)

// stressHelperEnv makes this test binary, re-executed, act as miotool
// itself (the runs stress-threads starts re-execute miotool).
const stressHelperEnv = "MIOTOOL_STRESS_TEST_AS_MIOTOOL"

// TestStressHelperMiotool is not a test: with stressHelperEnv set it runs
// the command line after "--" as miotool would, and exits.
func TestStressHelperMiotool(t *testing.T) {
	if os.Getenv(stressHelperEnv) != "1" {
		t.Skip("runs only as a stand-in for miotool in stress-threads' runs")
	}
	f := cli.NewFactory(cli.System(), buildinfo.Info{Version: "test", Commit: "test"})
	os.Exit(cli.Main(f, flag.Args(), withRun(nil)))
}

// helperMiotool starts the runs as this test binary acting as miotool.
func helperMiotool(args []string) (stressscen.ChildCommand, error) {
	return stressscen.ChildCommand{Path: os.Args[0], Args: append([]string{"-test.run=^TestStressHelperMiotool$", "-test.count=1", "--"}, args...),
		Env: append(os.Environ(), stressHelperEnv+"=1")}, nil
}

// withRun is a command tree whose stress-threads hands its options to
// runF.
func withRun(runF func(*StressOptions) error) func(*cli.Factory) *cobra.Command {
	return cmdtest.Tree(func(f *cli.Factory) *cobra.Command { return NewCmdStress(f, runF) })
}

// forReal runs stress-threads for forReal, its runs being helperMiotool.
var forReal = cmdtest.Tree(func(f *cli.Factory) *cobra.Command {
	return NewCmdStress(f, func(o *StressOptions) error {
		o.Executable = helperMiotool
		return f.Finish(o.Run(f.Context))
	})
})

func TestStressFlagsReachTheOptions(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want StressOptions
	}{
		{[]string{"stress-threads"}, StressOptions{Threads: 2, Iters: 1000, Trials: 3, Runs: 1, Jobs: 1, Cache: cache.Locked, RunTimeout: 10 * time.Minute}},
		{[]string{"stress-threads", "--threads", "4", "--iters", "10", "--trials", "1", "--runs", "200", "--jobs", "2", "--cache=unlocked",
			"--race-window", "2ms", "--run-timeout", "90s", "--model-dir", "."},
			StressOptions{Threads: 4, Iters: 10, Trials: 1, Runs: 200, Jobs: 2, Cache: cache.Unlocked, RaceWindow: 2 * time.Millisecond, RunTimeout: 90 * time.Second, ModelDir: "."}},
		{[]string{"stress-threads", "--cache", "LockFree"}, StressOptions{Threads: 2, Iters: 1000, Trials: 3, Runs: 1, Jobs: 1, Cache: cache.LockFree, RunTimeout: 10 * time.Minute}},
	} {
		h := cmdtest.New(t)
		var got *StressOptions
		if code := h.Run(withRun(func(o *StressOptions) error { got = o; return nil }), tt.args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, code, h.ErrOut)
		}
		w := tt.want
		if got.Threads != w.Threads || got.Iters != w.Iters || got.Trials != w.Trials || got.Runs != w.Runs || got.Jobs != w.Jobs ||
			got.Cache != w.Cache || got.RaceWindow != w.RaceWindow || got.RunTimeout != w.RunTimeout || got.ModelDir != w.ModelDir || got.childToken != "" {
			t.Errorf("%v: options %+v", tt.args, got)
		}
		if got.CommandLine != "miotool "+strings.Join(tt.args, " ") {
			t.Errorf("%v: command line %q", tt.args, got.CommandLine)
		}
	}
}

func TestStressBadFlagsExit2(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--threads", "0"}, "--threads 0"},
		{[]string{"--iters", "2048"}, "--iters 2048: want 1 to 2047"},
		{[]string{"--iters", "0"}, "--iters 0"},
		{[]string{"--trials", "0"}, "--trials 0"},
		{[]string{"--runs", "-1"}, "--runs -1"},
		{[]string{"--jobs", "0"}, "--jobs 0"},
		{[]string{"--cache", "sloppy"}, `invalid argument "sloppy" for "--cache" flag: want unlocked, locked or lockfree`},
		{[]string{"--race-window", "-1ms"}, "--race-window -1ms"},
		{[]string{"--run-timeout", "0s"}, "--run-timeout 0s"},
		{[]string{"--run-timeout", "soon"}, `invalid argument "soon" for "--run-timeout"`},
		{[]string{"--model-dir", filepath.Join(t.TempDir(), "none")}, "--model-dir"},
		{[]string{"--model-dir", notDir}, "not a directory"},
		{[]string{"--backend", "sim", "--model-dir", t.TempDir()}, "no TunaNet model"},
	} {
		h := cmdtest.New(t)
		code := h.Run(forReal, append([]string{"stress-threads"}, tt.args...)...)
		if code != 2 || !strings.Contains(h.ErrOut.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, h.ErrOut, tt.want)
		}
		if lines := strings.Split(strings.TrimSpace(h.ErrOut.String()), "\n"); len(lines) != 2 {
			t.Errorf("%v: a usage error is one line plus a hint:\n%s", tt.args, h.ErrOut)
		}
	}
}

// End to end on the simulator: the runs are fresh processes (this test
// binary acting as miotool) and their sums are checked.
func TestStressRunsFreshProcesses(t *testing.T) {
	h := cmdtest.New(t)
	code := h.Run(forReal, "--backend", "sim", "--format", "json", "stress-threads",
		"--iters", "2", "--trials", "1", "--runs", "2", "--jobs", "2", "--cache", "lockfree")
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, h.Out, h.ErrOut)
	}
	r, err := report.ReadJSON(strings.NewReader(h.Out.String()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != report.Pass || r.ChecklistRow()[3] != "Passed (2/2)" || r.Backend != "sim" || !strings.Contains(r.Summary, "every sum 4186116") {
		t.Errorf("verdict %s status %q backend %q summary %q", r.Verdict, r.Status, r.Backend, r.Summary)
	}
	if n, _ := r.Counter("passed"); n != 2 {
		t.Errorf("passed counter %d, want 2", n)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "TunaNet miotool from the model embedded in miotool") {
		t.Errorf("the notes do not name the model:\n%s", strings.Join(r.Notes, "\n"))
	}
	if r.Command != "miotool --backend sim --format json stress-threads --iters 2 --trials 1 --runs 2 --jobs 2 --cache lockfree" {
		t.Errorf("command %q", r.Command)
	}
}

// The command opens no device: its runs do, and the result's header is
// what the first run said. A one-run command so pays a GPU runtime's
// start-up once, in its run, not once here and again there.
func TestStressParentOpensNoDevice(t *testing.T) {
	h := cmdtest.New(t)
	h.F.OpenDevice = func(string, hip.OpenOptions) (hip.Device, hip.Selection, error) {
		t.Error("stress-threads opened a device in the parent")
		return nil, hip.Selection{}, errors.New("not here")
	}
	code := h.Run(forReal, "--backend", "sim", "--format", "json", "stress-threads", "--iters", "2", "--trials", "1")
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, h.Out, h.ErrOut)
	}
	r, err := report.ReadJSON(strings.NewReader(h.Out.String()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Backend != "sim" || r.BackendReason != "requested with --backend sim" || r.Device.Arch != "sim" || !strings.Contains(r.Device.Description, "simulated") {
		t.Errorf("header from the run: backend %q (%s), device %+v", r.Backend, r.BackendReason, r.Device)
	}
}

// One run in this process, as the parent's runs do it: told so by the
// parent's variable, it prints its device line and its result line, both
// with the parent's token.
func TestStressChildPrintsItsLines(t *testing.T) {
	token := stressscen.NewChildToken()
	h := cmdtest.New(t)
	h.F.LookupEnv = func(k string) (string, bool) {
		if k == stressscen.ChildEnv {
			return fmt.Sprintf("%d:%s", os.Getppid(), token), true
		}
		return "", false
	}
	if code := h.Run(forReal, "--backend", "sim", "stress-threads", "--iters", "1", "--trials", "1", "--threads", "3"); code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	run, ok := stressscen.ParseRunLine(h.Out.Bytes())
	if !ok || !run.OK() || run.Threads != 3 || len(run.Sums) != 1 || run.Sums[0][2] != 2047*2047 || run.Token != token {
		t.Errorf("result line %q: %+v", h.Out, run)
	}
	out := stressscen.Classify(nil, h.Out.Bytes(), nil, false)
	if d := out.Device; d == nil || d.Token != token || d.Backend != "sim" || d.Arch != "sim" || d.OpenMs <= 0 {
		t.Errorf("device line %+v in %q", d, h.Out)
	}
}

// The child mode is no user setting: a --child flag, a config key or a
// MIOTOOL_* variable does not reach it, and the private variable works
// only for the process whose parent set it.
func TestStressChildModeIsNotConfiguration(t *testing.T) {
	h := cmdtest.New(t)
	if code := h.Run(forReal, "stress-threads", "--child"); code != 2 || !strings.Contains(h.ErrOut.String(), "unknown flag: --child") {
		t.Errorf("--child: exit %d, stderr %s", code, h.ErrOut)
	}
	h = cmdtest.New(t)
	cfg := filepath.Join(h.Dir, "miotool.yaml")
	if err := os.WriteFile(cfg, []byte("stress-threads:\n  child: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := h.Run(forReal, "stress-threads"); code != 2 || !strings.Contains(h.ErrOut.String(), `unknown key "stress-threads.child"`) {
		t.Errorf("config child: true: exit %d, stderr %s", code, h.ErrOut)
	}
	for _, value := range []string{"1:" + stressscen.NewChildToken(), fmt.Sprintf("%d:short", os.Getppid()), "yes"} {
		h = cmdtest.New(t)
		h.F.LookupEnv = func(k string) (string, bool) {
			if k == stressscen.ChildEnv {
				return value, true
			}
			return "", false
		}
		if code := h.Run(forReal, "--backend", "sim", "stress-threads", "--cache=unlocked"); code != 2 || !strings.Contains(h.ErrOut.String(), stressscen.ChildEnv) || h.Out.Len() != 0 {
			t.Errorf("%s=%s: exit %d, stdout %q, stderr %s", stressscen.ChildEnv, value, code, h.Out, h.ErrOut)
		}
	}
}

// Without a device, the runs say why and the command writes that SKIP or
// ERROR as its own result; it opens nothing itself.
func TestStressSkipsWithoutTheDevice(t *testing.T) {
	h := cmdtest.New(t)
	code := h.Run(forReal, "--backend", "sim", "--device", "9", "--format", "json", "stress-threads", "--runs", "3")
	if code != 4 {
		t.Fatalf("exit %d, stdout %s, stderr %s", code, h.Out, h.ErrOut)
	}
	r, err := report.ReadJSON(strings.NewReader(h.Out.String()))
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != report.Skip || r.Check != "stress-threads" || !strings.Contains(r.Command, "stress-threads --runs 3") ||
		!strings.Contains(r.Summary, "ordinal 9") || !strings.Contains(strings.Join(r.Notes, "\n"), "from run 1 of 3") {
		t.Errorf("result %+v", r)
	}
}
