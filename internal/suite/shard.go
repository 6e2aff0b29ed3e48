package suite

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"miotool/internal/report"
	"miotool/internal/words"
)

// Shard is one part of a suite split over several machines or CI jobs:
// shard Index of Total, counted from 1 (the way CI matrices show them, and
// TheRock's SHARD_INDEX counts). The zero Shard is the whole suite.
type Shard struct {
	Index int // from 1
	Total int
}

// Whole reports whether s is the whole suite (no shard asked for).
func (s Shard) Whole() bool { return s.Total == 0 }

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Total) }

// MaxShards bounds a split: a shard is a machine or a CI job, and past a
// few hundred the count is a typo, not a plan.
const MaxShards = 1000

// ParseShard reads "I/N": shard I of N, I from 1 to N.
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Shard{}, fmt.Errorf("%q: want I/N, shard I of N counted from 1, e.g. 2/4", s)
	}
	return shardOf(s, i, n)
}

func shardOf(what, index, total string) (Shard, error) {
	n, err := strconv.Atoi(strings.TrimSpace(total))
	if err != nil || n < 1 || n > MaxShards {
		return Shard{}, fmt.Errorf("%q: the number of shards must be a whole number from 1 to %d", what, MaxShards)
	}
	i, err := strconv.Atoi(strings.TrimSpace(index))
	switch {
	case err != nil:
		return Shard{}, fmt.Errorf("%q: the shard must be a whole number from 1 to %d", what, n)
	case i == 0:
		return Shard{}, fmt.Errorf("%q: shards count from 1 (the first of %d is 1/%d, the last %d/%d)", what, n, n, n, n)
	case i < 0 || i > n:
		return Shard{}, fmt.Errorf("%q: the shard must be from 1 to %d", what, n)
	}
	return Shard{Index: i, Total: n}, nil
}

// The variables a CI job is handed its shard in: TheRock's test workflows
// set SHARD_INDEX from their matrix, which counts from 1 (shard: [1, 2,
// 3, 4]; its test scripts subtract one for GoogleTest's 0-based
// GTEST_SHARD_INDEX), and TOTAL_SHARDS.
const (
	ShardIndexEnv  = "SHARD_INDEX"
	TotalShardsEnv = "TOTAL_SHARDS"
)

// ShardFromEnv reads the shard from SHARD_INDEX and TOTAL_SHARDS through
// getenv, counted from 1 as TheRock's CI sets them. ok is false when
// neither is set; one without the other, or a value out of range (a
// 0-based SHARD_INDEX=0 among them), is an error naming the variables.
func ShardFromEnv(getenv func(string) string) (_ Shard, ok bool, _ error) {
	index, total := strings.TrimSpace(getenv(ShardIndexEnv)), strings.TrimSpace(getenv(TotalShardsEnv))
	switch {
	case index == "" && total == "":
		return Shard{}, false, nil
	case total == "":
		return Shard{}, false, fmt.Errorf("%s=%s without %s: set both, or neither", ShardIndexEnv, index, TotalShardsEnv)
	case index == "":
		return Shard{}, false, fmt.Errorf("%s=%s without %s: set both, or neither", TotalShardsEnv, total, ShardIndexEnv)
	}
	s, err := shardOf(index+"/"+total, index, total)
	if err != nil {
		return Shard{}, false, fmt.Errorf("%s=%s %s=%s: %w", ShardIndexEnv, index, TotalShardsEnv, total, err)
	}
	return s, true, nil
}

// Range is the part [lo, hi) of n things, numbered from 0, that shard s
// takes when they are split evenly and in order: the first n%Total shards
// take one more than the others. The whole suite takes [0, n).
func (s Shard) Range(n int) (lo, hi int) {
	if s.Whole() {
		return 0, n
	}
	base, extra := n/s.Total, n%s.Total
	i := s.Index - 1
	lo = i*base + min(i, extra)
	hi = lo + base
	if i < extra {
		hi++
	}
	return lo, hi
}

// Weights are what one run of each check costs, by check name, for
// balancing a split: the durations of an earlier result.
type Weights map[string]time.Duration

// DurationsOf reads the mean duration of one run of each check of an
// earlier result (a merged one as well): every run that ended counts,
// passed, failed or timed out; interrupted runs, cut short, do not.
// Checks with no such run are left out, and weigh what the others do on
// average when a suite is split (Split).
func DurationsOf(res *report.SuiteResult) Weights {
	sum := map[string]time.Duration{}
	count := map[string]int{}
	for _, c := range res.Checks {
		for _, r := range c.Runs {
			if r.Verdict == report.Interrupted || r.Duration <= 0 {
				continue
			}
			sum[c.Name] += r.Duration
			count[c.Name]++
		}
	}
	w := Weights{}
	for name, d := range sum {
		w[name] = d / time.Duration(count[name])
	}
	return w
}

// minWeight keeps every check's weight above zero, so that the first
// Total checks of a split each open a shard of their own.
const minWeight = time.Millisecond

// weights are the cost of each runnable check of f, by index: its weight
// in w, else the mean of the weights w gives the other checks; with none
// known, every check costs the same (a split by count).
func (w Weights) of(f *File, runnable []int) []time.Duration {
	var known time.Duration
	n := 0
	for _, i := range runnable {
		if d, ok := w[f.Checks[i].Name]; ok {
			known += max(d, minWeight)
			n++
		}
	}
	fallback := time.Second
	if n > 0 {
		fallback = known / time.Duration(n)
	}
	out := make([]time.Duration, len(f.Checks))
	for _, i := range runnable {
		d, ok := w[f.Checks[i].Name]
		if !ok {
			d = fallback
		}
		out[i] = max(d, minWeight)
	}
	return out
}

// runnable are the indexes of f's checks the file does not skip.
func (f *File) runnable() []int {
	var out []int
	for i, c := range f.Checks {
		if c.Skip == "" {
			out = append(out, i)
		}
	}
	return out
}

// CheckShard says, before anything runs, whether f can be split into
// s.Total shards that each run something: a shard with no check would
// pass nothing.
func CheckShard(f *File, s Shard) error {
	if s.Whole() {
		return nil
	}
	if n := len(f.runnable()); s.Total > n {
		return fmt.Errorf("%s has %d %s to run, fewer than %d shards: a shard would run nothing; split it in at most %d",
			f.Path, n, words.Plural(n, "check", "checks"), s.Total, max(n, 1))
	}
	return nil
}

// Split assigns the checks of f to total shards, balanced by w: the
// checks, costliest first (the file's order among equals), each go to the
// shard with the least cost so far (the first among equals). Without
// weights every check costs the same, and check k of the runnable ones
// goes to shard k%total+1. The same file and weights give the same split
// on every machine. Checks the file skips run nowhere, and are listed by
// shard 1, so that a merge of all shards lists them once. It returns the
// indexes of each shard's checks, shard 1 first, each in file order.
func Split(f *File, total int, w Weights) [][]int {
	total = max(total, 1)
	runnable := f.runnable()
	cost := w.of(f, runnable)
	order := slices.Clone(runnable)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(cost[b], cost[a]) })
	load := make([]time.Duration, total)
	shards := make([][]int, total)
	for _, i := range order {
		least := 0
		for s := range load {
			if load[s] < load[least] {
				least = s
			}
		}
		load[least] += cost[i]
		shards[least] = append(shards[least], i)
	}
	for i, c := range f.Checks {
		if c.Skip != "" {
			shards[0] = append(shards[0], i)
		}
	}
	for _, s := range shards {
		slices.Sort(s)
	}
	return shards
}

// SplitID names a split: a digest of which shard each check of f went
// to. Shards that report the same id split the same file the same way, so
// together they hold each check once; shards split with different
// durations files, or of different suite files, do not.
func SplitID(f *File, shards [][]int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", len(shards))
	for s, idx := range shards {
		for _, i := range idx {
			fmt.Fprintf(h, "%d\t%s\n", s+1, f.Checks[i].Name)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// ShardPlan is what a shard of a suite runs, and how the split was made.
type ShardPlan struct {
	Shard  Shard
	Checks []int // the shard's checks, indexes into the file's, in file order
	// Shards are every shard's checks, shard 1 first (Split), so that a
	// shard's result can name the shard of each check it does not run.
	Shards [][]int
	Split  string // SplitID
	// By says what balanced the split: "count", or the durations file.
	By string
}

// PlanShard splits f as Split does and returns shard s's part. by names
// what w was read from, "" when w is nil (a split by count).
func PlanShard(f *File, s Shard, w Weights, by string) ShardPlan {
	shards := Split(f, s.Total, w)
	if by == "" || len(w) == 0 {
		by = "count"
	}
	return ShardPlan{Shard: s, Checks: shards[s.Index-1], Shards: shards, Split: SplitID(f, shards), By: by}
}

// ShardOfEach is, for each of f's checks, the shard (from 1) that runs
// it, or that lists it for a check the file skips.
func (p ShardPlan) ShardOfEach(f *File) []int {
	of := make([]int, len(f.Checks))
	for s, idx := range p.Shards {
		for _, i := range idx {
			of[i] = s + 1
		}
	}
	return of
}

// Note is the line of a shard's result that names it: which shard of
// which split, and its checks.
func (p ShardPlan) Note(f *File) string {
	names := make([]string, len(p.Checks))
	for k, i := range p.Checks {
		names[k] = f.Checks[i].Name
	}
	by := "by count"
	if p.By != "count" {
		by = "balanced by the durations in " + p.By
	}
	return fmt.Sprintf("shard %s of suite %s (split %s, %s): %s", p.Shard, f.Name, p.Split, by, strings.Join(names, ", "))
}

// only is a copy of f with only the checks at idx, in that order.
func (f *File) only(idx []int) *File {
	g := *f
	g.Checks = make([]Check, len(idx))
	for k, i := range idx {
		g.Checks[k] = f.Checks[i]
	}
	return &g
}
