//go:build unix

package replay

import (
	"syscall"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
)

// Bad input, run as a user would with the built binary: exit 2, a first
// stderr line that says what is wrong (the bound, where there is one), and
// the user's config and find-db unchanged by bytes, mode and inode.
func TestReplayBadInput(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, tt := range []struct {
		name  string
		args  []string
		first string
	}{
		{"zero replays", []string{"--replays", "0"}, "miotool: --replays 0: want 1 or more"},
		{"negative replays", []string{"--replays", "-5"}, "miotool: --replays -5: want 1 or more"},
		{"replays past the bound", []string{"--replays", "1000001"}, "miotool: --replays 1000001: at most 1000000"},
		{"zero deadline", []string{"--deadline", "0s"}, "miotool: --deadline 0s: want a positive duration"},
		{"negative deadline", []string{"--deadline", "-1s"}, "miotool: --deadline -1s: want a positive duration"},
		{"deadline past the bound", []string{"--deadline", "100h"}, "miotool: --deadline 100h0m0s: at most 1h"},
		{"deadline not a duration", []string{"--deadline", "soon"}, `miotool: invalid argument "soon" for "--deadline" flag`},
		{"zero repeats", []string{"--repeat", "0"}, "miotool: --repeat 0: want 1 to 10000"},
		{"repeats past the bound", []string{"--repeat", "20000"}, "miotool: --repeat 20000: at most 10000"},
		{"samples past the bound", []string{"--samples", "100000"}, "miotool: --samples 100000: want 1 to 1000"},
		{"unknown mode", []string{"--mode", "all"}, `miotool: --mode: unknown capture mode "all"`},
		{"unknown policy", []string{"--reclaim", "sometimes"}, `miotool: --reclaim: unknown reclaim policy "sometimes"`},
		{"unknown problem", []string{"--problem", "nope"}, `miotool: --problem: no problem named "nope"`},
		{"bad geometry", []string{"-W", "2", "-x", "9", "-q", "0"}, "miotool: problem naive-timeout-sim with -W 2 -x 9 -q 0: invalid problem: output width"},
		{"larger than the device", []string{"-n", "4", "-c", "512", "-H", "512", "-W", "512", "-k", "512"}, "miotool: find problem naive-timeout-sim with -n 4 -c 512 -H 512 -W 512 -k 512"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := cmdtest.NewUserFiles(t, "sim.ufdb.txt")
			before := cmdtest.Snapshot(t, u.Files()...)
			args := append([]string{"replay", "--backend", "sim", "--no-progress"}, tt.args...)
			ran := cmdtest.RunBinary(t, bin, u.Dir, u.Env(), time.Minute, args...)
			cmdtest.WantRefused(t, ran, tt.first)
			cmdtest.Unchanged(t, "the user's files", before)
			u.CheckNoLockFiles(t)
		})
	}
}

// SIGINT or SIGTERM during a long replay-only workload (a million
// replays) and during repeated runs: exit 130 or 143 within 2 s, an
// INTERRUPTED result holding what finished, and the JSON exit_code the
// process's own.
func TestReplayInterrupted(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, tt := range []struct {
		name    string
		args    []string
		waitFor []string // stderr lines, in order, before the signal
		planned int64
		minRuns int64
	}{
		{"replays", []string{"--reclaim", "worker", "--replays", "1000000"}, []string{"miotool: replay worker: 1000000 graph launches"}, 1, 0},
		// Lazy's run ends at its capture; guarded's waits out its deadline.
		{"repeats", []string{"--reclaim", "lazy,guarded", "--repeat", "100"}, []string{"miotool: replay lazy: find on", "miotool: replay guarded: find on"}, 200, 1},
	} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			t.Run(tt.name+"/"+sig.String(), func(t *testing.T) {
				u := cmdtest.NewUserFiles(t, "sim.ufdb.txt")
				args := append([]string{"replay", "--backend", "sim", "--no-progress", "--verbose", "--format", "json"}, tt.args...)
				p := cmdtest.StartBinary(t, bin, u.Dir, u.Env(), args...)
				for _, l := range tt.waitFor {
					p.WaitForLine(l, time.Minute)
				}
				code, after, stdout := p.Signal(sig, time.Minute)
				want := 128 + int(sig)
				if code != want || after > 2*time.Second {
					t.Errorf("exit %d %s after the signal, want %d within 2s\nstderr:\n%s", code, after.Round(time.Millisecond), want, p.Stderr())
				}
				r := cmdtest.ParseResult(t, stdout)
				runs, stopped, notRun := r.Counters["runs"], r.Counters["interrupted"], r.Counters["not_run"]
				if r.Verdict != "INTERRUPTED" || r.ExitCode != code || runs < tt.minRuns || stopped != 1 || runs+stopped+notRun != tt.planned {
					t.Errorf("verdict %s exit_code %d (process %d), runs %d, interrupted %d, not run %d; summary %q",
						r.Verdict, r.ExitCode, code, runs, stopped, notRun, r.Summary)
				}
			})
		}
	}
}
