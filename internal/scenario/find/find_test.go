package find

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"miotool/internal/conv"
	"miotool/internal/finddb"
	"miotool/internal/finder"
	"miotool/internal/hip"
	"miotool/internal/hip/sim"
	"miotool/internal/streams"
)

var small = conv.Problem{N: 1, C: 4, H: 6, W: 6, K: 4, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}

func newSim(t *testing.T) *sim.Device {
	t.Helper()
	d, err := sim.New(hip.OpenOptions{Dialect: hip.DialectHIP, HWQueues: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func options(mode finder.Mode, dir string, warned *[]string) Options {
	return Options{Problem: small, Mode: mode, Samples: 1, Reclaim: streams.Worker, HWQueues: 4,
		NaiveTimeoutPct: 0, Seed: 1, DBDir: dir,
		Warnf: func(format string, args ...any) { *warned = append(*warned, fmt.Sprintf(format, args...)) }}
}

// The builtin TunaNet ranks miotool's own solvers, so fast mode's fallback
// has something to choose from.
func TestTunaNetRankingNamesMiotoolsSolvers(t *testing.T) {
	names, err := TunaNetRanking(small)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range conv.Solvers() {
		found := false
		for _, n := range names {
			found = found || n == s.Name
		}
		if !found {
			t.Errorf("ranking %v lacks %s", names, s.Name)
		}
	}
}

// End to end on the simulator: a normal find merges into a user db full of
// MIOpen's lines and garbage, keeping every other byte of it (the cut-off
// last line stays cut off: nothing is appended after it); a fast find of a
// key that names only MIOpen's solvers falls back to TunaNet, says so,
// and writes nothing.
func TestRunKeepsTheUserDBAndFallsBack(t *testing.T) {
	d := newSim(t)
	dir := t.TempDir()
	props := d.Props()
	file := finddb.UserFile(dir, props.Arch, props.ComputeUnits, props.Backend)
	miopen := small.Key() + "=GemmFwd1x1_0_1:0.0516391234,0,miopenConvolutionFwdAlgoGEMM;ConvBinWinogradRxSf3x2:0.103077,0,miopenConvolutionFwdAlgoWinograd\r\n"
	orig := "# kept\r\n" + miopen + "garbage line\r\nk=X:1,0,x\r\ncut-off"
	if err := os.WriteFile(file, []byte(orig), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}

	var warned []string
	o := options(finder.ModeFast, dir, &warned)
	out, err := Run(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	res := out.Result
	if !res.Immediate || !res.Verified || res.DBWritten || len(res.Entries) != 1 {
		t.Fatalf("fast miss: %+v", res)
	}
	want := "find-db: 2 entries for this key, none for miotool's solvers: immediate-mode fallback chose " + res.Chosen
	if !strings.HasPrefix(res.Warnings[len(res.Warnings)-1], want) || len(warned) != len(res.Warnings) {
		t.Fatalf("warnings %q, want one starting %q", res.Warnings, want)
	}
	if got, _ := os.ReadFile(file); string(got) != orig {
		t.Fatalf("fast mode changed the db: %q", got)
	}

	warned = nil
	o = options(finder.ModeNormal, dir, &warned)
	out, err = Run(context.Background(), d, o)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Result.DBWritten || out.Result.DBErr != nil {
		t.Fatalf("normal find did not write: %+v", out.Result)
	}
	got, _ := os.ReadFile(file)
	lines := strings.SplitAfter(string(got), "\n")
	origLines := strings.SplitAfter(orig, "\n")
	if len(lines) != len(origLines) {
		t.Fatalf("want as many lines as before: %q", got)
	}
	for i, l := range origLines {
		switch {
		case i == 1: // MIOpen's line: its items as they were, then miotool's
			if !strings.HasPrefix(lines[i], strings.TrimSuffix(l, "\r\n")+";") || !strings.HasSuffix(lines[i], "\r\n") {
				t.Errorf("shared key's line: %q", lines[i])
			}
		case lines[i] != l:
			t.Errorf("line %d: %q, was %q", i+1, lines[i], l)
		}
	}
	if info, _ := os.Stat(file); info.Mode().Perm() != 0o640 {
		t.Errorf("mode %04o, want 0640", info.Mode().Perm())
	}
	if len(warned) == 0 || !strings.Contains(strings.Join(warned, "\n"), "garbage") && !strings.Contains(strings.Join(warned, "\n"), "not a KEY") {
		t.Errorf("the garbage line was not warned about: %q", warned)
	}
}

// A db folder that cannot be written costs a warning, not the result.
func TestRunWithAnUnwritableDB(t *testing.T) {
	d := newSim(t)
	var warned []string
	o := options(finder.ModeNormal, "/proc/self/miotool-db", &warned)
	out, err := Run(context.Background(), d, o)
	if err != nil {
		t.Fatalf("a db error failed the find: %v", err)
	}
	res := out.Result
	if res.Chosen == "" || !res.Verified || res.DBErr == nil || !strings.Contains(strings.Join(res.Warnings, "\n"), "find-db not written") || len(warned) != 1 {
		t.Fatalf("chosen %q verified %v, db error %v, warned %q, warnings %q", res.Chosen, res.Verified, res.DBErr, warned, res.Warnings)
	}
	if filepath.IsAbs(out.DBFile) != true {
		t.Errorf("db file %q", out.DBFile)
	}
}
