package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
)

// fileState is what the user sees of a file or a folder's files: bytes,
// mode and inode, by name.
type fileState map[string]string

func stateOf(t *testing.T, paths ...string) fileState {
	t.Helper()
	st := fileState{}
	var add func(p string)
	add = func(p string) {
		info, err := os.Lstat(p)
		if err != nil {
			st[p] = "missing"
			return
		}
		sys, _ := info.Sys().(*syscall.Stat_t)
		var ino uint64
		if sys != nil {
			ino = sys.Ino
		}
		if info.IsDir() {
			st[p] = fmt.Sprintf("dir %v ino %d", info.Mode(), ino)
			entries, err := os.ReadDir(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				add(filepath.Join(p, e.Name()))
			}
			return
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		st[p] = fmt.Sprintf("%v ino %d %q", info.Mode(), ino, data)
	}
	for _, p := range paths {
		add(p)
	}
	return st
}

func (s fileState) diff(after fileState) string {
	var out []string
	for p, v := range s {
		if after[p] != v {
			out = append(out, fmt.Sprintf("%s: %s -> %s", p, v, after[p]))
		}
	}
	for p, v := range after {
		if _, ok := s[p]; !ok {
			out = append(out, fmt.Sprintf("%s: new, %s", p, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// userEnv is the environment of a user whose find-db is db.
func userEnv(home, db string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"MIOPEN_USER_DB_PATH=" + db, "GORACE=atexit_sleep_ms=0"}
}

// A small find on the simulator: quick, and it writes its record.
const smallFind = "miotool find --backend sim -n 1 -c 2 -H 3 -W 3 -k 2 -y 1 -x 1 --samples 1"

// report --suite as the user runs it, by the built binary: what a suite
// file may not ask for is refused before anything runs (exit 2, the file,
// line and command on the first line of stderr, the suite file and the
// user's find-db unchanged by bytes, mode and inode); a suite's find runs
// on a scratch find-db unless the file asks for the user's; a --repeat no
// suite run could finish is refused with its bound.
func TestSuiteAsTheUserRunsIt(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, tc := range []struct {
		name   string
		suite  string
		flags  []string
		env    []string // beside the user's
		config string   // a config file the report is given
		code   int
		stderr string // the first line of stderr contains it
		dbSame bool   // the user's find-db folder is unchanged
	}{
		{name: "ls", suite: "checks:\n  - name: a\n    command: ls -l\n    expect: PASS\n", code: 2,
			stderr: "S.yaml:3: check \"a\": command `miotool ls -l`: ls is not a miotool command", dbSame: true},
		{name: "version", suite: "checks:\n  - name: a\n    command: miotool version\n    expect: PASS\n", code: 2,
			stderr: "S.yaml:3: check \"a\": command `miotool version`: version prints no result to check", dbSame: true},
		{name: "help", suite: "checks:\n  - name: a\n    command: miotool help\n    expect: PASS\n", code: 2, stderr: "help prints no result", dbSame: true},
		{name: "unknown", suite: "checks:\n  - name: a\n    command: miotool frobnicate\n    expect: PASS\n", code: 2, stderr: "frobnicate is not a miotool command", dbSame: true},
		{name: "true", suite: "checks:\n  - name: a\n    command: \"true\"\n    expect: PASS\n", code: 2, stderr: "S.yaml:3: check \"a\": command `miotool true`", dbSame: true},
		{name: "another binary", suite: "checks:\n  - name: a\n    command: /opt/miotool-1.0/bin/miotool capture --mode=global\n    expect: PASS\n", code: 2,
			stderr: "S.yaml:3: check \"a\": command: /opt/miotool-1.0/bin/miotool: suites run this miotool; write `miotool capture --mode=global`", dbSame: true},
		{name: "a program", suite: "checks:\n  - name: a\n    command: miotool trace -- /bin/sh -c 'echo hi'\n    expect: PASS\n", code: 2,
			stderr: "S.yaml:3: check \"a\": runs the program /bin/sh", dbSame: true},
		{name: "programs allowed by a variable", suite: "checks:\n  - name: a\n    command: miotool trace -- /bin/true\n    expect: PASS\n",
			env: []string{"MIOTOOL_REPORT_ALLOW_PROGRAMS=true"}, code: 2, stderr: "runs the program /bin/true", dbSame: true},
		{name: "programs allowed by a config file", suite: "checks:\n  - name: a\n    command: miotool trace -- /bin/true\n    expect: PASS\n",
			config: "report:\n  allow-programs: true\n", code: 2, stderr: `unknown key "report.allow-programs"`, dbSame: true},
		{name: "the user's db set by the suite", suite: "checks:\n  - name: a\n    command: " + smallFind + "\n    expect: PASS\n    env: {MIOPEN_USER_DB_PATH: /tmp}\n", code: 2,
			stderr: "S.yaml:5: check \"a\": env: MIOPEN_USER_DB_PATH: a suite does not choose where find writes", dbSame: true},
		{name: "repeat past the bound", suite: "checks:\n  - name: a\n    command: " + smallFind + "\n    expect: PASS\n", flags: []string{"--repeat", "1000000000"}, code: 2,
			stderr: "--repeat 1000000000: want at most 10000 runs of each check", dbSame: true},
		{name: "repeat times checks past the bound", suite: "checks:\n  - name: a\n    command: " + smallFind + "\n    expect: PASS\n  - name: b\n    command: miotool doctor\n    expect: PASS\n",
			flags: []string{"--repeat", "6000"}, code: 2, stderr: "would make 12000 runs (2 checks x 6000 x 1 environment), more than the 10000", dbSame: true},
		{name: "bad jobs", suite: "checks:\n  - name: a\n    command: miotool doctor\n    expect: PASS\n", flags: []string{"--jobs", "-1"}, code: 2, stderr: "--jobs -1: want 1 or more", dbSame: true},
		{name: "find on a scratch db", suite: "checks:\n  - name: a\n    command: " + smallFind + "\n    expect: PASS\n    env: {MIOPEN_NAIVE_TIMEOUT: \"0\"}\n", code: -1, dbSame: true},
		{name: "find on the user's db", suite: "find-db: user\nchecks:\n  - name: a\n    command: " + smallFind + "\n    expect: PASS\n    env: {MIOPEN_NAIVE_TIMEOUT: \"0\"}\n", code: -1, dbSame: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			suitePath := filepath.Join(dir, "S.yaml")
			if err := os.WriteFile(suitePath, []byte(tc.suite), 0o640); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(dir, "db")
			if err := os.Mkdir(db, 0o750); err != nil {
				t.Fatal(err)
			}
			mine := filepath.Join(db, "sim_mine.SIM.ufdb.txt")
			if err := os.WriteFile(mine, []byte("# my records\nk=A:1,0,x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"report", "--suite", suitePath, "--format", "json", "--no-progress"}, tc.flags...)
			if tc.config != "" {
				cfg := filepath.Join(dir, "miotool.yaml")
				if err := os.WriteFile(cfg, []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", cfg)
			}
			before := stateOf(t, suitePath, db)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, args...)
			tmp := filepath.Join(dir, "tmp")
			if err := os.Mkdir(tmp, 0o700); err != nil {
				t.Fatal(err)
			}
			cmd.Env = append(append(userEnv(dir, db), "TMPDIR="+tmp), tc.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			var ee *exec.ExitError
			code := 0
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.code >= 0 && code != tc.code {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", code, tc.code, stderr.String())
			}
			// The first line that is not a warning (an unread MIOTOOL_*
			// variable is warned of first) says why.
			first := ""
			for _, l := range strings.Split(stderr.String(), "\n") {
				if !strings.HasPrefix(l, "miotool: warning: ") {
					first = l
					break
				}
			}
			if tc.stderr != "" && !strings.Contains(first, tc.stderr) {
				t.Errorf("first line of stderr %q, want it to contain %q\n%s", first, tc.stderr, stderr.String())
			}
			if tc.code == 2 && (stdout.Len() != 0 || time.Since(start) > 30*time.Second) {
				t.Errorf("a refused suite printed %d bytes and took %v", stdout.Len(), time.Since(start))
			}
			after := stateOf(t, suitePath, db)
			if d := before.diff(after); (d == "") != tc.dbSame {
				t.Errorf("the user's files: unchanged %v, want %v\n%s\nstderr:\n%s", d == "", tc.dbSame, d, stderr.String())
			}
			if !tc.dbSame && !strings.Contains(before.diff(after), ".ufdb.txt: new") {
				t.Errorf("find-db: user wrote no record into the user's db:\n%s", before.diff(after))
			}
			if sp := stateOf(t, suitePath); before[suitePath] != sp[suitePath] {
				t.Errorf("the suite file changed: %s -> %s", before[suitePath], sp[suitePath])
			}
			if tc.dbSame {
				// No scratch folder is left, nor a lock file MIOpen's
				// locking made for a file in it.
				left := stateOf(t, tmp)
				delete(left, tmp)
				delete(left, filepath.Join(tmp, "miopen-lockfiles"))
				if len(left) > 0 {
					t.Errorf("left in TMPDIR: %v", left)
				}
			}
			if tc.code < 0 {
				var doc struct {
					Notes  []string `json:"notes"`
					Checks []struct {
						Runs []struct{ Summary string } `json:"runs"`
					} `json:"checks"`
				}
				if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
					t.Fatalf("result: %v\n%s", err, stdout.String())
				}
				want := "on a scratch find-db"
				if !tc.dbSame {
					want = "on your find-db"
				}
				if !slices.ContainsFunc(doc.Notes, func(n string) bool { return strings.Contains(n, want) }) {
					t.Errorf("notes %q, want one saying %q", doc.Notes, want)
				}
			}
		})
	}
}

// lockedBuffer is a buffer a process writes into while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gatedSuite is a suite whose second check blocks reading its config file,
// a FIFO: opening the FIFO for writing returns once that check runs.
func gatedSuite(t *testing.T, dir string, before string) (suitePath, fifo string) {
	t.Helper()
	fifo = filepath.Join(dir, "gate.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	suitePath = filepath.Join(dir, "S.yaml")
	body := "checks:\n" + before +
		"  - name: gated\n    command: miotool doctor --config " + fifo + "\n    expect: PASS\n" +
		"  - name: later\n    command: miotool doctor\n    expect: PASS\n"
	if err := os.WriteFile(suitePath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return suitePath, fifo
}

// openGate opens fifo for writing, which returns once the gated check has
// opened it to read its config: that check is running. The FIFO is kept
// open, without a byte written, so the check stays blocked on it.
func openGate(t *testing.T, fifo string) *os.File {
	t.Helper()
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			f = nil
		}
		opened <- f
	}()
	select {
	case f := <-opened:
		if f == nil {
			t.FailNow()
		}
		t.Cleanup(func() { f.Close() })
		return f
	case <-time.After(2 * time.Minute):
		// Release the opener, then fail: the gated check never ran.
		if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			r.Close()
		}
		t.Fatal("the gated check never opened its config file")
		return nil
	}
}

// After SIGINT or SIGTERM, report exits 130 or 143 within 2 s, and its
// JSON result says the same exit code, with the check that was running
// interrupted and the one after it never started.
func TestSuiteInterruptedBySignal(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{
		{syscall.SIGINT, 130},
		{syscall.SIGTERM, 143},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			suitePath, fifo := gatedSuite(t, dir, "  - name: first\n    command: miotool doctor\n    expect: PASS\n")
			cmd := exec.Command(bin, "report", "--suite", suitePath, "--format", "json", "--no-progress", "--jobs", "1")
			cmd.Env = userEnv(dir, filepath.Join(dir, "db"))
			var stdout, stderr lockedBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-waited
			})
			openGate(t, fifo)
			sent := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-waited:
				waited <- err // for the clean-up
			case <-time.After(30 * time.Second):
				t.Fatalf("report still running 30 s after %v\nstderr:\n%s", tc.sig, stderr.String())
			}
			if took := time.Since(sent); took > 2*time.Second {
				t.Errorf("report took %v to end after %v", took, tc.sig)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
				t.Fatalf("exit %v, want %d\nstderr:\n%s", err, tc.code, stderr.String())
			}
			var doc struct {
				Verdict  string `json:"verdict"`
				ExitCode int    `json:"exit_code"`
				Checks   []struct {
					Name    string `json:"name"`
					Outcome string `json:"outcome"`
				} `json:"checks"`
			}
			if err := json.NewDecoder(strings.NewReader(stdout.String())).Decode(&doc); err != nil {
				t.Fatalf("result: %v\n%s", err, stdout.String())
			}
			if doc.ExitCode != tc.code || doc.Verdict != "INTERRUPTED" {
				t.Errorf("the result says %s, exit_code %d; the process exited %d", doc.Verdict, doc.ExitCode, tc.code)
			}
			outcomes := []string{}
			for _, c := range doc.Checks {
				outcomes = append(outcomes, c.Name+" "+c.Outcome)
			}
			if want := []string{"first PASS", "gated INTERRUPTED", "later SKIP"}; !slices.Equal(outcomes, want) {
				t.Errorf("outcomes %q, want %q", outcomes, want)
			}
		})
	}
}

// A suite that runs a program runs only with --allow-programs, and then
// says which programs on stderr before its first check starts, and in the
// result's notes.
func TestAllowedProgramsAreListedFirst(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	traced := "  - name: traced\n    command: miotool trace -- /bin/echo hello\n    expect: PASS\n"
	suitePath, fifo := gatedSuite(t, dir, traced)
	cmd := exec.Command(bin, "report", "--suite", suitePath, "--format", "json", "--no-progress", "--jobs", "1", "--allow-programs")
	cmd.Env = userEnv(dir, filepath.Join(dir, "db"))
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-waited
	})
	gate := openGate(t, fifo)
	// The second check runs: the list was printed before the first.
	listed := stderr.String()
	want := []string{"runs other code than miotool's (allowed with --allow-programs):", `S.yaml:2: check "traced" runs /bin/echo hello`}
	for _, w := range want {
		if !strings.Contains(listed, w) {
			t.Errorf("stderr while the second check runs lacks %q:\n%s", w, listed)
		}
	}
	if _, err := io.WriteString(gate, "{}\n"); err != nil {
		t.Fatal(err)
	}
	gate.Close()
	select {
	case <-waited:
		waited <- nil
	case <-time.After(2 * time.Minute):
		t.Fatalf("report did not end\n%s", stderr.String())
	}
	var doc struct {
		Notes []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &doc); err != nil {
		t.Fatalf("result: %v\n%s", err, stdout.String())
	}
	if !slices.ContainsFunc(doc.Notes, func(n string) bool { return strings.Contains(n, `check "traced" runs /bin/echo hello`) }) {
		t.Errorf("notes %q lack the program", doc.Notes)
	}
}

// An ERROR row quotes what went wrong in the check, the error line the
// child printed, not the hint after it: in JSON runs[].summary, in the
// Markdown and in the JUnit <error>.
func TestErrorRowsSayTheCause(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	suitePath := filepath.Join(dir, "S.yaml")
	body := "checks:\n  - name: bad-flag\n    command: miotool doctor --bogus\n    expect: PASS\n" +
		"  - name: bad-variable\n    command: miotool find --backend sim\n    expect: PASS\n    env: {MIOPEN_NAIVE_TIMEOUT: \"2.5\"}\n"
	if err := os.WriteFile(suitePath, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	causes := map[string]string{"bad-flag": "miotool: unknown flag: --bogus", "bad-variable": `miotool: MIOPEN_NAIVE_TIMEOUT="2.5"`}
	hints := []string{"Run 'miotool", "Unset it or give a value"}
	run := func(format string, extra ...string) string {
		cmd := exec.Command(bin, append([]string{"report", "--suite", suitePath, "--format", format, "--no-progress"}, extra...)...)
		cmd.Env = userEnv(dir, filepath.Join(dir, "db"))
		out, err := cmd.Output()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want 1\n%s", err, out)
		}
		return string(out)
	}
	var doc struct {
		Checks []struct {
			Name string `json:"name"`
			Runs []struct {
				Verdict string `json:"verdict"`
				Summary string `json:"summary"`
			} `json:"runs"`
		} `json:"checks"`
	}
	junit := filepath.Join(dir, "r.xml")
	if err := json.Unmarshal([]byte(run("json", "--junit", junit)), &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Checks {
		r := c.Runs[0]
		if r.Verdict != "ERROR" || !strings.Contains(r.Summary, causes[c.Name]) {
			t.Errorf("%s: %s %q, want ERROR quoting %q", c.Name, r.Verdict, r.Summary, causes[c.Name])
		}
		for _, h := range hints {
			if strings.Contains(r.Summary, h) {
				t.Errorf("%s: the summary quotes the hint: %q", c.Name, r.Summary)
			}
		}
	}
	xml, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	md := run("markdown")
	for what, out := range map[string]string{"Markdown": md, "JUnit": string(xml)} {
		for name, cause := range causes {
			// Markdown escapes the quote marks of the cause.
			if cause = strings.ReplaceAll(cause, `"`, ""); !strings.Contains(strings.NewReplacer(`\"`, "", `"`, "", "&#34;", "", "&quot;", "").Replace(out), cause) {
				t.Errorf("%s lacks %s's cause %q:\n%s", what, name, cause, out)
			}
		}
	}
}
