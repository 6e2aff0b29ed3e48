package report

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/report"
	"miotool/internal/suite"
	"miotool/internal/testutil"
)

// envOf is a LookupEnv that sees only env.
func envOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// The shard comes from --shard, else from SHARD_INDEX and TOTAL_SHARDS;
// the flag wins. --devices reaches the options as a list.
func TestShardAndDevicesReachTheOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		shard   suite.Shard
		devices []string
	}{
		{name: "none", shard: suite.Shard{}},
		{name: "the flag", args: []string{"--shard", "2/4"}, shard: suite.Shard{Index: 2, Total: 4}},
		{name: "the variables", env: map[string]string{"SHARD_INDEX": "3", "TOTAL_SHARDS": "4"}, shard: suite.Shard{Index: 3, Total: 4}},
		{name: "the flag wins", args: []string{"--shard", "1/2"}, env: map[string]string{"SHARD_INDEX": "0", "TOTAL_SHARDS": "4"},
			shard: suite.Shard{Index: 1, Total: 2}},
		{name: "devices", args: []string{"--devices", "0,1,2,3"}, devices: []string{"0", "1", "2", "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := cmdtest.New(t)
			h.F.LookupEnv = envOf(tc.env)
			var got *ReportOptions
			code := h.Run(withRun(func(_ *cli.Factory, o *ReportOptions) error { got = o; return nil }),
				append([]string{"report", "--suite", "s.yaml"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, h.ErrOut)
			}
			if got.shard != tc.shard || !slices.Equal(got.devices, tc.devices) {
				t.Errorf("shard %v devices %q; want %v, %q", got.shard, got.devices, tc.shard, tc.devices)
			}
		})
	}
}

// What the shard and device flags refuse, before anything runs: exit 2,
// one line and the usage hint.
func TestShardAndDevicesUsageErrors(t *testing.T) {
	dir := t.TempDir()
	one := writeSuiteFile(t, dir, "one.yaml", "checks:\n  - name: a\n    command: capture --mode=global\n    expect: PASS\n")
	ownDevice := writeSuiteFile(t, dir, "own.yaml", "checks:\n  - name: a\n    command: capture --device 1\n    expect: PASS\n")
	visible := writeSuiteFile(t, dir, "visible.yaml", "env: {CUDA_VISIBLE_DEVICES: \"2\"}\nchecks:\n  - name: a\n    command: capture\n    expect: PASS\n")
	notResult := writeSuiteFile(t, dir, "not-a-result.json", "{}")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: []string{"--shard", "0/4"}, want: `--shard "0/4": shards count from 1 (the first of 4 is 1/4, the last 4/4)`},
		{args: []string{"--shard", "5/4"}, want: `--shard "5/4": the shard must be from 1 to 4`},
		{args: []string{"--shard", "2"}, want: `--shard "2": want I/N`},
		{env: map[string]string{"SHARD_INDEX": "0", "TOTAL_SHARDS": "4"}, want: "SHARD_INDEX=0 TOTAL_SHARDS=4: \"0/4\": shards count from 1"},
		{env: map[string]string{"SHARD_INDEX": "1"}, want: "SHARD_INDEX=1 without TOTAL_SHARDS: set both, or neither (or give --shard I/N, which wins)"},
		{args: []string{"--durations", notResult}, want: "the durations balance a split; add --shard I/N (or set SHARD_INDEX and TOTAL_SHARDS)"},
		{args: []string{"--shard", "1/1", "--durations", filepath.Join(dir, "none.json")}, want: "none.json: no such file or directory"},
		{args: []string{"--shard", "1/1", "--durations", notResult}, want: "--durations " + notResult + ": "},
		{args: []string{"--shard", "1/2"}, want: "shard 1/2: " + one + " has 1 check to run, fewer than 2 shards: a shard would run nothing; split it in at most 1"},
		{args: []string{"--devices", "0,0"}, want: `--devices "0,0": device 0 is given twice`},
		{args: []string{"--devices", "0,1", "--device", "1"}, want: "--device 1 and --devices 0,1: with --devices each check runs on one of them, which it sees as device 0"},
		{args: []string{"--devices", "0,1", "--suite", ownDevice}, want: "own.yaml:2: check \"a\" chooses its device with --device"},
		{args: []string{"--devices", "0,1", "--suite", visible}, want: "env sets CUDA_VISIBLE_DEVICES=2, which pinning each check to one device sets for every run"},
		{args: []string{"--devices", "0,1", "--env", "HIP_VISIBLE_DEVICES=3"}, want: "the environment HIP_VISIBLE_DEVICES=3 sets HIP_VISIBLE_DEVICES=3"},
	} {
		h := cmdtest.New(t)
		h.F.LookupEnv = envOf(tc.env)
		h.F.OpenDevice = nil // nothing here may open a device
		ran := false
		args := append([]string{"report", "--suite", one}, tc.args...)
		code := h.Run(withRun(func(f *cli.Factory, o *ReportOptions) error {
			ran = true
			o.Executable = func() (string, error) { return "/bin/false", nil }
			_, err := o.Run(f.Context)
			return err
		}), args...)
		if code != 2 {
			t.Errorf("%v %v: exit %d, want 2\n%s", tc.args, tc.env, code, h.ErrOut)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(h.ErrOut.String(), "\n"), "\n")
		if !strings.Contains(lines[0], tc.want) || len(lines) != 2 || !strings.HasPrefix(lines[1], "Run 'miotool") {
			t.Errorf("%v %v: stderr is not one line containing %q plus a hint (ran %v):\n%s", tc.args, tc.env, tc.want, ran, h.ErrOut)
		}
	}
}

// The real binary on the simulator: the shards of a suite, each naming
// itself, merged by report merge, are the whole suite's checklist, and a
// merge without one refuses unless told to take what is there; with
// --devices every check is pinned (its command gets --device 0, its row
// names the device its run was pinned to, the notes each device's runs)
// and passes as before.
func TestShardsAndDevicesEndToEnd(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	h200 := filepath.Join(testutil.ModuleRoot(t), "configs", "rules", "h200-cuda.yaml")
	changed := cmdtest.ExpectationWithOneChange(t, dir)
	probe := "miotool rules --action malloc --spin 10ms --expect "
	s := writeSuiteFile(t, dir, "s.yaml", `suite: small
checks:
  - name: differ
    command: `+probe+changed+`
    expect: FAIL
  - name: match
    command: `+probe+h200+`
    expect: PASS
  - name: global-worker
    command: miotool capture --mode=global --reclaim=worker
    expect: PASS
  - name: global-lazy
    command: miotool capture --mode=global --reclaim=lazy
    expect: FAIL
  - name: later
    command: miotool stress-threads --runs 1
    expect: PASS
    skip: not in this test
`)
	run := func(t *testing.T, out string, args ...string) *report.SuiteResult {
		t.Helper()
		h := cmdtest.New(t)
		code := h.Run(withRun(withBinary(bin, dir)), append([]string{"report", "--suite", s, "--backend", "sim", "--format", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, h.Out, h.ErrOut)
		}
		must(t, os.WriteFile(out, h.Out.Bytes(), 0o644))
		return readSuiteFile(t, out)
	}
	whole := run(t, filepath.Join(dir, "whole.json"))

	var files []string
	for i := 1; i <= 3; i++ {
		p := filepath.Join(dir, fmt.Sprintf("shard-%d.json", i))
		res := run(t, p, "--shard", suite.Shard{Index: i, Total: 3}.String(), "--durations", filepath.Join(dir, "whole.json"))
		prefix := "shard " + suite.Shard{Index: i, Total: 3}.String() + " of suite small (split "
		if !slices.ContainsFunc(res.Notes, func(n string) bool {
			return strings.HasPrefix(n, prefix) && strings.Contains(n, "balanced by the durations in "+filepath.Join(dir, "whole.json"))
		}) {
			t.Errorf("shard %d/3 does not name itself: %q", i, res.Notes)
		}
		files = append(files, p)
	}
	h := cmdtest.New(t)
	merged := filepath.Join(dir, "merged.json")
	if code := h.Run(tree, append([]string{"report", "merge", "--format", "json", "--export-json", merged}, files...)...); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, h.ErrOut)
	}
	m := readSuiteFile(t, merged)
	// Check for check, in the suite's order.
	rows := func(r *report.SuiteResult) []string {
		var out []string
		for _, c := range r.Checks {
			out = append(out, c.Name+": "+string(c.Outcome())+", "+r.StatusOf(c))
		}
		return out
	}
	if got, want := rows(m), rows(whole); !slices.Equal(got, want) || m.Verdict() != whole.Verdict() {
		t.Errorf("merged shards (%s)\n  %q\nthe whole suite (%s)\n  %q", m.Verdict(), got, whole.Verdict(), want)
	}

	// Without shard 2 the merge refuses, naming it and the flag; with
	// the flag it names the shard and each of its checks.
	h = cmdtest.New(t)
	if code := h.Run(tree, "report", "merge", files[0], files[2]); code != 2 ||
		!strings.Contains(h.ErrOut.String(), "shard 2/3 of small (checks) is missing") || !strings.Contains(h.ErrOut.String(), "--allow-missing-shards") {
		t.Errorf("merge without shard 2/3: exit %d\n%s", code, h.ErrOut)
	}
	h = cmdtest.New(t)
	if code := h.Run(tree, "report", "merge", "--allow-missing-shards", "--format", "markdown", files[0], files[2]); code != report.Error.ExitCode() ||
		!strings.Contains(h.Out.String(), "shard 2/3 of small (checks) not merged") || !strings.Contains(h.Out.String(), "Not run (shard 2/3 missing)") {
		t.Errorf("merge without shard 2/3, allowed: exit %d\n%s%s", code, h.Out, h.ErrOut)
	}

	pinned := run(t, filepath.Join(dir, "pinned.json"), "--devices", "0,1")
	cells := pinned.Checklist().Rows
	for k, c := range pinned.Checks {
		if c.Skip != "" {
			continue
		}
		if !strings.Contains(c.Command, "--device 0") || !c.Met() {
			t.Errorf("%s: %s, met %v", c.Name, c.Command, c.Met())
		}
		// Each row names the device its run was pinned to.
		id := c.Runs[0].PinnedDevice
		if want := c.Runs[0].Device.Short() + " on device " + id; (id != "0" && id != "1") || cells[k].Cells[2] != want {
			t.Errorf("%s: run pinned to %q, Devices cell %q, want %q", c.Name, id, cells[k].Cells[2], want)
		}
	}
	for _, id := range []string{"0", "1"} {
		if !slices.ContainsFunc(pinned.Notes, func(n string) bool {
			return strings.HasPrefix(n, "device "+id+" (CUDA_VISIBLE_DEVICES="+id+" HIP_VISIBLE_DEVICES="+id+"): ")
		}) {
			t.Errorf("no note for device %s: %q", id, pinned.Notes)
		}
	}
}

func readSuiteFile(t *testing.T, path string) *report.SuiteResult {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := report.ReadSuiteJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return res
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
