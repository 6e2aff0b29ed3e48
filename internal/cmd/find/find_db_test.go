package find

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/finddb"
	"miotool/internal/finder"
	"miotool/internal/testutil"
)

// tree is a command tree with the find command.
var tree = cmdtest.Tree(func(f *cli.Factory) *cobra.Command { return NewCmdFind(f, nil) })

// simDBFile is the user find-db the simulated device uses in dir.
func simDBFile(dir string) string { return finddb.UserFile(dir, "sim", runtime.NumCPU(), "sim") }

// userDB is MIOpen's real gfx942 find-db with a user's garbage between its
// lines (a comment, a blank line, a record miotool cannot read, binary
// bytes), one CRLF line, and a last line cut off before its newline.
func userDB(t *testing.T, lines int) string {
	t.Helper()
	data, err := os.ReadFile(testutil.Shared(t, "miopen-db", "gfx942130.HIP.fdb.txt"))
	if err != nil {
		t.Fatal(err)
	}
	all := strings.SplitAfter(string(data), "\n")
	junk := []string{"# my notes=keep", "", "bad=A:notatime,0,x;B:1,0", "\x00\xfe binary", "dup=A:0.0516391234,0,x;A:2,0,y"}
	var b strings.Builder
	for i, l := range all[:min(lines, len(all))] {
		if i%(lines/5) == 1 {
			b.WriteString(junk[(i/(lines/5))%len(junk)] + "\n")
		}
		if i == 3 {
			l = strings.TrimSuffix(l, "\n") + "\r\n"
		}
		b.WriteString(l)
	}
	b.WriteString("cut=GemmFwd1x1_0_1:0.05,0,miopenConvolutionFwdAlgoGEMM;Conv")
	return b.String()
}

// Keys of the real sample that are forward FP32 problems small enough for
// the simulator; neither names a solver miotool has.
const (
	sharedSmall  = "512-4-4-1x1-1-4-4-30-0x0-1x1-1x1-0-NCHW-FP32-F"
	sharedSmall2 = "512-8-8-1x1-1-8-8-30-0x0-1x1-1x1-0-NCHW-FP32-F"
)

// checkKept fails unless every line of orig is in got, byte for byte and in
// order, where the line of changedKey may have gained items at its end and
// lines may have been appended.
func checkKept(t *testing.T, orig, got, changedKey string) {
	t.Helper()
	a, b := strings.SplitAfter(orig, "\n"), strings.SplitAfter(got, "\n")
	if len(b) < len(a) {
		t.Fatalf("the db lost lines: %d -> %d", len(a), len(b))
	}
	for i, l := range a {
		switch {
		case l == b[i]:
		case changedKey != "" && strings.HasPrefix(l, changedKey+"="):
			if !strings.HasPrefix(b[i], strings.TrimRight(l, "\r\n")+";") {
				t.Fatalf("line %d, MIOpen's record for %s, lost items:\n was %q\n now %q", i+1, changedKey, l, b[i])
			}
		case i == len(a)-1 && b[i] == l+"\n": // the cut-off line, once appended after
		default:
			t.Fatalf("line %d changed:\n was %q\n now %q", i+1, l, b[i])
		}
	}
}

// The case: MIOpen's find-db, garbage and all, as the user db of a
// normal find and of a fast find. Every original line stays, byte for byte
// and in order; MIOpen's items on the shared key stay; the mode stays.
func TestFindKeepsMIOpensFindDB(t *testing.T) {
	dir := t.TempDir()
	file := simDBFile(dir)
	orig := userDB(t, 9600)
	if err := os.WriteFile(file, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MIOPEN_USER_DB_PATH": dir}

	h := cmdtest.New(t)
	h.F.LookupEnv = cmdtest.ScenarioEnv(env)
	if code := h.Run(tree, "find", "--backend", "sim", "-n", "30", "-c", "512", "-H", "4", "-W", "4", "-k", "1", "-y", "1", "-x", "1", "-p", "0", "-q", "0", "--samples", "1", "--no-progress"); code != 0 {
		t.Fatalf("normal find: exit %d\n%s\n%s", code, h.Out, h.ErrOut)
	}
	got, _ := os.ReadFile(file)
	checkKept(t, orig, string(got), sharedSmall)
	db := finddb.Parse(file, got)
	rec, _ := db.Lookup(sharedSmall)
	if len(rec.Entries) < 5 || rec.Entries[0].Solver != "GemmFwd1x1_0_1" {
		t.Fatalf("shared key after the normal find: %+v", rec)
	}
	if !strings.Contains(h.ErrOut.String(), "miotool: warning: find-db: ") {
		t.Errorf("the garbage lines were not warned about on stderr:\n%s", h.ErrOut)
	}

	h = cmdtest.New(t)
	h.F.LookupEnv = cmdtest.ScenarioEnv(env)
	if code := h.Run(tree, "find", "--backend", "sim", "-n", "30", "-c", "512", "-H", "8", "-W", "8", "-k", "1", "-y", "1", "-x", "1", "-p", "0", "-q", "0", "--find-mode", "fast", "--no-progress"); code != 0 {
		t.Fatalf("fast find: exit %d\n%s\n%s", code, h.Out, h.ErrOut)
	}
	const said = "find-db: 4 entries for this key, none for miotool's solvers: immediate-mode fallback chose "
	if !strings.Contains(h.Out.String(), said) || !strings.Contains(h.ErrOut.String(), said) {
		t.Errorf("the fallback is not said on stdout and stderr:\n%s\n%s", h.Out, h.ErrOut)
	}
	again, _ := os.ReadFile(file)
	if !bytes.Equal(again, got) {
		t.Error("fast mode's immediate fallback wrote to the find-db")
	}
	if info, _ := os.Stat(file); info.Mode().Perm() != 0o644 {
		t.Errorf("mode %04o, want 0644", info.Mode().Perm())
	}
	if rec, _ := finddb.Parse(file, again).Lookup(sharedSmall2); len(rec.Entries) != 4 {
		t.Errorf("MIOpen's record for %s: %+v", sharedSmall2, rec)
	}
}

// A db that cannot be written, or a read-only db file, still prints the
// result in every format with exit 0, and says why on stderr and in the
// notes; a db folder that is a file is a usage error before any work.
func TestFindWithAFindDBItCannotWrite(t *testing.T) {
	readOnly := t.TempDir()
	roFile := simDBFile(readOnly)
	if err := os.WriteFile(roFile, []byte("k=A:1,0,x\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(roFile, 0o444); err != nil {
		t.Fatal(err)
	}
	aFile := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(aFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, dir string
		code      int
		why       string
	}{
		{"folder that cannot hold files", "/proc/self/miotool-db", 0, "find-db not written"},
		{"read-only file", readOnly, 0, "read-only"},
		{"a file, not a folder", aFile, 2, "not a folder"},
		{"a folder under a file", filepath.Join(aFile, "db"), 2, "not a folder"},
	} {
		for _, format := range []string{"text", "markdown", "json"} {
			t.Run(tt.name+"/"+format, func(t *testing.T) {
				h := cmdtest.New(t)
				h.F.LookupEnv = cmdtest.ScenarioEnv(map[string]string{"MIOPEN_USER_DB_PATH": tt.dir})
				code := h.Run(tree, "find", "--backend", "sim", "-n", "1", "-c", "2", "-H", "5", "-W", "5", "-k", "2", "-y", "1", "-x", "1", "-p", "0", "-q", "0", "--samples", "1", "--no-progress", "--format", format)
				if code != tt.code || !strings.Contains(h.ErrOut.String(), tt.why) {
					t.Fatalf("exit %d (want %d); stderr lacks %q?\n%s\n%s", code, tt.code, tt.why, h.Out, h.ErrOut)
				}
				if tt.code == 2 {
					if h.Out.Len() != 0 {
						t.Errorf("a usage error printed a result:\n%s", h.Out)
					}
					return
				}
				if !strings.Contains(h.Out.String(), "PASS") || !strings.Contains(h.Out.String(), tt.why) {
					t.Errorf("the result or its note is missing:\n%s", h.Out)
				}
			})
		}
	}
	if got, _ := os.ReadFile(roFile); string(got) != "k=A:1,0,x\n" {
		t.Errorf("the read-only db changed: %q", got)
	}
}

// Writers in separate processes: 8 at a time, 5 finds each on problems of
// their own, against one db that starts as MIOpen's find-db with garbage,
// while another writer is killed with SIGKILL at random moments. No entry
// is lost, no line is torn, every original line is kept, and the temporary
// file a killed writer leaves is gone after the next write.
func TestFindConcurrentWritersAndAKilledOne(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	file := simDBFile(dir)
	orig := userDB(t, 1000) // a tenth of it: each write re-reads the whole file
	if err := os.WriteFile(file, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	find := func(c, hgt int) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, "find", "--backend", "sim", "-n", "1", "-c", fmt.Sprint(c), "-H", fmt.Sprint(hgt), "-W", "3",
			"-k", "2", "-y", "1", "-x", "1", "-p", "0", "-q", "0", "--samples", "1", "--no-progress", "--format", "json")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TMPDIR=" + os.Getenv("TMPDIR"), "MIOPEN_USER_DB_PATH=" + dir, "MIOPEN_NAIVE_TIMEOUT=0"}
		return cmd
	}
	const writers, finds = 8, 5
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		keys []string
		errs []string
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range finds {
				hgt := 3 + w*finds + j
				out, err := find(2, hgt).CombinedOutput()
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("writer %d find %d: %v\n%s", w, j, err, out))
				}
				keys = append(keys, fmt.Sprintf("2-%d-3-1x1-2-%d-3-1-0x0-1x1-1x1-0-NCHW-FP32-F", hgt, hgt))
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// The killed writer: each run is killed after a random time (the fault
	// injected, not a wait for anything), then the next starts, while the
	// others write, up to maxKills times.
	const maxKills = 15
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	kills := 0
	for running := true; running && kills < maxKills; {
		select {
		case <-done:
			running = false
			continue
		default:
		}
		cmd := find(3, 100+kills)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		kills++
	}
	<-done
	t.Logf("%d writer runs killed (seed %d)", kills, seed)
	for _, e := range errs {
		t.Error(e)
	}
	// One more write, so a killed writer's temporary file has a next writer.
	if out, err := find(4, 3).CombinedOutput(); err != nil {
		t.Fatalf("last find: %v\n%s", err, out)
	}

	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	prefix := orig + "\n" // the cut-off last line gets its newline once appended after
	if !strings.HasPrefix(string(got), prefix) {
		checkKept(t, orig, string(got), "")
		t.Fatal("the original lines are not all at the start, unchanged")
	}
	tail := finddb.Parse(file, got[len(prefix):])
	if len(tail.Warnings) != 0 || !bytes.HasSuffix(got, []byte("\n")) {
		t.Fatalf("torn or duplicate lines after the original ones: %v", tail.Warnings)
	}
	for _, k := range keys {
		if rec, ok := tail.Lookup(k); !ok || len(rec.Entries) == 0 {
			t.Errorf("entry for %s lost", k)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*tmp*"))
	if len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	if info, _ := os.Stat(file); info.Mode().Perm() != 0o644 {
		t.Errorf("mode %04o, want 0644", info.Mode().Perm())
	}
}

// MIOPEN_FIND_MODE gives find its mode, each of MIOpen's to its own; the
// flag wins over it.
func TestFindModeFromTheEnvironment(t *testing.T) {
	for _, tt := range []struct {
		env  string
		args []string
		want finder.Mode
	}{
		{"", nil, finder.ModeNormal},
		{"NORMAL", nil, finder.ModeNormal},
		{"FAST", nil, finder.ModeFast},
		{"hybrid", nil, finder.ModeHybrid},
		{"5", nil, finder.ModeDynamicHybrid},
		{"FAST", []string{"--find-mode", "dynamic-hybrid"}, finder.ModeDynamicHybrid},
		{"3", []string{"--find-mode", "normal"}, finder.ModeNormal},
	} {
		h := cmdtest.New(t)
		env := map[string]string{}
		if tt.env != "" {
			env["MIOPEN_FIND_MODE"] = tt.env
		}
		h.F.LookupEnv = cmdtest.ScenarioEnv(env)
		var got finder.Mode
		code := cli.Main(h.F, append([]string{"find", "--backend", "sim"}, tt.args...), func(f *cli.Factory) *cobra.Command {
			root := cli.NewRootCmd(f)
			root.AddCommand(NewCmdFind(f, func(o *FindOptions) error {
				got, _ = finder.ParseMode(o.FindMode)
				return nil
			}))
			return root
		})
		if code != 0 || got != tt.want {
			t.Errorf("MIOPEN_FIND_MODE=%q %v: exit %d, mode %q, want %q\n%s", tt.env, tt.args, code, got, tt.want, h.ErrOut)
		}
	}
}
