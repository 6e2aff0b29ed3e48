package suite

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"miotool/internal/report"
)

func TestParseDevices(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "0", want: []string{"0"}},
		{in: "0,1,2,3", want: []string{"0", "1", "2", "3"}},
		{in: " 2, 3 ", want: []string{"2", "3"}},
		{in: "GPU-5e6f7a8b-1111-2222-3333-444455556666,1", want: []string{"GPU-5e6f7a8b-1111-2222-3333-444455556666", "1"}},
		{in: "", err: "want device ids separated by commas"},
		{in: "0,,1", err: "want device ids separated by commas"},
		{in: "0,1,0", err: "device 0 is given twice"},
		{in: "0,a b", err: "\"a b\" is not a device id"},
		{in: "X=1", err: "is not a device id"},
	} {
		got, err := ParseDevices(tc.in)
		switch {
		case tc.err == "" && (err != nil || !slices.Equal(got, tc.want)):
			t.Errorf("ParseDevices(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseDevices(%q) = %q, %v; want an error containing %q", tc.in, got, err, tc.err)
		}
	}
}

// Pinning sets the visible devices of every run: a suite, check or
// variant that sets them too is refused, naming where.
func TestCheckPinnable(t *testing.T) {
	ok := &File{Path: "s.yaml", Env: []string{"GPU_MAX_HW_QUEUES=3"}, Checks: []Check{{Name: "a", Env: []string{"X=1"}}}}
	if err := CheckPinnable(ok, []Variant{{Label: "Q=1", Env: []string{"Q=1"}}}); err != nil {
		t.Errorf("nothing chooses the devices: %v", err)
	}
	for _, tc := range []struct {
		name     string
		f        *File
		variants []Variant
		want     string
	}{
		{"suite", &File{Path: "s.yaml", EnvLine: 4, Env: []string{"CUDA_VISIBLE_DEVICES=1"}}, nil,
			"s.yaml:4: env sets CUDA_VISIBLE_DEVICES=1, which pinning each check to one device sets for every run"},
		{"check", &File{Path: "s.yaml", Checks: []Check{{Name: "a", Line: 9, Env: []string{"HIP_VISIBLE_DEVICES=2"}}}}, nil,
			"s.yaml:9: check \"a\": env sets HIP_VISIBLE_DEVICES=2"},
		{"variant", &File{Path: "s.yaml"}, []Variant{{Label: "CUDA_VISIBLE_DEVICES=0", Env: []string{"CUDA_VISIBLE_DEVICES=0"}}},
			"the environment CUDA_VISIBLE_DEVICES=0 sets CUDA_VISIBLE_DEVICES=0"},
	} {
		if err := CheckPinnable(tc.f, tc.variants); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The place a run starts in: the least busy device no exclusive run
// holds, or for an exclusive run the first device with nothing going;
// none once jobs runs are going.
func TestLanesPick(t *testing.T) {
	for _, tc := range []struct {
		name      string
		free      int
		running   []int
		alone     []bool
		exclusive bool
		want      int
	}{
		{"the least busy", 4, []int{2, 1, 1}, []bool{false, false, false}, false, 1},
		{"the first idle", 4, []int{1, 0, 0}, []bool{false, false, false}, false, 1},
		{"not beside an exclusive run", 4, []int{1, 1}, []bool{true, false}, false, 1},
		{"every device held", 4, []int{1, 1}, []bool{true, true}, false, -1},
		{"exclusive: an idle device", 4, []int{1, 0}, []bool{false, false}, true, 1},
		{"exclusive: none idle", 4, []int{1, 2}, []bool{false, false}, true, -1},
		{"exclusive: one device, busy", 4, []int{1}, []bool{false}, true, -1},
		{"no lane left", 0, []int{1, 0}, []bool{false, false}, false, -1},
	} {
		l := &lanes{free: tc.free, running: tc.running, alone: tc.alone}
		if got := l.pick(tc.exclusive); got != tc.want {
			t.Errorf("%s: device %d, want %d", tc.name, got, tc.want)
		}
	}
}

// With --devices each run is pinned to one device: its process sees
// only that device in CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES, the
// run records it, the checklist's Devices cell of each check lists the
// devices its runs used, and the result's notes name the runs each device
// was given.
func TestRunsArePinnedToTheirDevice(t *testing.T) {
	f := &File{Checks: []Check{
		check("cuda-a", report.Pass, "echoenv", "CUDA_VISIBLE_DEVICES"),
		check("hip-a", report.Pass, "echoenv", "HIP_VISIBLE_DEVICES"),
		check("cuda-b", report.Pass, "echoenv", "CUDA_VISIBLE_DEVICES"),
		check("hip-b", report.Pass, "echoenv", "HIP_VISIBLE_DEVICES"),
	}}
	// The parent's own value is what pinning replaces.
	r := fakeRunner(t, "CUDA_VISIBLE_DEVICES=0,1,2,3", "HIP_VISIBLE_DEVICES=0,1,2,3")
	res := runSuite(t, r, f, Options{Jobs: 2, Devices: []string{"2", "GPU-77"}, Repeat: 2})
	seen := map[string][]string{} // device -> the checks' runs it saw
	used := map[string][]string{} // check -> the devices its runs saw
	for _, c := range res.Checks {
		for _, run := range c.Runs {
			_, id, _ := strings.Cut(run.Summary, "=")
			if id != "2" && id != "GPU-77" {
				t.Errorf("%s run %d saw %q", c.Name, run.Iteration, run.Summary)
				continue
			}
			seen[id] = append(seen[id], fmt.Sprintf("%s (run %d)", c.Name, run.Iteration))
			if run.PinnedDevice != id {
				t.Errorf("%s run %d saw device %s and records %q", c.Name, run.Iteration, id, run.PinnedDevice)
			}
			used[c.Name] = append(used[c.Name], id)
		}
	}
	for k, row := range res.Checklist().Rows {
		c := res.Checks[k]
		// An index before a UUID, each once.
		ids := slices.Compact(slices.Sorted(slices.Values(used[c.Name])))
		want := "Fake GPU (fx1) on " + map[int]string{1: "device ", 2: "devices "}[len(ids)] + strings.Join(ids, ", ")
		if got := row.Cells[2]; got != want {
			t.Errorf("%s, run on %q: Devices cell %q, want %q", c.Name, used[c.Name], got, want)
		}
	}
	if len(seen["2"]) == 0 || len(seen["GPU-77"]) == 0 {
		t.Errorf("runs by device %v: want both devices used", seen)
	}
	for _, id := range []string{"2", "GPU-77"} {
		prefix := "device " + id + " (CUDA_VISIBLE_DEVICES=" + id + " HIP_VISIBLE_DEVICES=" + id + "): "
		i := slices.IndexFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, prefix) })
		if i < 0 {
			t.Fatalf("no note for device %s in %q", id, res.Notes)
		}
		listed := strings.Split(strings.TrimPrefix(res.Notes[i], prefix), ", ")
		slices.Sort(listed)
		slices.Sort(seen[id])
		if !slices.Equal(listed, seen[id]) {
			t.Errorf("device %s: the note lists %q, the runs saw it in %q", id, listed, seen[id])
		}
	}
}

// An exclusive check is alone on its device, not on the host: a pair
// that can end only together (each opens one end of a FIFO), one of them
// exclusive, passes over two devices. On one device the exclusive one
// would wait alone for its partner until its timeout.
func TestExclusiveIsAloneOnItsDeviceOnly(t *testing.T) {
	fifo := mkfifo(t)
	f := &File{Timeout: 30 * time.Second, Checks: []Check{
		{Name: "writer", Args: []string{"meet-write", fifo}, Expect: report.Pass, Exclusive: true},
		check("reader", report.Pass, "meet-read", fifo),
	}}
	res := runSuite(t, fakeRunner(t), f, Options{Jobs: 2, Devices: []string{"0", "1"}})
	for _, c := range res.Checks {
		if len(c.Runs) != 1 || c.Runs[0].Verdict != report.Pass {
			t.Errorf("%s: %+v", c.Name, c.Runs)
		}
	}
}

// Nothing runs beside an exclusive run on its device: over many passes on
// two devices, no run pinned to an exclusive run's device overlaps it.
func TestNothingBesideAnExclusiveRunOnItsDevice(t *testing.T) {
	f := &File{Checks: []Check{
		{Name: "alone", Args: []string{"echoenv", "CUDA_VISIBLE_DEVICES"}, Expect: report.Pass, Exclusive: true},
		check("a", report.Pass, "echoenv", "CUDA_VISIBLE_DEVICES"),
		check("b", report.Pass, "echoenv", "CUDA_VISIBLE_DEVICES"),
		check("c", report.Pass, "echoenv", "CUDA_VISIBLE_DEVICES"),
	}}
	res := runSuite(t, fakeRunner(t), f, Options{Jobs: 4, Devices: []string{"0", "1"}, Repeat: 4})
	type span struct {
		device     string
		start, end time.Time
		name       string
	}
	var alone, others []span
	for _, c := range res.Checks {
		for _, r := range c.Runs {
			s := span{strings.TrimPrefix(r.Summary, "CUDA_VISIBLE_DEVICES="), r.Started, r.Started.Add(r.Duration), c.Name}
			if c.Name == "alone" {
				alone = append(alone, s)
			} else {
				others = append(others, s)
			}
		}
	}
	if len(alone) != 4 || len(others) != 12 {
		t.Fatalf("%d exclusive runs and %d others", len(alone), len(others))
	}
	for _, a := range alone {
		for _, o := range others {
			if o.device == a.device && o.start.Before(a.end) && a.start.Before(o.end) {
				t.Errorf("on device %s, %s (%v to %v) overlaps the exclusive run (%v to %v)", a.device, o.name, o.start, o.end, a.start, a.end)
			}
		}
	}
}

// A shard runs its part of the suite, each of its checks repeat times,
// and names itself: its result's shard (index, count, what was split and
// the split's id) and a note. It lists every check of the suite in file
// order, each with the shard that runs it, the others' without runs. The
// shards' results merged are the whole suite's run, check for check; a
// merge told to do without a shard names each of its checks.
func TestShardsMergeToTheWholeSuite(t *testing.T) {
	f := &File{Path: "s.yaml", Name: "s", Timeout: 30 * time.Second, Checks: []Check{
		check("p1", report.Pass, "pass"), check("f1", report.Fail, "fail"), check("p2", report.Pass, "pass"),
		{Name: "later", Args: []string{"pass"}, Expect: report.Pass, Skip: "not today"},
		check("unexpected", report.Pass, "fail"), check("p3", report.Pass, "pass"),
	}}
	const repeat = 2
	whole := runSuite(t, fakeRunner(t), f, Options{Repeat: repeat})
	plan := PlanShard(f, Shard{1, 3}, nil, "")
	var shards []*report.SuiteResult
	var sources []string
	for i := 1; i <= 3; i++ {
		res := runSuite(t, fakeRunner(t), f, Options{Shard: Shard{i, 3}, Repeat: repeat})
		if !slices.ContainsFunc(res.Notes, func(n string) bool {
			return strings.HasPrefix(n, "shard "+Shard{i, 3}.String()+" of suite s (split "+plan.Split+", by count): ")
		}) {
			t.Errorf("shard %d/3 does not name itself in its notes: %q", i, res.Notes)
		}
		if want := (report.Shard{Index: i, Count: 3, Split: report.ShardChecks, Set: plan.Split}); res.Shard == nil || *res.Shard != want {
			t.Errorf("shard %d/3: the result's shard is %+v, want %+v", i, res.Shard, want)
		}
		if res.Options.Repeat != repeat {
			t.Errorf("shard %d/3: options %+v, want repeat %d", i, res.Options, repeat)
		}
		if len(res.Checks) != len(f.Checks) {
			t.Fatalf("shard %d/3 lists %d checks, the suite has %d", i, len(res.Checks), len(f.Checks))
		}
		for k, c := range res.Checks {
			own := slices.Contains(plan.Shards[i-1], k)
			runs := 0
			if own && c.Skip == "" {
				runs = repeat
			}
			if c.Name != f.Checks[k].Name || (c.Shard == i) != own || c.Shard < 1 || len(c.Runs) != runs {
				t.Errorf("shard %d/3, row %d: %s of shard %d with %d runs; want %s of this shard %v with %d runs",
					i, k+1, c.Name, c.Shard, len(c.Runs), f.Checks[k].Name, own, runs)
			}
			for _, run := range c.Runs {
				if run.Iteration < 1 || run.Iteration > repeat {
					t.Errorf("shard %d/3: %s has run %d, past the suite's repeat %d", i, c.Name, run.Iteration, repeat)
				}
			}
		}
		shards = append(shards, res)
		sources = append(sources, Shard{i, 3}.String())
	}
	merged, err := report.MergeSuites(shards, sources)
	if err != nil {
		t.Fatal(err)
	}
	row := func(r *report.SuiteResult, c *report.SuiteCheck) string {
		return fmt.Sprintf("%s: %s, %s, %d runs", c.Test(), c.Outcome(), r.StatusOf(c), len(c.Runs))
	}
	if len(merged.Checks) != len(whole.Checks) {
		t.Fatalf("merged shards hold %d checks, the whole suite %d", len(merged.Checks), len(whole.Checks))
	}
	for k, c := range whole.Checks {
		if got, want := row(merged, merged.Checks[k]), row(whole, c); got != want {
			t.Errorf("row %d: merged %q, the whole suite %q", k+1, got, want)
		}
	}
	if merged.Verdict() != whole.Verdict() || merged.Summary() != whole.Summary() {
		t.Errorf("merged %s %q, whole %s %q", merged.Verdict(), merged.Summary(), whole.Verdict(), whole.Summary())
	}

	// Without shard 2, what it runs is named, check by check.
	partial, err := report.MergeSuitesWith([]*report.SuiteResult{shards[0], shards[2]}, []string{sources[0], sources[2]},
		report.MergeOptions{TakeMissingShards: true})
	if err != nil {
		t.Fatal(err)
	}
	for k, c := range partial.Checks {
		if slices.Contains(plan.Shards[1], k) && partial.StatusOf(c) != "Not run (shard 2/3 missing)" {
			t.Errorf("%s, run by the missing shard: %q", c.Name, partial.StatusOf(c))
		}
	}
}

// A split with more shards than checks to run is refused before
// anything runs.
func TestShardOfTooFewChecksIsRefused(t *testing.T) {
	f := &File{Path: "s.yaml", Name: "s", Checks: []Check{check("a", report.Pass, "pass")}}
	_, err := fakeRunner(t).Run(context.Background(), f, Options{Shard: Shard{2, 2}})
	if err == nil || !strings.Contains(err.Error(), "fewer than 2 shards") {
		t.Errorf("err = %v", err)
	}
}
