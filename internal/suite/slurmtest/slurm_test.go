package slurmtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"miotool/internal/report"
	"miotool/internal/testutil"
)

// jobLimit bounds the wait for a submission's merge job: the suites here
// take seconds on the simulator, and a loaded 2-core machine many times
// that.
const jobLimit = 5 * time.Minute

// scripts/slurm-suite.sh on a real Slurm cluster of one node, every check
// on the simulator: the merged checklist of an array of shards holds every
// check of a one-host run, once, with the same verdicts, and names every
// shard; so does an array that runs the whole suite on every host, with
// each host's runs. A shard that Slurm stops while a check runs keeps its
// result, which shows that check as interrupted and the checks after it
// as not run, and a shard stopped before it started is named missing:
// nothing lost, nothing green.
func TestSlurmSuite(t *testing.T) {
	c := startCluster(t)
	root := testutil.ModuleRoot(t)
	began := time.Now()
	bin := buildMiotool(t, root, c)
	t.Logf("miotool built in %v", time.Since(began).Round(time.Millisecond))
	suite := withoutCheck(t, filepath.Join(root, "configs", "suites", "pr12265.yaml"), filepath.Join(c.dir, "pr12265.yaml"), "find-naive-timeout")
	began = time.Now()
	oneHostFile := filepath.Join(c.dir, "one-host.json")
	oneHost := runSuite(t, c, bin, suite, oneHostFile, "--backend", "sim", "--jobs", "2")
	t.Logf("one-host run in %v", time.Since(began).Round(time.Millisecond))

	t.Run("shards", func(t *testing.T) {
		began := time.Now()
		// One task per node (EXCLUSIVE=1, the default): on this one node
		// the shards run one after the other, so that no shard's timing
		// check has another's load beside it. The split is balanced by
		// the one-host run's durations.
		s := c.submit(t, root, map[string]string{"MIOTOOL": bin, "SUITE": suite, "GPUS": "0", "DURATIONS": oneHostFile,
			"REPORT_FLAGS": "--backend sim --jobs 2"}, "shards", "3")
		merge := c.waitJob(t, s.merge, jobLimit)
		t.Logf("3 shards and the merge in %v", time.Since(began).Round(time.Millisecond))
		if merge.State != "COMPLETED" || merge.ExitCode != "0:0" {
			t.Errorf("merge job %s: %s, exit %s\n%s", s.merge, merge.State, merge.ExitCode, readFile(t, filepath.Join(s.dir, "merge.log")))
		}
		split := ""
		for i := 1; i <= 3; i++ {
			task := strconv.Itoa(i)
			if j := c.jobState(t, s.array+"_"+task); j.State != "COMPLETED" {
				t.Errorf("task %s: %s, exit %s\n%s", task, j.State, j.ExitCode, readFile(t, filepath.Join(s.dir, "task-"+task+".log")))
			}
			id := shardNote(t, readSuite(t, filepath.Join(s.dir, "task-"+task+".json")), "pr12265", i, 3)
			if split != "" && id != split {
				t.Errorf("shard %d/3 names split %s, shard 1/3 %s", i, id, split)
			}
			split = id
		}
		merged := readSuite(t, filepath.Join(s.dir, "checklist.json"))
		if len(merged.MergedRuns) != 3 {
			t.Errorf("the merged checklist holds %d suite runs, want the 3 shards'", len(merged.MergedRuns))
		}
		sameChecks(t, merged, oneHost, 1)
		if md := readFile(t, filepath.Join(s.dir, "checklist.md")); strings.Contains(md, "Missing") || !strings.Contains(md, "### Suite pr12265: PASS") {
			t.Errorf("checklist.md:\n%s", md)
		}
	})

	t.Run("hosts", func(t *testing.T) {
		began := time.Now()
		// Side by side, as two hosts would run them.
		s := c.submit(t, root, map[string]string{"MIOTOOL": bin, "SUITE": suite, "GPUS": "0", "EXCLUSIVE": "0",
			"REPORT_FLAGS": "--backend sim --jobs 2"}, "hosts", "2")
		merge := c.waitJob(t, s.merge, jobLimit)
		t.Logf("2 hosts and the merge in %v", time.Since(began).Round(time.Millisecond))
		if merge.State != "COMPLETED" || merge.ExitCode != "0:0" {
			t.Errorf("merge job %s: %s, exit %s\n%s", s.merge, merge.State, merge.ExitCode, readFile(t, filepath.Join(s.dir, "merge.log")))
		}
		merged := readSuite(t, filepath.Join(s.dir, "checklist.json"))
		if len(merged.MergedRuns) != 2 {
			t.Errorf("the merged checklist holds %d suite runs, want the 2 tasks'", len(merged.MergedRuns))
		}
		sameChecks(t, merged, oneHost, 2)
	})

	t.Run("a shard stopped while it runs, one before it starts", func(t *testing.T) {
		// Split by count in 3, shard 1 runs stopped (until its 613 s
		// deadline) and then after-stopped, one at a time; shards 2 and 3
		// each run a quick check.
		suiteFile := filepath.Join(c.dir, "stopped.yaml")
		must(t, os.WriteFile(suiteFile, []byte(`suite: stopped
title: A check Slurm stops while it runs
workdir: `+root+`
checks:
  - name: stopped
    command: miotool replay --reclaim=guarded --deadline 613s
    expect: FAIL
  - name: quick
    command: miotool capture --mode=global --reclaim=worker
    expect: PASS
  - name: never-started
    command: miotool capture --mode=global --reclaim=poller
    expect: PASS
  - name: after-stopped
    command: miotool replay --reclaim=worker
    expect: PASS
`), 0o644))
		began := time.Now()
		// Each task has the node to itself: while shard 1 runs, shards 2
		// and 3 wait in the queue, Slurm starting an array's tasks in order.
		s := c.submit(t, root, map[string]string{"MIOTOOL": bin, "SUITE": suiteFile, "GPUS": "0",
			"REPORT_FLAGS": "--backend sim --jobs 1"}, "shards", "3")
		if task := c.findProcess(t, jobLimit, "replay", "--deadline", "613s").getenv("SLURM_ARRAY_TASK_ID"); task != "1" {
			t.Fatalf("the check to stop runs in task %q, want 1", task)
		}
		if tasks := c.taskStates(t, s.array); tasks["3"].State != "PENDING" {
			t.Fatalf("task 3 is %q, want it waiting for the node: %v", tasks["3"].State, tasks)
		}
		c.run(t, "scancel", s.array+"_3")
		c.run(t, "scancel", s.array+"_1")
		merge := c.waitJob(t, s.merge, jobLimit)
		t.Logf("submitted, stopped and merged in %v", time.Since(began).Round(time.Millisecond))
		// Task 3, cancelled before it started, never had a record of its
		// own.
		tasks := c.taskStates(t, s.array)
		for task, want := range map[string]string{"1": "CANCELLED", "2": "COMPLETED", "3": ""} {
			if j := tasks[task]; j.State != want {
				t.Errorf("task %s: %q, exit %s; want %q (every task: %v)", task, j.State, j.ExitCode, want, tasks)
			}
		}
		// A shard is missing: the merge exits 2 and says which, above the
		// checklist of the shards there are.
		if merge.State != "FAILED" || merge.ExitCode != "2:0" {
			t.Errorf("merge job %s: %s, exit %s, want FAILED with exit 2 (a shard is missing)\n%s", s.merge, merge.State, merge.ExitCode,
				readFile(t, filepath.Join(s.dir, "merge.log")))
		}
		md := readFile(t, filepath.Join(s.dir, "checklist.md"))
		wantTop := "**Missing: 1 of 3 shards left no result; this checklist holds only the others.**\n- shard 3/3 (see "
		if !strings.HasPrefix(md, wantTop) || !strings.Contains(md, "### Suite stopped: INTERRUPTED") || !strings.Contains(md, "| Interrupted (0 of 1 run finished): ") {
			t.Errorf("checklist.md, want it to start %q:\n%s", wantTop, md)
		}
		if log := readFile(t, filepath.Join(s.dir, "task-1.log")); !strings.Contains(log, "shard 1/3: exit 143, result in ") {
			t.Errorf("task 1's log:\n%s", log)
		}
		merged := readSuite(t, filepath.Join(s.dir, "checklist.json"))
		if v := merged.Verdict(); v != report.Interrupted {
			t.Errorf("merged verdict %s, want %s", v, report.Interrupted)
		}
		checks := map[string]*report.SuiteCheck{}
		for _, ch := range merged.Checks {
			checks[ch.Name] = ch
		}
		if ch := checks["stopped"]; ch == nil || !ch.Interrupted() || ch.Met() || len(ch.Runs) != 1 || ch.Runs[0].Verdict != report.Interrupted {
			t.Errorf("stopped: %+v", ch)
		}
		if ch := checks["after-stopped"]; ch == nil || !ch.NotRun() || ch.Met() {
			t.Errorf("after-stopped: %+v", ch)
		}
		if ch := checks["quick"]; ch == nil || !ch.Met() || ch.Outcome() != report.Pass {
			t.Errorf("quick: %+v", ch)
		}
		if ch := checks["never-started"]; ch != nil && (ch.Met() || len(ch.Runs) > 0) {
			t.Errorf("never-started, in the missing shard: %+v", ch)
		}
	})
}

// withoutCheck copies the suite file from to to without the named check,
// with its workdir made absolute. pr12265's find-naive-timeout is left out
// of the comparisons here: its verdict rests on the naive evaluation
// overrunning a multiple of the best solver's time, which the load of a
// busy test machine shifts between two runs, whatever Slurm does.
func withoutCheck(t *testing.T, from, to, name string) string {
	t.Helper()
	data, err := os.ReadFile(from)
	must(t, err)
	var doc yaml.Node
	must(t, yaml.Unmarshal(data, &doc))
	m := doc.Content[0]
	found := false
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch k, v := m.Content[i], m.Content[i+1]; k.Value {
		case "workdir":
			v.Value = filepath.Join(filepath.Dir(from), v.Value)
		case "checks":
			v.Content = slices.DeleteFunc(v.Content, func(c *yaml.Node) bool {
				for j := 0; j+1 < len(c.Content); j += 2 {
					if c.Content[j].Value == "name" && c.Content[j+1].Value == name {
						found = true
						return true
					}
				}
				return false
			})
		}
	}
	if !found {
		t.Fatalf("%s has no check %s", from, name)
	}
	out, err := yaml.Marshal(&doc)
	must(t, err)
	must(t, os.WriteFile(to, out, 0o644))
	return to
}

// shardNote finds the note by which a shard's result names itself and
// returns the split's id.
func shardNote(t *testing.T, res *report.SuiteResult, suite string, index, total int) string {
	t.Helper()
	prefix := fmt.Sprintf("shard %d/%d of suite %s (split ", index, total, suite)
	for _, n := range res.Notes {
		if rest, ok := strings.CutPrefix(n, prefix); ok {
			id, _, _ := strings.Cut(rest, ",")
			return id
		}
	}
	t.Errorf("shard %d/%d does not name itself: %q", index, total, res.Notes)
	return ""
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

// runSuite runs a suite on this host, as one-host reference, and keeps
// its result in out.
func runSuite(t *testing.T, c *cluster, bin, suite, out string, flags ...string) *report.SuiteResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jobLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"report", "--suite", suite, "--format", "json"}, flags...)...)
	cmd.Env = c.env
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	doc, err := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); err != nil && code != report.ExitFail {
		t.Fatalf("miotool report --suite %s: %v\n%s", suite, err, errOut.String())
	}
	must(t, os.WriteFile(out, doc, 0o644))
	return readSuite(t, out)
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
