package suite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/internal/report"
)

func mkfifo(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "meet")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	return p
}

// With --jobs 2 two checks run side by side: a pair that can end only
// together (each opens one end of a FIFO) passes, and the result lists
// the checks in file order whatever order they ended in. One at a time,
// the first of the pair would wait for the second until its timeout.
func TestJobsRunChecksSideBySide(t *testing.T) {
	fifo := mkfifo(t)
	f := &File{Timeout: 30 * time.Second, Checks: []Check{
		check("writer", report.Pass, "meet-write", fifo),
		check("quick", report.Pass, "pass"),
		check("reader", report.Pass, "meet-read", fifo),
	}}
	res := runSuite(t, fakeRunner(t), f, Options{Jobs: 2})
	names := []string{}
	for _, c := range res.Checks {
		names = append(names, c.Name)
		if len(c.Runs) != 1 || c.Runs[0].Verdict != report.Pass {
			t.Errorf("%s: %+v", c.Name, c.Runs)
		}
	}
	if !slices.Equal(names, []string{"writer", "quick", "reader"}) {
		t.Errorf("rows %q, want the file's order", names)
	}
	for i, c := range res.Checks {
		if c.Runs[0].Order != i+1 {
			t.Errorf("%s started as run %d, want %d (runs start in the plan's order)", c.Name, c.Runs[0].Order, i+1)
		}
	}
	if res.Options.Jobs != 2 {
		t.Errorf("options %+v", res.Options)
	}
}

// An exclusive check has nothing beside it: it starts when every run
// before it has ended, and nothing starts before it has ended. With runs
// side by side the exclusive checks of a pass come first.
func TestExclusiveChecksRunAlone(t *testing.T) {
	f := &File{Checks: []Check{
		check("a", report.Pass, "pass"), check("b", report.Pass, "pass"),
		{Name: "alone", Args: []string{"pass"}, Expect: report.Pass, Exclusive: true},
		check("c", report.Pass, "pass"), check("d", report.Pass, "pass"),
	}}
	r := fakeRunner(t)
	// With runs side by side, Progress hears of each start (naming the
	// check) and each end (naming a check still running): while "alone"
	// runs nothing else does, so only its starts name it.
	var aloneDone []int
	r.Progress = func(done, _ int, current string) {
		if current == "alone" {
			aloneDone = append(aloneDone, done)
		}
	}
	res := runSuite(t, r, f, Options{Jobs: 4, Repeat: 2})
	// When "alone" starts, every run before it has ended: none in the
	// first pass, the 5 of the first pass in the second.
	if !slices.Equal(aloneDone, []int{0, 5}) {
		t.Errorf("runs done whenever a progress call named alone: %v, want [0 5]", aloneDone)
	}
	var alone, others []report.SuiteRun
	for _, c := range res.Checks {
		if c.Name == "alone" {
			alone = c.Runs
		} else {
			others = append(others, c.Runs...)
		}
	}
	for _, a := range alone {
		// Each pass starts with it (ExclusiveFirst): runs 1 and 6.
		if a.Order != 1 && a.Order != 6 {
			t.Errorf("alone started as run %d, want 1 or 6", a.Order)
		}
		aEnd := a.Started.Add(a.Duration)
		for _, o := range others {
			if oEnd := o.Started.Add(o.Duration); o.Started.Before(aEnd) && a.Started.Before(oEnd) {
				t.Errorf("run %d of alone (%v to %v) overlaps run %d (%v to %v)", a.Iteration, a.Started, aEnd, o.Order, o.Started, oEnd)
			}
		}
	}
}

// The checks run on a find-db of the suite run's own, removed after it,
// unless the file asks for the user's; a variant may still choose one.
func TestChecksRunOnAScratchFindDB(t *testing.T) {
	user := t.TempDir()
	tmp := t.TempDir()
	for _, tc := range []struct {
		name     string
		db       FindDB
		variants []Variant
		want     func(got string) bool
	}{
		{"scratch", FindDBScratch, nil, func(got string) bool { return strings.HasPrefix(got, filepath.Join(tmp, "miotool-suite-find-db-")) }},
		{"the default is scratch", "", nil, func(got string) bool { return strings.HasPrefix(got, filepath.Join(tmp, "miotool-suite-find-db-")) }},
		{"the user's", FindDBUser, nil, func(got string) bool { return got == user }},
		{"a variant's", FindDBScratch, []Variant{{Label: "v", Env: []string{"MIOPEN_USER_DB_PATH=" + user}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fakeRunner(t, "MIOPEN_USER_DB_PATH="+user)
			r.TempDir = tmp
			f := &File{FindDB: tc.db, Checks: []Check{check("db", report.Pass, "writedb")}}
			res := runSuite(t, r, f, Options{Variants: tc.variants})
			got := res.Checks[0].Runs[0].Summary
			if tc.want != nil && !tc.want(got) {
				t.Errorf("the check's MIOPEN_USER_DB_PATH is %q", got)
			}
			if tc.variants != nil && res.Checks[1].Runs[0].Summary != user {
				t.Errorf("the variant's check wrote to %q, want %q", res.Checks[1].Runs[0].Summary, user)
			}
			if got != user {
				if _, err := os.Stat(got); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the scratch find-db %s is still there after the suite: %v", got, err)
				}
			}
			left, _ := os.ReadDir(tmp)
			if len(left) != 0 {
				t.Errorf("left in the temporary folder: %v", left)
			}
			if want := "find-db: the checks ran on a scratch find-db"; tc.db == FindDBUser {
				if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "on your find-db") }) {
					t.Errorf("notes %q", res.Notes)
				}
			} else if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, want) }) {
				t.Errorf("notes %q, want one starting %q", res.Notes, want)
			}
		})
	}
	if data, err := os.ReadFile(filepath.Join(user, "sim_2.SIM.ufdb.txt")); err != nil || len(data) == 0 {
		t.Errorf("the user's find-db was not written where asked: %v", err)
	}
}

// With runs side by side, an interruption stops every run going: each is
// interrupted, with the time it ran and the device it was pinned to, and
// the runs it came before are not run.
func TestInterruptStopsEveryRunningCheck(t *testing.T) {
	fifoA, fifoB := mkfifo(t), mkfifo(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	opened := make(chan struct{}, 2)
	for _, p := range []string{fifoA, fifoB} {
		go func() {
			if f, err := os.Open(p); err == nil { // once the gate check opened it
				f.Close()
				opened <- struct{}{}
			}
		}()
	}
	go func() {
		for range 2 {
			select {
			case <-opened:
			case <-ctx.Done():
				return
			}
		}
		cancel(errors.New("interrupted by SIGTERM"))
	}()
	f := &File{Name: "x", Timeout: 60 * time.Second, Checks: []Check{
		check("one", report.Pass, "gate", fifoA), check("two", report.Pass, "gate", fifoB), check("later", report.Pass, "pass")}}
	res, err := fakeRunner(t).Run(ctx, f, Options{Jobs: 2, Devices: []string{"0", "1"}})
	if err != context.Canceled {
		t.Fatalf("err = %v", err)
	}
	if res.Verdict() != report.Interrupted || res.Interrupted != "interrupted by SIGTERM" {
		t.Errorf("verdict %s, interrupted %q", res.Verdict(), res.Interrupted)
	}
	if tot := res.Totals(); tot.Interrupted != 2 || tot.NotRun != 1 {
		t.Errorf("totals %+v: want the two running checks interrupted and one never started", tot)
	}
	for _, c := range res.Checks[:2] {
		if r := c.Runs[0]; r.Summary != "interrupted by SIGTERM while the check ran" || r.Duration <= 0 || r.PinnedDevice == "" {
			t.Errorf("%s: %+v", c.Name, r)
		}
	}
}

// A trace check's program gets its own arguments: the runner's result
// flags go before its "--".
func TestResultFlagsGoBeforeTheProgram(t *testing.T) {
	f := &File{Checks: []Check{check("traced", report.Pass, "args", "--", "python3", "x.py")}}
	res := runSuite(t, fakeRunner(t), f, Options{})
	if got := res.Checks[0].Runs[0].Summary; got != "-- python3 x.py" {
		t.Errorf("the check saw %q after its command", got)
	}
}
