//go:build unix

package find

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/configs"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/finddb"
)

// simDBName is the base name of the simulated device's user find-db.
func simDBName() string { return filepath.Base(finddb.UserFile("/", "sim", runtime.NumCPU(), "sim")) }

// Bad input, run as a user would with the built binary: the documented
// exit status, a first stderr line that says what is wrong, and the
// user's config and find-db unchanged by bytes, mode and inode. The runs
// that are refused allocate nothing; the ones that run with a check that
// cannot hold say ERROR, "precondition did not hold", on a scratch db.
func TestFindBadInput(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	huge := []string{"-n", "2", "-c", "256", "-H", "1024", "-W", "1024", "-k", "256"}
	for _, tt := range []struct {
		name  string
		args  []string
		env   []string
		code  int
		first string // the first stderr line starts with it
	}{
		{"zero samples", []string{"--samples", "0"}, nil, 2, "miotool: --samples 0: want 1 to 1000"},
		{"negative samples", []string{"--samples", "-3"}, nil, 2, "miotool: --samples -3: want 1 to 1000"},
		{"samples past the bound", []string{"--samples", "1001"}, nil, 2, "miotool: --samples 1001: want 1 to 1000"},
		{"zero batch", []string{"-n", "0"}, nil, 2, "miotool: problem naive-long-sim with -n 0: invalid problem: batchsize (N) must be >= 1, got 0"},
		{"negative batch", []string{"-n", "-1"}, nil, 2, "miotool: problem naive-long-sim with -n -1: invalid problem: batchsize (N) must be >= 1"},
		{"batch not a number", []string{"-n", "abc"}, nil, 2, `miotool: invalid argument "abc" for "-n, --batchsize" flag`},
		{"zero stride", []string{"-u", "0"}, nil, 2, "miotool: problem naive-long-sim with -u 0: invalid problem: stride_h must be >= 1"},
		{"groups that do not divide", []string{"-c", "6", "-g", "4"}, nil, 2, "miotool: problem naive-long-sim with -c 6 -g 4: invalid problem: in_channels (C=6) must be divisible"},
		{"filter past the input", []string{"-H", "1", "-y", "5", "-p", "0"}, nil, 2, "miotool: problem naive-long-sim with -H 1 -y 5 -p 0: invalid problem: output height"},
		{"unknown problem", []string{"--problem", "nope"}, nil, 2, `miotool: --problem: no problem named "nope"`},
		{"missing problems file", []string{"--problems", "/nonexistent/p.yaml", "--problem", "x"}, nil, 2, "miotool: --problem: open /nonexistent/p.yaml"},
		{"larger than the device", huge, nil, 2, "miotool: problem naive-long-sim with -n 2 -c 256 -H 1024 -W 1024 -k 256: the problem does not fit the device: it needs 6 GiB"},
		{"unknown find mode", []string{"--find-mode", "sideways"}, nil, 2, `miotool: --find-mode: unknown find mode "sideways"`},
		{"unknown MIOPEN_FIND_MODE", nil, []string{"MIOPEN_FIND_MODE=bogus"}, 2, `miotool: MIOPEN_FIND_MODE="bogus" is not a find mode`},
		{"unparseable naive timeout", nil, []string{"MIOPEN_NAIVE_TIMEOUT=abc"}, 2, "miotool: MIOPEN_NAIVE_TIMEOUT"},
		{"negative naive timeout", nil, []string{"MIOPEN_NAIVE_TIMEOUT=-5"}, 2, "miotool: MIOPEN_NAIVE_TIMEOUT"},
		{"unknown policy", []string{"--reclaim", "sometimes"}, nil, 2, `miotool: invalid argument "sometimes" for "--reclaim" flag`},
		{"an argument", []string{"extra"}, nil, 2, `miotool: unknown command "extra" for "miotool find"`},
		{"unknown flag", []string{"--bogus"}, nil, 2, "miotool: unknown flag: --bogus"},
		{"precondition: naive timeout off", []string{"--problem", "naive-timeout-sim", "--samples", "1", "--require-abandoned"}, []string{"MIOPEN_NAIVE_TIMEOUT=0", "scratch-db"}, 3,
			"miotool: find: ERROR: precondition did not hold: the naive evaluation had no deadline: the naive timeout is off (MIOPEN_NAIVE_TIMEOUT=0), so naive ran to its end and was timed in full; the time bound was not tested"},
		{"precondition: fast mode", []string{"--problem", "naive-timeout-sim", "--samples", "1", "--require-abandoned"}, []string{"MIOPEN_FIND_MODE=FAST", "scratch-db"}, 3,
			"miotool: find: ERROR: precondition did not hold: the naive evaluation did not run: the immediate-mode heuristic chose the solver"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := cmdtest.NewUserFiles(t, simDBName())
			env := u.Env()
			for _, e := range tt.env {
				if e == "scratch-db" { // a run that finds: not on the user's db
					e = "MIOPEN_USER_DB_PATH=" + t.TempDir()
				}
				env = append(env, e)
			}
			before := cmdtest.Snapshot(t, u.Files()...)
			args := append([]string{"find", "--backend", "sim", "--no-progress"}, tt.args...)
			ran := cmdtest.RunBinary(t, bin, u.Dir, env, time.Minute, args...)
			code, stderr := ran.Code, ran.Stderr
			line := cmdtest.FirstLine(stderr)
			if code == 3 { // a run that finds may warn first: the verdict's line is the last
				line = cmdtest.LastLine(stderr)
			}
			if code != tt.code || !strings.HasPrefix(line, tt.first) {
				t.Errorf("exit %d, stderr line %q; want %d and a line starting %q\nstderr:\n%s", code, line, tt.code, tt.first, stderr)
			}
			if strings.Contains(stderr, "goroutine ") {
				t.Errorf("a stack trace:\n%s", stderr)
			}
			cmdtest.Unchanged(t, "the user's files", before)
			if code == 2 { // refused before anything ran: not even a lock file
				u.CheckNoLockFiles(t)
			}
		})
	}
}

// SIGINT or SIGTERM during find: exit 130 or 143 within 2 s, an
// INTERRUPTED result holding the solvers measured so far, and the JSON
// exit_code the process's own. Naive is timed in full (a second a run on
// the simulator), so the signal, sent once the first solver is timed,
// comes while find runs.
func TestFindInterrupted(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			u := cmdtest.NewUserFiles(t, simDBName())
			before := cmdtest.Snapshot(t, u.Files()...)
			p := cmdtest.StartBinary(t, bin, u.Dir, u.Env("MIOPEN_NAIVE_TIMEOUT=0"),
				"find", "--backend", "sim", "--no-progress", "--verbose", "--format", "json", "--samples", "20")
			p.WaitForLine("miotool: ConvImplicitGemmTiledFwd:", time.Minute)
			code, after, stdout := p.Signal(sig, time.Minute)
			want := 128 + int(sig)
			if code != want || after > 2*time.Second {
				t.Errorf("exit %d %s after the signal, want %d within 2s\nstderr:\n%s", code, after.Round(time.Millisecond), want, p.Stderr())
			}
			r := cmdtest.ParseResult(t, stdout)
			if r.Verdict != "INTERRUPTED" || r.ExitCode != code || !strings.HasPrefix(r.Summary, "interrupted by "+sigName(sig)+": ") {
				t.Errorf("verdict %s, exit_code %d (process %d), summary %q", r.Verdict, r.ExitCode, code, r.Summary)
			}
			rows := map[string][]string{}
			for _, row := range r.Tables[0].Rows {
				rows[row.Cells[1]] = row.Cells
			}
			// The tiled solver was timed before the signal: its time stays
			// (ok, or interrupted while its output was checked).
			if tiled := rows["ConvImplicitGemmTiledFwd"]; tiled == nil || tiled[3] == "-" {
				t.Errorf("the timed solver's row lost its time: %q", tiled)
			}
			if naive := rows["ConvDirectNaiveConvFwd"]; naive == nil || naive[5] != "interrupted" && naive[5] != "not run" {
				t.Errorf("naive's row: %q", naive)
			}
			cmdtest.Unchanged(t, "the user's files", before) // an interrupted find writes no record
			u.CheckNoLockFiles(t)
		})
	}
}

// The verdict is said before the teardown that waits for the abandoned
// naive evaluation (on stderr, text), and a signal during that wait ends
// the run within 2 s: the result says INTERRUPTED, with the find's own
// verdict in its summary, and (JSON) the process's exit code.
func TestFindVerdictBeforeTeardown(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	// Naive runs for seconds here; its deadline is 10% of the tiled time.
	problem := []string{"-n", "16", "-c", "64", "-H", "56", "-W", "56", "-k", "64", "--samples", "1"}
	for _, tt := range []struct {
		format, waitFor string
		sig             syscall.Signal
	}{
		{"text", "; the result follows the teardown, which waits for the abandoned naive evaluation", syscall.SIGINT},
		{"json", "miotool: ConvDirectNaiveConvFwd: exceeded 10% of the best time", syscall.SIGTERM},
	} {
		t.Run(tt.format, func(t *testing.T) {
			u := cmdtest.NewUserFiles(t, simDBName())
			env := u.Env("MIOPEN_USER_DB_PATH=" + t.TempDir())
			p := cmdtest.StartBinary(t, bin, u.Dir, env, append([]string{"find", "--backend", "sim", "--no-progress", "--verbose", "--format", tt.format}, problem...)...)
			p.WaitForLine(tt.waitFor, time.Minute)
			code, after, stdout := p.Signal(tt.sig, time.Minute)
			want := 128 + int(tt.sig)
			if code != want || after > 2*time.Second {
				t.Errorf("exit %d %s after the signal, want %d within 2s\nstderr:\n%s", code, after.Round(time.Millisecond), want, p.Stderr())
			}
			out := stdout
			// find's own verdict is PASS, or FAIL on a machine busy enough
			// to delay it past its bound; the teardown's interruption is
			// what is checked.
			during := "interrupted by " + sigName(tt.sig) + " during the teardown that waits for the abandoned naive evaluation: 1 of 1 find finished; so far find had finished: "
			if tt.format == "text" {
				if !strings.HasPrefix(out, "find: INTERRUPTED - "+during) {
					t.Errorf("stdout:\n%s", out)
				}
				return
			}
			r := cmdtest.ParseResult(t, out)
			if r.Verdict != "INTERRUPTED" || r.ExitCode != code || !strings.HasPrefix(r.Summary, during) {
				t.Errorf("verdict %s exit_code %d (process %d) summary %q", r.Verdict, r.ExitCode, code, r.Summary)
			}
			if strings.Contains(p.Stderr(), "; the result follows the teardown") {
				t.Errorf("a JSON run said its verdict on stderr:\n%s", p.Stderr())
			}
		})
	}
}

func sigName(sig syscall.Signal) string {
	return map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[sig]
}

// Without a signal the verdict said on stderr is followed by the result
// with the teardown's figures, and the db gets its record. (The verdict
// itself may be FAIL on a machine busy enough to delay find past its
// bound: what is checked is that it comes first, and what follows.)
func TestFindTeardownFiguresFollowTheVerdict(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	u := cmdtest.NewUserFiles(t, simDBName())
	db := t.TempDir()
	ran := cmdtest.RunBinary(t, bin, u.Dir, u.Env("MIOPEN_USER_DB_PATH="+db), time.Minute,
		"find", "--backend", "sim", "--no-progress", "-n", "8", "-c", "64", "-H", "56", "-W", "56", "-k", "64", "--samples", "1", "--require-abandoned")
	code, out, stderr := ran.Code, ran.Stdout, ran.Stderr
	if code != 0 && code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	verdict := strings.SplitN(cmdtest.FirstLine(out), " - ", 2)[0] // "find: PASS"
	if !strings.HasPrefix(stderr, "miotool: "+verdict+" - ") || !strings.Contains(stderr, "; the result follows the teardown, which waits for the abandoned naive evaluation\n") {
		t.Errorf("the verdict (%s) was not said before the teardown:\n%s", verdict, stderr)
	}
	for _, want := range []string{"counter                   after find  after teardown", "teardown (waits for abandoned evaluations) took ",
		"the abandoned naive evaluation ran on for ", fmt.Sprintf("find-db record written to %s", db)} {
		if !strings.Contains(out, want) {
			t.Errorf("the result lacks %q:\n%s", want, out)
		}
	}
}

// A find-db lock another process holds: find says at once that it waits,
// for which lock and for how long at most, and goes on once the lock is
// let go; the result notes the wait.
func TestFindSaysItWaitsForTheDBLock(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	u := cmdtest.NewUserFiles(t, simDBName())
	lock := u.DB + ".lock"
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	p := cmdtest.StartBinary(t, bin, u.Dir, u.Env(), "find", "--backend", "sim", "--no-progress", "--problem", "naive-timeout-sim", "--samples", "1")
	p.WaitForLine("miotool: find-db: waiting for the find-db lock "+lock+" (miotool's), held by another writer, for at most 1m", time.Minute)
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	code, out := p.WaitExit(time.Minute)
	if code != 0 || !strings.Contains(out, "find-db: the write found the lock held and waited: waiting for the find-db lock "+lock) || !strings.Contains(out, "find-db record written to ") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, p.Stderr())
	}
}

// A malformed item of miotool's own solver on the problem's line is
// replaced where MIOpen reads it, and find says so on stderr and in the
// result; the user's other items and lines stay.
func TestFindSaysWhatItReplaced(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	u := cmdtest.NewUserFiles(t, simDBName())
	np, err := configs.Problem("", "naive-timeout-sim")
	if err != nil {
		t.Fatal(err)
	}
	key := np.Problem.Key()
	orig := "# mine\n" + key + "=ConvImplicitGemmTiledFwd:notanumber,0,x;Theirs:1,0,y\n"
	if err := os.WriteFile(u.DB, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	ran := cmdtest.RunBinary(t, bin, u.Dir, u.Env(), time.Minute, "find", "--backend", "sim", "--no-progress", "--problem", "naive-timeout-sim", "--samples", "1")
	code, out, stderr := ran.Code, ran.Stdout, ran.Stderr
	want := `find-db: replaced the malformed item "ConvImplicitGemmTiledFwd:notanumber,0,x"`
	if code != 0 || !strings.Contains(stderr, "miotool: warning: "+want) || !strings.Contains(out, want) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	got, _ := os.ReadFile(u.DB)
	if !strings.HasPrefix(string(got), "# mine\n"+key+"=ConvImplicitGemmTiledFwd:") || !strings.Contains(string(got), ";Theirs:1,0,y\n") || strings.Contains(string(got), "notanumber") {
		t.Errorf("db after the write:\n%s", got)
	}
}
