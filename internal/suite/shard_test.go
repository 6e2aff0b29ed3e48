package suite

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"miotool/internal/report"
)

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		err  string // contained in the error; "" for none
	}{
		{in: "1/1", want: Shard{1, 1}},
		{in: "2/4", want: Shard{2, 4}},
		{in: " 4/4 ", want: Shard{4, 4}},
		{in: "0/4", err: "shards count from 1 (the first of 4 is 1/4, the last 4/4)"},
		{in: "5/4", err: "the shard must be from 1 to 4"},
		{in: "-1/4", err: "the shard must be from 1 to 4"},
		{in: "1/0", err: "the number of shards must be a whole number from 1 to 1000"},
		{in: "1/1001", err: "from 1 to 1000"},
		{in: "2", err: "want I/N, shard I of N counted from 1"},
		{in: "a/4", err: "the shard must be a whole number from 1 to 4"},
		{in: "1/b", err: "the number of shards must be"},
		{in: "", err: "want I/N"},
	} {
		got, err := ParseShard(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseShard(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseShard(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
		}
	}
}

// SHARD_INDEX counts from 1, as TheRock's CI sets it: SHARD_INDEX=0, what
// a CI counting from 0 hands its first job, is refused rather than read
// as some other shard, which would run one shard twice and one never.
func TestShardFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name         string
		index, total string
		want         Shard
		ok           bool
		err          string
	}{
		{name: "neither"},
		{name: "both", index: "3", total: "4", want: Shard{3, 4}, ok: true},
		{name: "the last", index: "4", total: "4", want: Shard{4, 4}, ok: true},
		{name: "counted from 0", index: "0", total: "4", err: "SHARD_INDEX=0 TOTAL_SHARDS=4: \"0/4\": shards count from 1"},
		{name: "past the last", index: "5", total: "4", err: "SHARD_INDEX=5 TOTAL_SHARDS=4"},
		{name: "index alone", index: "1", err: "SHARD_INDEX=1 without TOTAL_SHARDS"},
		{name: "total alone", total: "4", err: "TOTAL_SHARDS=4 without SHARD_INDEX"},
		{name: "not a number", index: "one", total: "4", err: "the shard must be a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{ShardIndexEnv: tc.index, TotalShardsEnv: tc.total}
			got, ok, err := ShardFromEnv(func(k string) string { return env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || ok {
					t.Fatalf("got %v, %v, %v; want an error containing %q", got, ok, err, tc.err)
				}
				return
			}
			if err != nil || ok != tc.ok || got != tc.want {
				t.Fatalf("got %v, %v, %v; want %v, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

// Split evenly, the shards' ranges cover [0, n) once, in order, and
// differ in size by one at most.
func TestShardRangeSplitsEvenly(t *testing.T) {
	for n := range 23 {
		for total := 1; total <= 7; total++ {
			next, sizes := 0, []int{}
			for i := 1; i <= total; i++ {
				lo, hi := Shard{i, total}.Range(n)
				if lo != next || hi < lo {
					t.Fatalf("n=%d shard %d/%d: [%d, %d), want it to start at %d", n, i, total, lo, hi, next)
				}
				next = hi
				sizes = append(sizes, hi-lo)
			}
			if next != n || slices.Max(sizes)-slices.Min(sizes) > 1 {
				t.Fatalf("n=%d over %d shards: sizes %v ending at %d", n, total, sizes, next)
			}
		}
	}
	if lo, hi := (Shard{}).Range(5); lo != 0 || hi != 5 {
		t.Errorf("the whole: [%d, %d)", lo, hi)
	}
}

func fileOf(names ...string) *File {
	f := &File{Path: "s.yaml", Name: "s"}
	for _, n := range names {
		c := Check{Name: n, Args: []string{"pass"}, Expect: report.Pass}
		if rest, ok := strings.CutPrefix(n, "skip:"); ok {
			c.Name, c.Skip = rest, "not here"
		}
		f.Checks = append(f.Checks, c)
	}
	return f
}

func names(f *File, idx []int) []string {
	out := []string{}
	for _, i := range idx {
		out = append(out, f.Checks[i].Name)
	}
	return out
}

// Without durations the split is by count, round robin in file order;
// checks the file skips are listed by shard 1 only.
func TestSplitByCount(t *testing.T) {
	f := fileOf("a", "b", "skip:s", "c", "d", "e", "f", "g")
	got := Split(f, 3, nil)
	want := [][]string{{"a", "s", "d", "g"}, {"b", "e"}, {"c", "f"}}
	for i := range want {
		if n := names(f, got[i]); !slices.Equal(n, want[i]) {
			t.Errorf("shard %d/3: %v, want %v", i+1, n, want[i])
		}
	}
}

// The durations of an earlier result balance the shards: the costliest
// checks first, each to the least loaded shard. Here by count the first
// shard would take 16 s and the second 10 s; balanced, 14 s and 12 s.
func TestSplitBalancesByDurations(t *testing.T) {
	f := fileOf("a", "b", "c", "d", "e")
	w := Weights{"a": 10 * time.Second, "b": 6 * time.Second, "c": 5 * time.Second, "d": 4 * time.Second, "e": time.Second}
	got := Split(f, 2, w)
	if a, b := names(f, got[0]), names(f, got[1]); !slices.Equal(a, []string{"a", "d"}) || !slices.Equal(b, []string{"b", "c", "e"}) {
		t.Errorf("split %v | %v, want [a d] | [b c e]", a, b)
	}
	load := func(shards [][]int) time.Duration {
		var most time.Duration
		for _, s := range shards {
			var sum time.Duration
			for _, i := range s {
				sum += w[f.Checks[i].Name]
			}
			most = max(most, sum)
		}
		return most
	}
	if byTime, byCount := load(got), load(Split(f, 2, nil)); byTime >= byCount {
		t.Errorf("the longest shard takes %v balanced by durations, %v by count", byTime, byCount)
	}
}

// A check the earlier result does not have weighs what the others do on
// average: a new check is neither free nor the costliest.
func TestSplitWeighsAnUnknownCheckAsTheMean(t *testing.T) {
	f := fileOf("new", "a", "b", "c")
	w := Weights{"a": 9 * time.Second, "b": 2 * time.Second, "c": time.Second} // mean 4 s
	got := Split(f, 2, w)
	// a (9) -> 1; new (4) -> 2; b (2) -> 2; c (1) -> 2.
	if a, b := names(f, got[0]), names(f, got[1]); !slices.Equal(a, []string{"a"}) || !slices.Equal(b, []string{"new", "b", "c"}) {
		t.Errorf("split %v | %v, want [a] | [new b c]", a, b)
	}
}

// Any weights and any count up to the runnable checks: every runnable
// check is in exactly one shard, no shard is empty, and the split and its
// id are the same each time they are computed.
func TestSplitHoldsEachCheckOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 1 + rng.IntN(15)
		var ns []string
		w := Weights{}
		for i := range n {
			name := fmt.Sprintf("c%d", i)
			if rng.IntN(6) == 0 {
				name = "skip:" + name
			} else if rng.IntN(3) > 0 {
				w[name] = time.Duration(rng.IntN(5000)) * time.Millisecond // zero among them
			}
			ns = append(ns, name)
		}
		f := fileOf(ns...)
		runnable := len(f.runnable())
		if runnable == 0 {
			continue
		}
		total := 1 + rng.IntN(runnable)
		shards := Split(f, total, w)
		seen := map[int]int{}
		for s, idx := range shards {
			ran := 0
			for _, i := range idx {
				seen[i]++
				if f.Checks[i].Skip == "" {
					ran++
				} else if s != 0 {
					t.Fatalf("trial %d: skipped check %s in shard %d", trial, f.Checks[i].Name, s+1)
				}
			}
			if ran == 0 {
				t.Fatalf("trial %d: shard %d/%d runs nothing: %v", trial, s+1, total, shards)
			}
		}
		for i := range f.Checks {
			if seen[i] != 1 {
				t.Fatalf("trial %d: check %s is in %d shards", trial, f.Checks[i].Name, seen[i])
			}
		}
		if again := Split(f, total, w); !slices.EqualFunc(again, shards, slices.Equal) || SplitID(f, again) != SplitID(f, shards) {
			t.Fatalf("trial %d: the split changed between two computations", trial)
		}
	}
}

// The split's id changes with the split, so shards split differently are
// told apart.
func TestSplitIDNamesTheSplit(t *testing.T) {
	f := fileOf("a", "b", "c", "d")
	byCount := SplitID(f, Split(f, 2, nil))
	byTime := SplitID(f, Split(f, 2, Weights{"a": 5 * time.Second, "b": 4 * time.Second, "c": time.Second, "d": time.Second}))
	if byCount == byTime || len(byCount) != 12 {
		t.Errorf("ids %q and %q", byCount, byTime)
	}
	if SplitID(f, Split(f, 3, nil)) == SplitID(f, Split(f, 2, nil)) {
		t.Error("a split in 3 has the id of a split in 2")
	}
}

func TestCheckShard(t *testing.T) {
	f := fileOf("a", "b", "skip:s", "c")
	if err := CheckShard(f, Shard{3, 3}); err != nil {
		t.Errorf("3 shards of 3 checks: %v", err)
	}
	err := CheckShard(f, Shard{1, 4})
	if err == nil || !strings.Contains(err.Error(), "s.yaml has 3 checks to run, fewer than 4 shards: a shard would run nothing; split it in at most 3") {
		t.Errorf("4 shards of 3 checks: %v", err)
	}
	if err := CheckShard(f, Shard{}); err != nil {
		t.Errorf("the whole suite: %v", err)
	}
}

// An earlier result's durations: the mean of the runs that ended; an
// interrupted run, cut short, does not count.
func TestDurationsOf(t *testing.T) {
	res := &report.SuiteResult{Checks: []*report.SuiteCheck{
		{Name: "a", Runs: []report.SuiteRun{{Verdict: report.Pass, Duration: 2 * time.Second}, {Verdict: report.Fail, Duration: 4 * time.Second}}},
		{Name: "a", Variant: "Q=3", Runs: []report.SuiteRun{{Verdict: report.Error, Duration: 6 * time.Second}}},
		{Name: "b", Runs: []report.SuiteRun{{Verdict: report.Interrupted, Duration: time.Second}, {Verdict: report.Pass, Duration: 10 * time.Second}}},
		{Name: "never", Runs: []report.SuiteRun{{Verdict: report.Interrupted, Duration: time.Second}}},
		{Name: "skipped", Skip: "no GPU"},
	}}
	got := DurationsOf(res)
	want := Weights{"a": 4 * time.Second, "b": 10 * time.Second}
	if len(got) != len(want) || got["a"] != want["a"] || got["b"] != want["b"] {
		t.Errorf("durations %v, want %v", got, want)
	}
}

func TestShardNote(t *testing.T) {
	f := fileOf("a", "b", "c")
	p := PlanShard(f, Shard{2, 2}, nil, "")
	if got, want := p.Note(f), "shard 2/2 of suite s (split "+p.Split+", by count): b"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	p = PlanShard(f, Shard{1, 2}, Weights{"a": time.Second, "b": time.Second, "c": time.Minute}, "old.json")
	if got, want := p.Note(f), "shard 1/2 of suite s (split "+p.Split+", balanced by the durations in old.json): c"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
}
