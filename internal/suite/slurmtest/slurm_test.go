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
// on the simulator: each shard's result names its shard and lists every
// check of the suite, and the merged checklist of an array of shards is
// the one-host run check for check, in the suite's order, with the same
// verdicts; so is an array that runs the whole suite on every host, with
// each host's runs. A shard that Slurm stops while a check runs keeps its
// result, which shows that check as interrupted and the checks after it
// as not run, and a shard stopped before it started is named missing,
// with each of its checks: nothing lost, nothing green. A merge of those
// shards without --allow-missing-shards refuses, naming the missing one.
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
			res := readSuite(t, filepath.Join(s.dir, "task-"+task+".json"))
			id := shardNote(t, res, "pr12265", i, 3)
			if split != "" && id != split {
				t.Errorf("shard %d/3 names split %s, shard 1/3 %s", i, id, split)
			}
			split = id
			shardListsTheSuite(t, res, oneHost, i, 3, id)
		}
		merged := readSuite(t, filepath.Join(s.dir, "checklist.json"))
		if len(merged.MergedRuns) != 3 || len(merged.MissingShards) != 0 {
			t.Errorf("the merged checklist holds %d suite runs, want the 3 shards', and names missing shards %v", len(merged.MergedRuns), merged.MissingShards)
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
		// The missing shard is named, with its check: never lost.
		if len(merged.MissingShards) != 1 || merged.MissingShards[0].String() != "3/3" || merged.MissingShards[0].Suite != "stopped" {
			t.Errorf("missing shards %+v, want shard 3/3 of stopped", merged.MissingShards)
		}
		if ch := checks["never-started"]; ch == nil || ch.Met() || len(ch.Runs) > 0 || merged.StatusOf(ch) != "Not run (shard 3/3 missing)" {
			t.Errorf("never-started, in the missing shard: %+v", ch)
		} else if ch.Outcome() == report.Pass {
			t.Errorf("never-started, in the missing shard, is %s", ch.Outcome())
		}
		if !strings.Contains(md, "shard 3/3 of stopped (checks) not merged") || !strings.Contains(md, "Not run (shard 3/3 missing)") {
			t.Errorf("checklist.md does not name the missing shard and its check:\n%s", md)
		}
		if log := readFile(t, filepath.Join(s.dir, "merge.log")); !strings.Contains(log, "merging 2 of 3 results with --allow-missing-shards; missing: shard 3/3") {
			t.Errorf("the merge job does not say it took what was there:\n%s", log)
		}

		// Without the flag, miotool refuses the set, naming the shard.
		r := c.miotool(t, bin, "report", "merge", filepath.Join(s.dir, "task-1.json"), filepath.Join(s.dir, "task-2.json"))
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "shard 3/3 of stopped (checks) is missing") ||
			!strings.Contains(r.stderr, "--allow-missing-shards") {
			t.Errorf("merge without --allow-missing-shards: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
	})
}

// shardListsTheSuite says where a shard's result does not name its shard
// (index of total, split by checks, in the split set) or does not list
// every check of the suite, in the suite's order, each with the shard that
// runs it, its own with runs, the others' without.
func shardListsTheSuite(t *testing.T, res, oneHost *report.SuiteResult, index, total int, set string) {
	t.Helper()
	want := report.Shard{Index: index, Count: total, Split: report.ShardChecks, Set: set}
	if res.Shard == nil || *res.Shard != want {
		t.Errorf("shard %d/%d: the result's shard is %+v, want %+v", index, total, res.Shard, want)
	}
	if len(res.Checks) != len(oneHost.Checks) {
		t.Errorf("shard %d/%d lists %d checks, the suite has %d", index, total, len(res.Checks), len(oneHost.Checks))
		return
	}
	for k, c := range res.Checks {
		own := c.Shard == index
		if c.Test() != oneHost.Checks[k].Test() || c.Shard < 1 || c.Shard > total || own != (len(c.Runs) > 0) {
			t.Errorf("shard %d/%d, row %d: %s of shard %d with %d runs; the suite's row is %s", index, total, k+1,
				c.Test(), c.Shard, len(c.Runs), oneHost.Checks[k].Test())
		}
		for _, r := range c.Runs {
			if r.Iteration < 1 || r.Iteration > res.Options.Repeat {
				t.Errorf("shard %d/%d: %s has run %d of %d", index, total, c.Test(), r.Iteration, res.Options.Repeat)
			}
		}
	}
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

// ran is how a miotool command ended and what it printed.
type ran struct {
	code           int
	stdout, stderr string
}

// miotool runs bin with args, in the cluster's folder and environment,
// bounded by a minute.
func (c *cluster) miotool(t *testing.T, bin string, args ...string) ran {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("miotool %s: %v", strings.Join(args, " "), err)
	}
	return ran{cmd.ProcessState.ExitCode(), out.String(), errOut.String()}
}

// sameChecks says where merged and oneHost differ: check for check, in
// the one-host run's order, the same check with the same outcome and
// the same status up to what it found (its words and counts), runsEach
// runs each.
func sameChecks(t *testing.T, merged, oneHost *report.SuiteResult, runsEach int) {
	t.Helper()
	if len(merged.Checks) != len(oneHost.Checks) {
		t.Errorf("the merged checklist has %d checks, the one-host run %d", len(merged.Checks), len(oneHost.Checks))
	}
	// "Passed (1/1 run)" of "Passed (1/1 run): what it found", which
	// may hold figures of its own run.
	head := func(status string) string { h, _, _ := strings.Cut(status, ": "); return h }
	for k, want := range oneHost.Checks {
		if k >= len(merged.Checks) {
			t.Errorf("check %s of the one-host run is not in the merged checklist", want.Test())
			continue
		}
		c := merged.Checks[k]
		switch {
		case c.Test() != want.Test() || c.Command != want.Command:
			t.Errorf("row %d: merged %s (%s), one host %s (%s)", k+1, c.Test(), c.Command, want.Test(), want.Command)
		case c.Outcome() != want.Outcome() || c.Met() != want.Met():
			t.Errorf("check %s: merged %s (met %v), one host %s (met %v)", want.Test(), c.Outcome(), c.Met(), want.Outcome(), want.Met())
		case runsEach == 1 && head(merged.StatusOf(c)) != head(oneHost.StatusOf(want)):
			t.Errorf("check %s: merged %q, one host %q", want.Test(), merged.StatusOf(c), oneHost.StatusOf(want))
		case len(c.Runs) != runsEach*len(want.Runs):
			t.Errorf("check %s: %d runs merged, want %d", want.Test(), len(c.Runs), runsEach*len(want.Runs))
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
