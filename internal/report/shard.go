package report

import (
	"fmt"
	"strings"

	"miotool/internal/words"
)

// What a shard splits: a suite's checks among shards (each check runs in
// one shard), or the runs of a check (each shard makes its share of the
// repetitions).
const (
	ShardChecks = "checks"
	ShardRuns   = "runs"
)

// Shard names one part of a run split over several machines: index I of
// N, from 1, and what was split. A suite result split by checks may list
// every check of the suite, those another shard runs without runs and
// with that shard's index (SuiteCheck.Shard): a merge then keeps the
// suite's order and names each check of a shard that is missing; without
// them it names the missing shard (header, summary, JUnit).
type Shard struct {
	Index int
	Count int
	Split string // ShardChecks or ShardRuns
	// Set, when set, names the split the shard is a part of (a suite's
	// split plan, balanced by count or by a durations file): shards of
	// one split share it, and a merge never takes shards of two splits
	// as one set.
	Set string
}

// String is "2/4".
func (sh Shard) String() string { return fmt.Sprintf("%d/%d", sh.Index, sh.Count) }

// describe is "shard 2/4 (checks)".
func (sh Shard) describe() string { return fmt.Sprintf("shard %s (%s)", sh, sh.Split) }

// valid says what is wrong with sh, "" when nothing is.
func (sh Shard) valid() string {
	switch {
	case sh.Count < 1 || sh.Count > maxShards:
		return fmt.Sprintf("count %d is out of range (1 to %d)", sh.Count, maxShards)
	case sh.Index < 1 || sh.Index > sh.Count:
		return fmt.Sprintf("index %d is out of range (1 to the count, %d)", sh.Index, sh.Count)
	case sh.Split != ShardChecks && sh.Split != ShardRuns:
		return fmt.Sprintf("split %q is neither %q nor %q", sh.Split, ShardChecks, ShardRuns)
	}
	return ""
}

// maxShards bounds a shard count read from a file.
const maxShards = 100000

// own reports whether c is one of the checks s itself ran or meant to
// run: every check, except in a shard split by checks, whose result
// lists the checks of the other shards too.
func (s *SuiteResult) own(c *SuiteCheck) bool {
	return s.Shard == nil || s.Shard.Split != ShardChecks || c.Shard == 0 || c.Shard == s.Shard.Index
}

// ownChecks are the checks s ran or meant to run (see own).
func (s *SuiteResult) ownChecks() []*SuiteCheck {
	if s.Shard == nil || s.Shard.Split != ShardChecks {
		return s.Checks
	}
	var out []*SuiteCheck
	for _, c := range s.Checks {
		if s.own(c) {
			out = append(out, c)
		}
	}
	return out
}

// MissingShard is a shard a merge was told to do without.
type MissingShard struct {
	Suite string
	Shard
}

// missingShard is the shard a merge lacked that would have run c, nil when
// c is in none.
func (s *SuiteResult) missingShard(c *SuiteCheck) *MissingShard {
	for i, sh := range s.MissingShards {
		if sh.Split == ShardChecks && c.Shard == sh.Index && len(c.Runs) == 0 {
			return &s.MissingShards[i]
		}
	}
	return nil
}

// missingText is "shards 2/4 and 3/4 of pr12265 (checks)", for shards of
// one split run.
func missingText(missing []MissingShard) string {
	suite := missing[0].Suite
	names := make([]string, len(missing))
	for i, sh := range missing {
		names[i] = sh.String()
	}
	word := "shard"
	if len(names) > 1 {
		word = "shards"
	}
	list := strings.Join(names, ", ")
	if n := len(names); n > 1 {
		list = strings.Join(names[:n-1], ", ") + " and " + names[n-1]
	}
	return fmt.Sprintf("%s %s of %s (%s)", word, list, suite, missing[0].Split)
}

// MissingShardsError is a merge refused because a set of shards lacks
// some (MergeOptions.TakeMissingShards takes what is there): the command
// that merges can name its own way of saying so.
type MissingShardsError struct {
	Missing []MissingShard
	msg     string
}

func (e *MissingShardsError) Error() string { return e.msg }

// shardSet gathers the shards of one split run met in a merge.
type shardSet struct {
	suite string
	count int
	split string
	set   string
	from  map[int]string // index -> the file it came from
}

// shardKey names the split run a shard belongs to: the suite, the
// count, what was split, and for split runs the checks (a check's
// command without its --shard, so that the shards of one repeat meet).
func shardKey(r *SuiteResult) string {
	key := fmt.Sprintf("%s\x00%d\x00%s\x00%s", r.Suite, r.Shard.Count, r.Shard.Split, r.Shard.Set)
	if r.Shard.Split == ShardRuns {
		for _, c := range r.Checks {
			key += "\x00" + c.key()
		}
	}
	return key
}

// checkShards finds, among the shards of every split run in results,
// each one given twice (always refused: its runs would count twice) and
// each one missing (refused unless partial). It returns the missing ones.
func checkShards(results []*SuiteResult, sources []string, partial bool) ([]MissingShard, error) {
	sets := map[string]*shardSet{}
	var order []string
	for i, r := range results {
		if r.Shard == nil {
			continue
		}
		k := shardKey(r)
		set, ok := sets[k]
		if !ok {
			set = &shardSet{suite: r.Suite, count: r.Shard.Count, split: r.Shard.Split, set: r.Shard.Set, from: map[int]string{}}
			sets[k] = set
			order = append(order, k)
		}
		if prev, dup := set.from[r.Shard.Index]; dup {
			return nil, fmt.Errorf("%s and %s are both shard %s of %s (%s): merging both would count its runs twice; give each shard once",
				prev, sources[i], r.Shard, r.Suite, r.Shard.Split)
		}
		set.from[r.Shard.Index] = sources[i]
	}
	var missing []MissingShard
	for _, k := range order {
		set := sets[k]
		var lack []MissingShard
		for idx := 1; idx <= set.count; idx++ {
			if _, ok := set.from[idx]; !ok {
				lack = append(lack, MissingShard{Suite: set.suite, Shard: Shard{Index: idx, Count: set.count, Split: set.split, Set: set.set}})
			}
		}
		if len(lack) == 0 {
			continue
		}
		if !partial {
			var have []string
			for idx := 1; idx <= set.count; idx++ {
				if f, ok := set.from[idx]; ok {
					have = append(have, fmt.Sprintf("%d/%d %s", idx, set.count, f))
				}
			}
			return nil, &MissingShardsError{Missing: lack, msg: fmt.Sprintf("%s %s missing (given: %s); give every shard, or take what is there",
				missingText(lack), words.Plural(len(lack), "is", "are"), strings.Join(have, ", "))}
		}
		missing = append(missing, lack...)
	}
	return missing, nil
}

// shardText is "2/4 of the checks" for a shard's own result, "" otherwise.
func (s *SuiteResult) shardText() string {
	if s.Shard == nil {
		return ""
	}
	return fmt.Sprintf("%s of the %s", s.Shard, s.Shard.Split)
}

// missingText names the shards a merge did without: "shard 2/4 of
// pr12265 (checks), not merged: its checks are not run".
func (s *SuiteResult) missingText() string {
	if len(s.MissingShards) == 0 {
		return ""
	}
	var parts []string
	for i := 0; i < len(s.MissingShards); {
		j := i + 1
		for j < len(s.MissingShards) && s.MissingShards[j].Suite == s.MissingShards[i].Suite &&
			s.MissingShards[j].Count == s.MissingShards[i].Count && s.MissingShards[j].Split == s.MissingShards[i].Split {
			j++
		}
		parts = append(parts, missingText(s.MissingShards[i:j]))
		i = j
	}
	what := "its checks are not run"
	if s.MissingShards[0].Split == ShardRuns {
		what = "their runs are not counted"
	}
	if len(s.MissingShards) > 1 && s.MissingShards[0].Split == ShardChecks {
		what = "their checks are not run"
	}
	return strings.Join(parts, "; ") + " not merged: " + what
}
