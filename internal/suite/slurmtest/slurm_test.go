package slurmtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"miotool/internal/report"
	"miotool/internal/testutil"
)

// jobLimit bounds the wait for a submission's merge job: the suites here
// take seconds on the simulator, and a loaded 2-core machine many times
// that.
const jobLimit = 5 * time.Minute

// scripts/slurm-suite.sh on a real Slurm cluster of one node, every check
// on the simulator: the merged checklist of an array's tasks holds every
// check of a one-host run with the same verdicts and every task's result;
// a task that Slurm stops while a check runs keeps its result, which shows
// that check as interrupted and the checks after it as not run, and a task
// stopped before it started is named missing: nothing lost, nothing green.
func TestSlurmSuite(t *testing.T) {
	c := startCluster(t)
	root := testutil.ModuleRoot(t)
	began := time.Now()
	bin := buildMiotool(t, root, c)
	t.Logf("miotool built in %v", time.Since(began).Round(time.Millisecond))
	suite := filepath.Join(root, "configs", "suites", "pr12265.yaml")

	t.Run("every host runs the suite", func(t *testing.T) {
		began := time.Now()
		oneHost := runSuite(t, c, bin, suite, "--backend", "sim", "--jobs", "2")
		t.Logf("one-host run in %v", time.Since(began).Round(time.Millisecond))
		began = time.Now()
		// One task per node (EXCLUSIVE=1, the default): on this one node
		// the tasks run one after the other, so that no task's timing
		// check has another's load beside it.
		s := c.submit(t, root, map[string]string{"MIOTOOL": bin, "SUITE": suite, "GPUS": "0",
			"REPORT_FLAGS": "--backend sim --jobs 2"}, "hosts", "2")
		merge := c.waitJob(t, s.merge, jobLimit)
		t.Logf("2 tasks and the merge in %v", time.Since(began).Round(time.Millisecond))
		if merge.State != "COMPLETED" || merge.ExitCode != "0:0" {
			t.Errorf("merge job %s: %s, exit %s\n%s", s.merge, merge.State, merge.ExitCode, readFile(t, filepath.Join(s.dir, "merge.log")))
		}
		for _, task := range []string{"1", "2"} {
			if j := c.jobState(t, s.array+"_"+task); j.State != "COMPLETED" {
				t.Errorf("task %s: %s, exit %s\n%s", task, j.State, j.ExitCode, readFile(t, filepath.Join(s.dir, "task-"+task+".log")))
			}
		}
		merged := readSuite(t, filepath.Join(s.dir, "checklist.json"))
		if len(merged.MergedRuns) != 2 {
			t.Errorf("the merged checklist holds %d suite runs, want the 2 tasks'", len(merged.MergedRuns))
		}
		sameChecks(t, merged, oneHost, 2)
		if md := readFile(t, filepath.Join(s.dir, "checklist.md")); strings.Contains(md, "Missing") || !strings.Contains(md, "### Suite pr12265: PASS") {
			t.Errorf("checklist.md:\n%s", md)
		}
	})

	t.Run("a task Slurm stops keeps its result; one that never ran is named", func(t *testing.T) {
		// A check that runs until its 613 s deadline, between two quick
		// ones, one at a time.
		suiteFile := filepath.Join(c.dir, "stopped.yaml")
		must(t, os.WriteFile(suiteFile, []byte(`suite: stopped
title: A check Slurm stops while it runs
workdir: `+root+`
checks:
  - name: before
    command: miotool capture --mode=global --reclaim=worker
    expect: PASS
  - name: stopped
    command: miotool replay --reclaim=guarded --deadline 613s
    expect: FAIL
  - name: after
    command: miotool replay --reclaim=worker
    expect: PASS
`), 0o644))
		began := time.Now()
		// Two tasks, each with the node to itself: while one runs, the
		// other waits in the queue.
		s := c.submit(t, root, map[string]string{"MIOTOOL": bin, "SUITE": suiteFile, "GPUS": "0",
			"REPORT_FLAGS": "--backend sim --jobs 1"}, "hosts", "2")
		running := c.findProcess(t, jobLimit, "replay", "--deadline", "613s").getenv("SLURM_ARRAY_TASK_ID")
		waiting := map[string]string{"1": "2", "2": "1"}[running]
		if waiting == "" {
			t.Fatalf("the stopped check runs in task %q", running)
		}
		c.run(t, "scancel", s.array+"_"+waiting)
		c.run(t, "scancel", s.array+"_"+running)
		merge := c.waitJob(t, s.merge, jobLimit)
		t.Logf("submitted, stopped and merged in %v", time.Since(began).Round(time.Millisecond))
		for _, task := range []string{running, waiting} {
			if j := c.jobState(t, s.array+"_"+task); j.State != "CANCELLED" {
				t.Errorf("task %s: %s, exit %s", task, j.State, j.ExitCode)
			}
		}
		// A task is missing: the merge exits 2 and says which, above the
		// checklist of the task that ran.
		if merge.State != "FAILED" || merge.ExitCode != "2:0" {
			t.Errorf("merge job %s: %s, exit %s, want FAILED with exit 2 (a task is missing)\n%s", s.merge, merge.State, merge.ExitCode,
				readFile(t, filepath.Join(s.dir, "merge.log")))
		}
		md := readFile(t, filepath.Join(s.dir, "checklist.md"))
		wantTop := "**Missing: 1 of 2 hosts left no result; this checklist holds only the others.**\n- task " + waiting + " of 2 (see "
		if !strings.HasPrefix(md, wantTop) || !strings.Contains(md, "### Suite stopped: INTERRUPTED") || !strings.Contains(md, "| Interrupted after ") {
			t.Errorf("checklist.md, want it to start %q:\n%s", wantTop, md)
		}
		log := readFile(t, filepath.Join(s.dir, "task-"+running+".log"))
		if !strings.Contains(log, "exit 143, result in ") {
			t.Errorf("task log:\n%s", log)
		}
		merged := readSuite(t, filepath.Join(s.dir, "checklist.json"))
		if v := merged.Verdict(); v != report.Interrupted {
			t.Errorf("merged verdict %s, want %s", v, report.Interrupted)
		}
		if len(merged.Checks) != 3 {
			t.Fatalf("%d checks in the merged checklist, want 3", len(merged.Checks))
		}
		before, stopped, after := merged.Checks[0], merged.Checks[1], merged.Checks[2]
		if !before.Met() || before.Outcome() != report.Pass {
			t.Errorf("before: %s, met %v: %+v", before.Outcome(), before.Met(), before.Runs)
		}
		if !stopped.Interrupted() || stopped.Met() || len(stopped.Runs) != 1 || stopped.Runs[0].Verdict != report.Interrupted {
			t.Errorf("stopped: interrupted %v, met %v: %+v", stopped.Interrupted(), stopped.Met(), stopped.Runs)
		}
		if !after.NotRun() || after.Met() {
			t.Errorf("after: %+v", after.Runs)
		}
	})
}

// submission is what scripts/slurm-suite.sh submit printed.
type submission struct {
	array, merge string // job ids
	dir          string // the results folder
}

// submit runs scripts/slurm-suite.sh submit with settings in its
// environment, from a folder of the cluster's.
func (c *cluster) submit(t *testing.T, root string, settings map[string]string, args ...string) submission {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "slurm-suite.sh"), append([]string{"submit"}, args...)...)
	cmd.Dir = c.dir
	cmd.Env = append([]string{"RESULTS_ROOT=" + filepath.Join(c.dir, "results")}, c.env...)
	for k, v := range settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("slurm-suite.sh submit %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut.String())
	}
	var s submission
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "array job: "); ok {
			s.array = v
		}
		if v, ok := strings.CutPrefix(line, "merge job: "); ok {
			s.merge = v
		}
		if v, ok := strings.CutPrefix(line, "results: "); ok {
			s.dir = v
		}
	}
	if s.array == "" || s.merge == "" || s.dir == "" {
		t.Fatalf("slurm-suite.sh submit printed:\n%s", out)
	}
	return s
}

// buildMiotool builds the binary the jobs run, into the cluster's folder.
func buildMiotool(t *testing.T, root string, c *cluster) string {
	t.Helper()
	bin := filepath.Join(c.dir, "miotool")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/miotool")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runSuite runs a suite on this host, as one-host reference.
func runSuite(t *testing.T, c *cluster, bin, suite string, flags ...string) *report.SuiteResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jobLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"report", "--suite", suite, "--format", "json"}, flags...)...)
	cmd.Env = c.env
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); err != nil && code != report.ExitFail {
		t.Fatalf("miotool report --suite %s: %v\n%s", suite, err, errOut.String())
	}
	res, err := report.ReadSuiteJSON(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("the one-host result: %v\n%s", err, out)
	}
	return res
}

// sameChecks says where merged and oneHost differ: every check of the
// one-host run, and no other, with the same outcome and status words,
// runsEach runs each.
func sameChecks(t *testing.T, merged, oneHost *report.SuiteResult, runsEach int) {
	t.Helper()
	key := func(c *report.SuiteCheck) string { return c.Name + " " + c.Variant }
	got := map[string]*report.SuiteCheck{}
	for _, c := range merged.Checks {
		if _, dup := got[key(c)]; dup {
			t.Errorf("check %s is listed twice", key(c))
		}
		got[key(c)] = c
	}
	if len(got) != len(oneHost.Checks) {
		t.Errorf("the merged checklist has %d checks, the one-host run %d", len(got), len(oneHost.Checks))
	}
	for _, want := range oneHost.Checks {
		c, ok := got[key(want)]
		switch {
		case !ok:
			t.Errorf("check %s of the one-host run is not in the merged checklist", key(want))
		case c.Outcome() != want.Outcome() || c.Met() != want.Met():
			t.Errorf("check %s: merged %s (met %v), one host %s (met %v)", key(want), c.Outcome(), c.Met(), want.Outcome(), want.Met())
		case len(c.Runs) != runsEach*len(want.Runs):
			t.Errorf("check %s: %d runs merged, want %d", key(want), len(c.Runs), runsEach*len(want.Runs))
		}
	}
	if merged.Verdict() != oneHost.Verdict() {
		t.Errorf("merged verdict %s, one host %s", merged.Verdict(), oneHost.Verdict())
	}
}

func readSuite(t *testing.T, path string) *report.SuiteResult {
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

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(data)
}
