package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/report"
	"miotool/internal/testutil"
)

// shardResults writes the results of the shards of suite "small" (3
// checks, one per shard, each shard listing all three) that present
// names, as name(index) says, and returns their paths.
func shardResults(t *testing.T, dir string, present []int, name func(index int) string) []string {
	t.Helper()
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var paths []string
	for _, index := range present {
		host := fmt.Sprintf("node%d", index)
		s := report.NewSuiteResult("small", start)
		s.Hosts, s.Options = []string{host}, report.SuiteOptions{Repeat: 1}
		s.Shard = &report.Shard{Index: index, Count: 3, Split: report.ShardChecks, Set: "0123456789ab"}
		for k := 1; k <= 3; k++ {
			c := &report.SuiteCheck{Name: fmt.Sprintf("check-%d", k), Command: fmt.Sprintf("miotool capture --n=%d", k), Expect: report.Pass, Shard: k}
			if k == index {
				c.Runs = []report.SuiteRun{{Host: host, Iteration: 1, Order: 1, Verdict: report.Pass, Started: start, Duration: time.Second,
					Device: report.Device{Name: "miotool simulated device (cuda rules)", Arch: "sim"}}}
			}
			s.Checks = append(s.Checks, c)
		}
		p := filepath.Join(dir, name(index))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		var buf bytes.Buffer
		must(t, report.WriteSuiteJSON(&buf, s))
		must(t, os.WriteFile(p, buf.Bytes(), 0o644))
		paths = append(paths, p)
	}
	return paths
}

// yamlAt walks doc by keys (a map's key, or for a list the item whose
// "name" is the key, or its index) and returns the string there.
func yamlAt(t *testing.T, file string, keys ...string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	must(t, err)
	var doc any
	must(t, yaml.Unmarshal(data, &doc))
	for _, k := range keys {
		switch v := doc.(type) {
		case map[string]any:
			doc = v[k]
		case []any:
			doc = nil
			for i, item := range v {
				if m, ok := item.(map[string]any); ok && m["name"] == k || strconv.Itoa(i) == k {
					doc = item
				}
			}
		}
		if doc == nil {
			t.Fatalf("%s has nothing at %q", file, keys)
		}
	}
	s, ok := doc.(string)
	if !ok {
		t.Fatalf("%s: %q is not a string", file, keys)
	}
	return s
}

// runScript runs a CI script in dir with env, bounded by a minute.
func runScript(t *testing.T, dir string, env []string, argv ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil {
		t.Fatalf("%s: %v", argv[0], err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// The merge steps of docs/ci/github-actions.yml and
// scripts/k8s-suite-merge.yaml, run as their runners run them against the
// built binary: with every shard the checklist is the suite's; with a
// shard missing they say so, merge the others with --allow-missing-shards
// so that the checklist names the shard and its check, and exit 2.
func TestCIMergeStepsNameAMissingShard(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash to run the workflow's step with")
	}
	bin := cmdtest.BuildMiotool(t)
	root := testutil.ModuleRoot(t)
	path := "PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	workflow := yamlAt(t, filepath.Join(root, "docs", "ci", "github-actions.yml"), "jobs", "merge", "steps", "Merge the shards into one Testing Checklist", "run")
	k8s := yamlAt(t, filepath.Join(root, "scripts", "k8s-suite-merge.yaml"), "spec", "template", "spec", "containers", "merge", "args", "0")

	for _, tc := range []struct {
		name    string
		present []int
	}{
		{"every shard", []int{1, 2, 3}},
		{"shard 2 missing", []int{1, 3}},
	} {
		missing := len(tc.present) < 3
		t.Run("GitHub Actions, "+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.MkdirAll(filepath.Join(dir, "plan"), 0o755))
			must(t, os.Symlink(bin, filepath.Join(dir, "plan", "miotool")))
			shardResults(t, dir, tc.present, func(i int) string { return fmt.Sprintf("shards/shard-%d.json", i) })
			script := filepath.Join(dir, "step.sh")
			must(t, os.WriteFile(script, []byte(workflow), 0o644))
			summary := filepath.Join(dir, "summary.md")
			// What GitHub runs a step's script with.
			code, out := runScript(t, dir, []string{path, "HOME=" + dir, "SHARDS=3", "GITHUB_STEP_SUMMARY=" + summary},
				"bash", "--noprofile", "--norc", "-eo", "pipefail", script)
			checkMerged(t, dir, "checklist.md", code, out, missing,
				"**Missing: shard 2/3 left no result; this checklist holds only the others.**",
				"::warning::merging 2 of 3 shards with --allow-missing-shards; missing: shard 2/3")
			if _, err := os.Stat(filepath.Join(dir, "durations.json")); (err == nil) == missing {
				t.Errorf("durations.json kept: %v; want it only from a merge of every shard", err == nil)
			}
			if s, err := os.ReadFile(summary); err != nil || !strings.Contains(string(s), "### Suite small") {
				t.Errorf("the job's summary: %v\n%s", err, s)
			}
		})
		t.Run("Kubernetes, "+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			shardResults(t, dir, tc.present, func(i int) string { return fmt.Sprintf("node%d-%d.json", i, i-1) })
			script := strings.ReplaceAll(k8s, "/results/", dir+"/")
			code, out := runScript(t, dir, []string{path, "HOME=" + dir, "SHARDS=3"}, "/bin/sh", "-c", script)
			checkMerged(t, dir, "checklist.md", code, out, missing,
				"**Missing: shard 2/3 left no result; this checklist holds only the others.**",
				"merging with --allow-missing-shards; missing: shard 2/3")
		})
	}
}

// checkMerged says where a merge step's checklist, exit status and output
// are not what every shard, or a missing shard 2/3, should give.
func checkMerged(t *testing.T, dir, checklist string, code int, out string, missing bool, top, said string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, checklist))
	md := string(data)
	if err != nil {
		t.Fatalf("exit %d, no checklist: %v\n%s", code, err, out)
	}
	if !missing {
		if code != 0 || strings.Contains(md, "**Missing") || strings.Contains(md, "not merged") || !strings.Contains(md, "### Suite small: PASS") {
			t.Errorf("every shard: exit %d\n%s\n%s", code, md, out)
		}
		return
	}
	for _, want := range []string{"shard 2/3 of small (checks) not merged", "| check-2 ", "Not run (shard 2/3 missing)", "### Suite small: ERROR"} {
		if !strings.Contains(md, want) {
			t.Errorf("the checklist lacks %q:\n%s", want, md)
		}
	}
	if code != 2 || !strings.HasPrefix(md, top+"\n") || !strings.Contains(out, said) {
		t.Errorf("exit %d, want 2; the checklist should start %q and the output say %q\n%s\n%s", code, top, said, md, out)
	}
}
