//go:build unix

package capture

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
)

// Bad input, run as a user would with the built binary: the documented
// exit status, a first stderr line that says what is wrong, and the
// user's config and find-db unchanged by bytes, mode and inode, with no
// lock file made.
func TestCaptureBadInput(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, tt := range []struct {
		name  string
		args  []string
		env   []string
		first string // the first stderr line starts with it
	}{
		{"zero repeats", []string{"--repeat", "0"}, nil, "miotool: --repeat 0: want 1 to 10000"},
		{"negative repeats", []string{"--repeat", "-2"}, nil, "miotool: --repeat -2: want 1 to 10000"},
		{"repeats past the bound", []string{"--repeat", "100000000"}, nil, "miotool: --repeat 100000000: at most 10000"},
		{"runs past the bound", []string{"--repeat", "10000", "--mode=all", "--reclaim=all"}, nil, "miotool: --repeat 10000 of 24 combinations is 240000 runs: at most 100000"},
		{"zero samples", []string{"--samples", "0"}, nil, "miotool: --samples 0: want 1 to 1000"},
		{"samples past the bound", []string{"--samples", "5000"}, nil, "miotool: --samples 5000: want 1 to 1000"},
		{"unknown mode", []string{"--mode", "sideways"}, nil, `miotool: --mode: unknown capture mode "sideways"`},
		{"unknown policy", []string{"--reclaim", "sometimes"}, nil, `miotool: --reclaim: unknown reclaim policy "sometimes"`},
		{"unknown variant", []string{"--variant", "third-thread"}, nil, `miotool: --variant: unknown variant "third-thread"`},
		{"unknown target", []string{"--target", "tensorrt"}, nil, `miotool: invalid argument "tensorrt" for "--target" flag`},
		{"a policy for a library", []string{"--target", "miopen", "--reclaim", "worker"}, nil, "miotool: --reclaim applies to --target=builtin only"},
		{"unknown problem", []string{"--problem", "nope"}, nil, `miotool: --problem: no problem named "nope"`},
		{"zero channels", []string{"-c", "0"}, nil, "miotool: problem naive-timeout-sim with -c 0: invalid problem: in_channels (C) must be >= 1"},
		{"larger than the device", []string{"-n", "2", "-c", "256", "-H", "1024", "-W", "1024", "-k", "256"}, nil,
			"miotool: find problem naive-timeout-sim with -n 2 -c 256 -H 1024 -W 1024 -k 256"},
		{"negative naive timeout", nil, []string{"MIOPEN_NAIVE_TIMEOUT=-5"}, "miotool: MIOPEN_NAIVE_TIMEOUT"},
		{"an argument", []string{"extra"}, nil, `miotool: unknown command "extra" for "miotool capture"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := cmdtest.NewUserFiles(t, "sim.ufdb.txt")
			before := cmdtest.Snapshot(t, u.Files()...)
			args := append([]string{"capture", "--backend", "sim", "--no-progress"}, tt.args...)
			ran := cmdtest.RunBinary(t, bin, u.Dir, u.Env(tt.env...), time.Minute, args...)
			cmdtest.WantRefused(t, ran, tt.first)
			if tt.name == "larger than the device" && !strings.Contains(ran.Stderr, "does not fit the device") {
				t.Errorf("the size refusal does not say why:\n%s", ran.Stderr)
			}
			cmdtest.Unchanged(t, "the user's files", before)
			u.CheckNoLockFiles(t)
		})
	}
}

// SIGINT or SIGTERM during `capture --repeat 1000`, once the first run
// has finished: exit 130 or 143 within 2 s, an INTERRUPTED result whose
// counts add up to the 1000 runs planned (the finished ones, the one
// stopped, the ones not run), and the JSON exit_code the process's own.
func TestCaptureInterrupted(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			u := cmdtest.NewUserFiles(t, "sim.ufdb.txt")
			p := cmdtest.StartBinary(t, bin, u.Dir, u.Env(), "capture", "--backend", "sim", "--no-progress", "--verbose", "--format", "json", "--repeat", "1000")
			p.WaitForLine("miotool: case worker / global / same-thread: find on", time.Minute) // the first run
			p.WaitForLine("miotool: case worker / global / same-thread: find on", time.Minute) // the first run finished
			code, after, stdout := p.Signal(sig, time.Minute)
			want := 128 + int(sig)
			if code != want || after > 2*time.Second {
				t.Errorf("exit %d %s after the signal, want %d within 2s\nstderr:\n%s", code, after.Round(time.Millisecond), want, p.Stderr())
			}
			r := cmdtest.ParseResult(t, stdout)
			runs, stopped, notRun := r.Counters["runs"], r.Counters["interrupted"], r.Counters["not_run"]
			if r.Verdict != "INTERRUPTED" || r.ExitCode != code || runs < 1 || stopped > 1 || runs+stopped+notRun != 1000 {
				t.Errorf("verdict %s exit_code %d (process %d), runs %d, interrupted %d, not run %d; summary %q",
					r.Verdict, r.ExitCode, code, runs, stopped, notRun, r.Summary)
			}
			// What the finished runs showed follows (every run as expected,
			// unless a busy machine kept a find from abandoning naive).
			if !strings.HasPrefix(r.Status, "Interrupted (") || !strings.Contains(r.Summary, " not started; so far ") {
				t.Errorf("status %q summary %q", r.Status, r.Summary)
			}
		})
	}
}
