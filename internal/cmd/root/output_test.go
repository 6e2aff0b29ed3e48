//go:build linux

package root

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/report"
	"miotool/internal/testutil"
)

// processLimit bounds every wait on a started miotool: wide for a loaded
// machine, and a failure rather than a hang.
const processLimit = 60 * time.Second

// junitTotals are the counts a CI reads from a JUnit file: its root
// <testsuite>'s, and its cases.
type junitTotals struct {
	XMLName  xml.Name
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Skipped  int `xml:"skipped,attr"`
	Cases    []struct {
		Name string `xml:"name,attr"`
	} `xml:"testcase"`
}

func readJUnitFile(t *testing.T, path string) (junitTotals, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the JUnit file: %v", err)
	}
	var j junitTotals
	if err := xml.Unmarshal(data, &j); err != nil {
		t.Fatalf("%s is not JUnit XML: %v\n%s", path, err, data)
	}
	testutil.ValidateJUnit(t, data)
	return j, data
}

// The command of the issue: one capture run prints the text table and
// writes the JUnit file, one suite with one passing case, and the
// Markdown.
func TestCaptureWritesJUnitAndMarkdownBesideTheTable(t *testing.T) {
	h := cmdtest.New(t)
	h.F.LookupEnv = cmdtest.ScenarioEnv(nil)
	junit, md := filepath.Join(h.Dir, "c.xml"), filepath.Join(h.Dir, "c.md")
	if code := h.Run(New, "capture", "--backend", "sim", "--mode=global", "--reclaim=worker", "--junit", junit, "--export-markdown", md); code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	if out := h.Out.String(); !strings.HasPrefix(out, "capture") || !strings.Contains(out, "PASS") || strings.Contains(out, "| Test |") {
		t.Errorf("stdout is not the text table:\n%s", out)
	}
	j, doc := readJUnitFile(t, junit)
	if j.XMLName.Local != "testsuite" || j.Tests != 1 || j.Failures != 0 || j.Errors != 0 || len(j.Cases) != 1 {
		t.Errorf("JUnit %+v:\n%s", j, doc)
	}
	data, err := os.ReadFile(md)
	if err != nil || !bytes.Contains(data, []byte("#### Testing Checklist")) || !bytes.Contains(data, []byte("--reclaim=worker")) {
		t.Errorf("the Markdown: %v\n%s", err, data)
	}
}

// A runtime variable doctor shows as an error ends it with exit 2 after
// its report, and that report does not say PASS.
func TestDoctorWithARefusedVariablePrintsNoPass(t *testing.T) {
	h := cmdtest.New(t)
	h.F.LookupEnv = cmdtest.ScenarioEnv(map[string]string{"MIOPEN_NAIVE_TIMEOUT": "2.5"})
	if code := h.Run(New, "doctor", "--backend", "sim", "--format", "json"); code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, h.ErrOut)
	}
	r, err := report.ReadJSON(h.Out)
	if err != nil || r.Verdict == report.Pass || r.ExitCode() != 2 {
		t.Errorf("doctor's result: %v, verdict %s, exit_code %d", err, r.Verdict, r.ExitCode())
	}
}

// fileState is what a test compares of a file the run must not touch.
type fileState struct {
	data  []byte
	mode  os.FileMode
	inode uint64
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{data, info.Mode(), info.Sys().(*syscall.Stat_t).Ino}
}

// miotoolRun is one run of the built binary.
type miotoolRun struct {
	code           int
	stdout, stderr string
}

// The built binary, as a user's shell starts it: files named by flags are
// written whatever happens to stdout, a failed stdout write is exit 3 said
// on stderr, and an output that is an input is refused before anything
// runs.
func TestTheBinaryWritesItsFilesWhateverStdoutDoes(t *testing.T) {
	bin := cmdtest.BuildMiotool(t)
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "MIOPEN_NAIVE_TIMEOUT=10"}
	suiteFile := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(suiteFile, []byte(`suite: small
title: one quick check
checks:
  - name: capture-global-worker
    command: miotool capture --backend sim --mode=global --reclaim=worker
    expect: PASS
`), 0o640); err != nil {
		t.Fatal(err)
	}
	// run starts bin with args; stdout is "full" (/dev/full), "broken" (a
	// pipe whose reader has gone), "closed" (fd 1 closed, as >&- does)
	// or "" (a buffer).
	run := func(t *testing.T, stdout string, args ...string) miotoolRun {
		t.Helper()
		cmd := exec.Command(bin, args...)
		if stdout == "closed" {
			cmd = exec.Command("/bin/sh", append([]string{"-c", `exec "$0" "$@" >&-`, bin}, args...)...)
		}
		cmd.Dir, cmd.Env = dir, env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		switch stdout {
		case "full":
			f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Skip("no /dev/full here")
			}
			defer f.Close()
			cmd.Stdout = f
		case "broken":
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			defer w.Close()
			cmd.Stdout = w
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(processLimit):
			cmd.Process.Kill()
			<-done
			t.Fatalf("%v did not end within %v", args, processLimit)
		}
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return miotoolRun{code, out.String(), errOut.String()}
	}

	t.Run("help, version and completion to a full disk", func(t *testing.T) {
		for _, args := range [][]string{{"--help"}, {"capture", "--help"}, {"version"}, {"--version"}, {"completion", "bash"}} {
			r := run(t, "full", args...)
			if r.code != 3 || r.stderr != "miotool: writing to standard output: no space left on device\n" {
				t.Errorf("%v > /dev/full: exit %d, stderr %q", args, r.code, r.stderr)
			}
		}
	})
	for _, stdout := range []string{"full", "broken"} {
		t.Run("a suite's JUnit with stdout "+stdout, func(t *testing.T) {
			junit := filepath.Join(dir, "r-"+stdout+".xml")
			r := run(t, stdout, "report", "--suite", suiteFile, "--junit", junit)
			want := map[string]string{"full": "no space left on device", "broken": "broken pipe"}[stdout]
			if r.code != 3 || r.stderr != "miotool: writing to standard output: "+want+"\n" {
				t.Errorf("exit %d, stderr %q; want 3 and the lost output said", r.code, r.stderr)
			}
			if j, doc := readJUnitFile(t, junit); j.Tests != 1 || j.Failures+j.Errors != 0 {
				t.Errorf("JUnit %+v\n%s", j, doc)
			}
		})
		t.Run("a merge's JUnit with stdout "+stdout, func(t *testing.T) {
			result := filepath.Join(dir, "single-"+stdout+".json")
			if r := run(t, "", "capture", "--backend", "sim", "--mode=global", "--reclaim=worker", "--export-json", result); r.code != 0 {
				t.Fatalf("capture: exit %d: %s", r.code, r.stderr)
			}
			junit := filepath.Join(dir, "m-"+stdout+".xml")
			r := run(t, stdout, "report", "merge", result, "--junit", junit)
			if r.code != 3 || !strings.HasPrefix(r.stderr, "miotool: writing to standard output: ") {
				t.Errorf("exit %d, stderr %q", r.code, r.stderr)
			}
			if j, _ := readJUnitFile(t, junit); j.Tests != 1 {
				t.Errorf("JUnit %+v", j)
			}
		})
	}
	// Go's runtime opens /dev/null on a standard descriptor that is closed
	// at start, before miotool runs, so the closed stdout cannot be told
	// from a caller's /dev/null (Python's subprocess.DEVNULL and Node's
	// "ignore" open it the same way): the output is discarded as asked,
	// the files are written and the exit status is the check's.
	t.Run("stdout closed", func(t *testing.T) {
		junit := filepath.Join(dir, "closed.xml")
		r := run(t, "closed", "capture", "--backend", "sim", "--mode=global", "--reclaim=worker", "--junit", junit)
		if r.code != 0 || r.stderr != "" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
		if j, _ := readJUnitFile(t, junit); j.Tests != 1 || j.Failures+j.Errors != 0 {
			t.Errorf("JUnit %+v", j)
		}
	})
	t.Run("an output that is an input", func(t *testing.T) {
		result := filepath.Join(dir, "vm.json")
		if r := run(t, "", "capture", "--backend", "sim", "--mode=global", "--reclaim=worker", "--export-json", result); r.code != 0 {
			t.Fatalf("capture: exit %d: %s", r.code, r.stderr)
		}
		if err := os.Symlink("s.yaml", filepath.Join(dir, "alias.yaml")); err != nil {
			t.Fatal(err)
		}
		suiteBefore, resultBefore := stateOf(t, suiteFile), stateOf(t, result)
		for _, args := range [][]string{
			{"report", "--suite", suiteFile, "--junit", suiteFile},
			{"report", "--suite", "s.yaml", "--export-markdown", "./alias.yaml"},
			{"report", "--suite", suiteFile, "--export-json", filepath.Join(dir, "..", filepath.Base(dir), "s.yaml")},
			{"report", "merge", result, "--junit", result},
			{"report", "merge", result, "--export-json", "vm.json"},
		} {
			r := run(t, "", args...)
			if first, _, _ := strings.Cut(r.stderr, "\n"); r.code != 2 || !strings.Contains(first, "write the result to another file") {
				t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
			}
		}
		if after := stateOf(t, suiteFile); !bytes.Equal(after.data, suiteBefore.data) || after.mode != suiteBefore.mode || after.inode != suiteBefore.inode {
			t.Errorf("the suite file changed: %+v", after)
		}
		if after := stateOf(t, result); !bytes.Equal(after.data, resultBefore.data) || after.mode != resultBefore.mode || after.inode != resultBefore.inode {
			t.Errorf("the merged result changed")
		}
	})
	t.Run("SIGQUIT", func(t *testing.T) {
		cmd := exec.Command(bin, "rules", "--backend", "sim", "--action", "malloc", "--spin", "10s", "--verbose", "--no-progress")
		cmd.Dir, cmd.Env = dir, env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		// Its first verbose line comes after Main has set up its signals.
		lines := bufio.NewScanner(stderr)
		started := make(chan bool, 1)
		go func() { started <- lines.Scan() }()
		select {
		case ok := <-started:
			if !ok {
				t.Fatal("rules ended before it said anything")
			}
		case <-time.After(processLimit):
			t.Fatal("rules said nothing")
		}
		if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
			t.Fatal(err)
		}
		var rest strings.Builder
		for lines.Scan() {
			rest.WriteString(lines.Text() + "\n")
		}
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case err = <-waited:
		case <-time.After(processLimit):
			t.Fatal("SIGQUIT did not end rules")
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 131 {
			t.Errorf("SIGQUIT: %v, want exit 131", err)
		}
		if !strings.Contains(rest.String(), "miotool: quit by SIGQUIT; the goroutines were:\n\ngoroutine ") {
			t.Errorf("stderr after SIGQUIT: %.300q", rest.String())
		}
	})
}

// The exit_code a JSON result carries is the one the process exits with,
// for every exit a simulated run gives.
func TestJSONExitCodeIsTheProcesss(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
	}{
		{[]string{"capture", "--backend", "sim", "--mode=global", "--reclaim=worker"}, 0},
		{[]string{"capture", "--backend", "sim", "--mode=global", "--reclaim=lazy"}, 1},
	} {
		h := cmdtest.New(t)
		h.F.LookupEnv = cmdtest.ScenarioEnv(nil)
		code := h.Run(New, append(tt.args, "--format", "json")...)
		var doc struct {
			ExitCode int `json:"exit_code"`
		}
		if err := json.Unmarshal(h.Out.Bytes(), &doc); err != nil || code != tt.code || doc.ExitCode != code {
			t.Errorf("%v: exit %d (want %d), exit_code %d: %v", tt.args, code, tt.code, doc.ExitCode, err)
		}
	}
}
