package report

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// oneHostRun is a suite run on one host: checks that pass, fail as
// expected, fail unexpectedly, crash and skip, twice each.
func oneHostRun() *SuiteResult {
	s := NewSuiteResult("pr12265", suiteStart)
	s.Hosts, s.File = []string{"node1"}, "configs/suites/pr12265.yaml"
	s.Options = SuiteOptions{Repeat: 2}
	verdicts := []struct {
		expect Verdict
		got    []Verdict
	}{
		{Pass, []Verdict{Pass, Pass}}, {Fail, []Verdict{Fail, Fail}}, {Pass, []Verdict{Pass, Fail}},
		{Pass, []Verdict{Error, Pass}}, {Pass, []Verdict{Skip, Skip}}, {Fail, []Verdict{Fail, Fail}}, {Pass, []Verdict{Pass, Pass}},
	}
	order := 0
	for i, v := range verdicts {
		c := &SuiteCheck{Name: fmt.Sprintf("check-%d", i+1), Command: fmt.Sprintf("miotool capture --n=%d", i+1), Expect: v.expect}
		for it, got := range v.got {
			order++
			r := run("node1", it+1, got, fmt.Sprintf("run %d of check %d", it+1, i+1), time.Second)
			r.Order = order
			if got == Error {
				r.ExitCode = -1
			}
			c.Runs = append(c.Runs, r)
		}
		s.Checks = append(s.Checks, c)
	}
	return s
}

// shardsOf splits s by checks into n shards as a shard's run writes them:
// each lists every check of the suite, those of other shards without
// runs and with their shard's index, and runs its own on a host of its own.
func shardsOf(s *SuiteResult, n int) []*SuiteResult {
	var out []*SuiteResult
	for k := 1; k <= n; k++ {
		sh := NewSuiteResult(s.Suite, s.Started)
		host := fmt.Sprintf("node%d", k)
		sh.Hosts, sh.File, sh.Options = []string{host}, s.File, s.Options
		sh.Shard = &Shard{Index: k, Count: n, Split: ShardChecks}
		order := 0
		for i, c := range s.Checks {
			cc := &SuiteCheck{Name: c.Name, Command: c.Command, Variant: c.Variant, Env: c.Env, Expect: c.Expect, Skip: c.Skip, Shard: i%n + 1}
			if cc.Shard == k {
				for _, r := range c.Runs {
					order++
					r.Host, r.Order = host, order
					cc.Runs = append(cc.Runs, r)
				}
			}
			sh.Checks = append(sh.Checks, cc)
		}
		out = append(out, sh)
	}
	return out
}

func sourcesOf(n int) []string {
	var out []string
	for k := 1; k <= n; k++ {
		out = append(out, fmt.Sprintf("shard-%d.json", k))
	}
	return out
}

// A merge of every shard of a suite is the one-host run of the suite:
// the same checks in the same order, each with the same outcome, status
// and runs, and the same verdict, summary and totals. The shards go
// through their JSON files, as report merge reads them.
func TestMergedShardsEqualTheOneHostRun(t *testing.T) {
	whole := oneHostRun()
	for _, n := range []int{1, 2, 3, 7, 9} {
		t.Run(fmt.Sprintf("%d shards", n), func(t *testing.T) {
			var shards []*SuiteResult
			for _, sh := range shardsOf(whole, n) {
				shards = append(shards, roundTrip(t, sh))
			}
			m, err := MergeSuites(shards, sourcesOf(n))
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Checks) != len(whole.Checks) {
				t.Fatalf("%d checks merged, the suite has %d", len(m.Checks), len(whole.Checks))
			}
			for i, c := range whole.Checks {
				mc := m.Checks[i]
				if mc.Test() != c.Test() || mc.CommandLine() != c.CommandLine() || mc.Outcome() != c.Outcome() ||
					m.StatusOf(mc) != whole.StatusOf(c) || len(mc.Runs) != len(c.Runs) {
					t.Errorf("check %d: merged %s %q %s %q (%d runs); one host %s %q %s %q (%d runs)", i+1,
						mc.Test(), mc.CommandLine(), mc.Outcome(), m.StatusOf(mc), len(mc.Runs),
						c.Test(), c.CommandLine(), c.Outcome(), whole.StatusOf(c), len(c.Runs))
				}
				for k, r := range c.Runs {
					if k < len(mc.Runs) && (mc.Runs[k].Verdict != r.Verdict || mc.Runs[k].Iteration != r.Iteration) {
						t.Errorf("check %d run %d: %s, one host %s", i+1, k+1, mc.Runs[k].Verdict, r.Verdict)
					}
				}
			}
			if m.Verdict() != whole.Verdict() || m.Totals() != whole.Totals() || m.Summary() != whole.Summary() {
				t.Errorf("merged %s %+v %q; one host %s %+v %q", m.Verdict(), m.Totals(), m.Summary(), whole.Verdict(), whole.Totals(), whole.Summary())
			}
			if len(m.MissingShards) != 0 || m.Shard != nil {
				t.Errorf("a complete merge names shards: %+v %+v", m.MissingShards, m.Shard)
			}
		})
	}
}

// A shard's own result is about its own checks: its checklist, JUnit and
// totals list those it ran, its header says which shard it is, and the
// checks of the other shards, listed in its JSON for the merge, make it
// neither an ERROR nor a failure.
func TestAShardReportsItsOwnChecks(t *testing.T) {
	shards := shardsOf(oneHostRun(), 3)
	first := shards[0] // checks 1, 4 and 7: a pass, a crash, a pass
	if got := first.Totals(); got.Checks != 3 || got.Met != 2 || got.Errors != 1 || got.NotRun != 0 {
		t.Errorf("totals %+v", got)
	}
	if first.Verdict() != Fail {
		t.Errorf("verdict %s, want FAIL for its crashed check", first.Verdict())
	}
	if rows := first.Checklist().Rows; len(rows) != 3 || rows[1].Cells[0] != "check-4" {
		t.Errorf("checklist %+v", rows)
	}
	md := markdownOf(t, first)
	if !strings.Contains(md, "- **Shard:** 1/3 of the checks\n") || strings.Contains(md, "check-2") {
		t.Errorf("Markdown:\n%s", md)
	}
	var junit bytes.Buffer
	if err := WriteJUnit(&junit, first); err != nil {
		t.Fatal(err)
	}
	validateJUnit(t, junit.Bytes())
	if ci := readJUnitCounts(t, junit.Bytes()); len(ci.Names) != 3 || !strings.Contains(junit.String(), `name="miotool.shard" value="shard 1/3 (checks)"`) {
		t.Errorf("JUnit:\n%s", junit.String())
	}
	back := roundTrip(t, first)
	if back.Shard == nil || *back.Shard != *first.Shard || back.Checks[1].Shard != 2 || len(back.Checks) != 7 {
		t.Errorf("read back: shard %+v, checks %d", back.Shard, len(back.Checks))
	}
	// With more shards than checks, a shard may have none: it is still a
	// part of its set.
	shards = shardsOf(oneHostRun(), 9)
	if _, err := MergeSuites(shards, sourcesOf(9)); err != nil {
		t.Errorf("shards 8 and 9 have no checks: %v", err)
	}
}

// A set with a shard missing, or one given twice, is refused, saying
// which: the merge would lack a shard's checks, or count its runs twice.
// Told to take what is there, the merge names the missing shard in its
// header, summary, JSON and JUnit, each check of it is "Not run (shard
// 2/3 missing)", an <error> in JUnit, and the merge is never PASS.
func TestMergeNamesMissingShards(t *testing.T) {
	shards := shardsOf(oneHostRun(), 3)
	sources := sourcesOf(3)
	partial, partialSources := []*SuiteResult{shards[0], shards[2]}, []string{sources[0], sources[2]}
	_, err := MergeSuites(partial, partialSources)
	if want := "shard 2/3 of pr12265 (checks) is missing (given: 1/3 shard-1.json, 3/3 shard-3.json); give every shard, or take what is there"; err == nil ||
		err.Error() != want {
		t.Errorf("a shard missing: err = %v\nwant %s", err, want)
	}
	// A command can tell this refusal apart, to name its flag.
	var missingErr *MissingShardsError
	if !errors.As(err, &missingErr) || len(missingErr.Missing) != 1 || missingErr.Missing[0].Shard.String() != "2/3" {
		t.Errorf("a shard missing: err %#v is no MissingShardsError naming shard 2/3", err)
	}
	_, err = MergeSuites(shards[:1], sources[:1])
	if err == nil || !strings.HasPrefix(err.Error(), "shards 2/3 and 3/3 of pr12265 (checks) are missing") {
		t.Errorf("two shards missing: err = %v", err)
	}
	again := shardsOf(oneHostRun(), 3)[0] // shard 1 run a second time: another run id
	_, err = MergeSuites([]*SuiteResult{shards[0], shards[1], again, shards[2]}, []string{"a.json", "b.json", "again.json", "c.json"})
	if want := "a.json and again.json are both shard 1/3 of pr12265 (checks)"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a shard twice: err = %v, want %q", err, want)
	}
	// Taking what is there does not take a shard twice either.
	if _, err := MergeSuitesWith([]*SuiteResult{shards[0], again}, []string{"a.json", "again.json"}, MergeOptions{TakeMissingShards: true}); err == nil {
		t.Error("a shard twice was taken")
	}

	m, err := MergeSuitesWith(partial, partialSources, MergeOptions{TakeMissingShards: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Verdict() != Fail {
		// Its shards hold an unexpected failure: FAIL before ERROR.
		t.Errorf("verdict %s", m.Verdict())
	}
	var missingRows []string
	for _, row := range m.Checklist().Rows {
		if row.Cells[3] == "Not run (shard 2/3 missing)" {
			missingRows = append(missingRows, row.Cells[0])
		}
	}
	if !slices.Equal(missingRows, []string{"check-2", "check-5"}) {
		t.Errorf("rows of the missing shard: %v\n%s", missingRows, markdownOf(t, m))
	}
	const named = "shard 2/3 of pr12265 (checks) not merged: its checks are not run"
	md := markdownOf(t, m)
	if !strings.Contains(md, "- **Missing:** "+named+"\n") || !strings.Contains(m.Summary(), named) {
		t.Errorf("Markdown:\n%s", md)
	}
	var junit, js bytes.Buffer
	if err := WriteJUnit(&junit, m); err != nil {
		t.Fatal(err)
	}
	validateJUnit(t, junit.Bytes())
	ci := readJUnitCounts(t, junit.Bytes())
	if got := slices.Collect(func(yield func(string) bool) {
		for _, ty := range ci.ErrorTypes {
			if ty == "missing shard" && !yield(ty) {
				return
			}
		}
	}); len(got) != 2 {
		t.Errorf("JUnit error types %v: want the missing shard's two checks red", ci.ErrorTypes)
	}
	if err := WriteSuiteJSON(&js, m); err != nil {
		t.Fatal(err)
	}
	back := roundTrip(t, m)
	if !strings.Contains(js.String(), `"missing_shards": [`) || len(back.MissingShards) != 1 || back.MissingShards[0].Index != 2 ||
		back.StatusOf(back.Checks[1]) != "Not run (shard 2/3 missing)" {
		t.Errorf("JSON:\n%s", js.String())
	}
	// Where every shard that is there passed, the merge is an ERROR, not
	// a PASS: it lacks what the missing shard ran.
	passing := oneHostRun()
	passing.Checks = []*SuiteCheck{passing.Checks[0], passing.Checks[1], passing.Checks[6]}
	ps := shardsOf(passing, 3)
	m, err = MergeSuitesWith(ps[:2], sourcesOf(2), MergeOptions{TakeMissingShards: true})
	if err != nil || m.Verdict() != Error || m.ExitCode() != ExitError {
		t.Errorf("passing shards with one missing: %v, verdict %s", err, m.Verdict())
	}
}

// A repeat's runs split into shards are one check: their commands differ
// only in --shard, which the checklist leaves out, and a missing shard
// of the runs is named as a suite's is.
func TestRepeatShardsMergeIntoOneCheck(t *testing.T) {
	shard := func(i int, spelling string) *SuiteResult {
		r := New("repeat", fmt.Sprintf("miotool repeat --runs 20 %s --format json -- capture --mode=global", fmt.Sprintf(spelling, i)), suiteStart)
		r.Host, r.Backend, r.Device = fmt.Sprintf("gpu%d", i), "cuda", h200
		r.Cases = Cases{Passed: 10, Total: 10, Unit: "runs"}
		r.Shard = &Shard{Index: i, Count: 2, Split: ShardRuns}
		r.Finish(Pass, "10 of 10 runs passed", suiteStart.Add(time.Minute))
		var buf bytes.Buffer
		if err := WriteJSON(&buf, r); err != nil {
			t.Fatal(err)
		}
		s, err := ReadSuiteJSON(&buf)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	m, err := MergeSuites([]*SuiteResult{shard(1, "--shard %d/2"), shard(2, "--shard=%d/2")}, []string{"a.json", "b.json"})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Checks) != 1 || m.Checks[0].CommandLine() != "miotool repeat --runs 20 -- capture --mode=global" ||
		m.StatusOf(m.Checks[0]) != "Passed (20/20 runs)" {
		t.Errorf("merged: %d checks, %q, %q", len(m.Checks), m.Checks[0].CommandLine(), m.StatusOf(m.Checks[0]))
	}
	if _, err := MergeSuites([]*SuiteResult{shard(2, "--shard %d/2")}, []string{"b.json"}); err == nil ||
		!strings.HasPrefix(err.Error(), "shard 1/2 of repeat (runs) is missing") {
		t.Errorf("a repeat shard missing: %v", err)
	}
}

// Shards of two splits of one suite (by count, and by the durations of an
// earlier run) are two sets: a merge does not make one set of them, and
// says what each lacks.
func TestShardsOfTwoSplitsAreNotOneSet(t *testing.T) {
	byCount, byDurations := shardsOf(oneHostRun(), 2), shardsOf(oneHostRun(), 2)
	for _, s := range byCount {
		s.Shard.Set = "count"
	}
	for _, s := range byDurations {
		s.Shard.Set = "durations.json"
	}
	_, err := MergeSuites([]*SuiteResult{byCount[0], roundTrip(t, byDurations[1])}, []string{"a.json", "b.json"})
	if err == nil || !strings.HasPrefix(err.Error(), "shard 2/2 of pr12265 (checks) is missing (given: 1/2 a.json)") {
		t.Errorf("shards of two splits: %v", err)
	}
	if _, err := MergeSuites([]*SuiteResult{byCount[0], byCount[1]}, []string{"a.json", "b.json"}); err != nil {
		t.Errorf("the shards of one split: %v", err)
	}
}

// Shards that list only their own checks (as report --suite --shard writes
// them) merge as well: all of them equal the one-host run check for
// check; a missing one is named in the header and the summary, and the
// merge is not PASS.
func TestShardsOfTheirOwnChecksOnly(t *testing.T) {
	whole := oneHostRun()
	whole.Checks = []*SuiteCheck{whole.Checks[0], whole.Checks[1], whole.Checks[5], whole.Checks[6]} // all met
	var shards []*SuiteResult
	for _, sh := range shardsOf(whole, 2) {
		own := sh.ownChecks()
		for _, c := range own {
			c.Shard = 0
		}
		sh.Checks = own
		shards = append(shards, roundTrip(t, sh))
	}
	m, err := MergeSuites(shards, sourcesOf(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Checks) != len(whole.Checks) || m.Verdict() != whole.Verdict() || m.Totals() != whole.Totals() {
		t.Errorf("merged %d checks, %s %+v; one host %d, %s %+v", len(m.Checks), m.Verdict(), m.Totals(), len(whole.Checks), whole.Verdict(), whole.Totals())
	}
	m, err = MergeSuitesWith(shards[:1], sourcesOf(1), MergeOptions{TakeMissingShards: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.Verdict() != Error || !strings.Contains(m.Summary(), "shard 2/2 of pr12265 (checks) not merged") ||
		!strings.Contains(markdownOf(t, m), "- **Missing:** shard 2/2 of pr12265 (checks) not merged") {
		t.Errorf("verdict %s summary %q\n%s", m.Verdict(), m.Summary(), markdownOf(t, m))
	}
}
