package root

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/cmd/genman"
	"miotool/internal/testutil"
)

func TestCompletionScripts(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "__start_miotool", "zsh": "#compdef miotool", "fish": "complete -c miotool"} {
		h := cmdtest.New(t)
		if code := h.Run(New, "completion", shell); code != 0 {
			t.Fatalf("%s: exit %d: %s", shell, code, h.ErrOut)
		}
		if !strings.Contains(h.Out.String(), marker) {
			t.Errorf("%s completion lacks %q", shell, marker)
		}
	}
	// The scripts ask the binary itself; it must answer with the commands.
	h := cmdtest.New(t)
	if code := h.Run(New, "__complete", "rep"); code != 0 {
		t.Fatalf("__complete: exit %d: %s", code, h.ErrOut)
	}
	if !strings.Contains(h.Out.String(), "report\t") {
		t.Errorf("completing 'rep' does not offer report:\n%s", h.Out)
	}
}

// A shell completion has no script for is a usage error.
func TestCompletionRefusesAnUnknownShell(t *testing.T) {
	h := cmdtest.New(t)
	if code := h.Run(New, "completion", "tcsh"); code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, h.ErrOut)
	}
	lines := strings.Split(strings.TrimSuffix(h.ErrOut.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `invalid argument "tcsh"`) || lines[1] != "Run 'miotool completion --help' for usage." {
		t.Errorf("stderr is not one line about the shell plus a hint:\n%s", h.ErrOut)
	}
}

// man/ is what scripts/gen-man.sh writes from the current command tree.
func TestManPagesAreCurrent(t *testing.T) {
	committed := filepath.Join(testutil.ModuleRoot(t), "man")
	fresh := t.TempDir()
	if err := genman.GenManPages(New(cmdtest.New(t).F), fresh); err != nil {
		t.Fatal(err)
	}
	list := func(dir string) []string {
		m, err := filepath.Glob(filepath.Join(dir, "*.1"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range m {
			m[i] = filepath.Base(m[i])
		}
		return m
	}
	const fix = "man/ is out of date: run scripts/gen-man.sh and commit the result"
	if got, want := list(committed), list(fresh); !slices.Equal(got, want) {
		t.Fatalf("%s\nman/ has %v\nthe command tree gives %v", fix, got, want)
	}
	for _, name := range list(fresh) {
		a, errA := os.ReadFile(filepath.Join(committed, name))
		b, errB := os.ReadFile(filepath.Join(fresh, name))
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: man/%s differs from the command tree", fix, name)
		}
	}
	// Placeholders such as <user config dir> are kept, on one line (their
	// spaces unbreakable).
	page, err := os.ReadFile(filepath.Join(fresh, "miotool.1"))
	if err != nil || !bytes.Contains(page, []byte(`<user\ config\ dir>`)) || !bytes.Contains(page, []byte(`\fBmiotool\fR <command> [flags]`)) {
		t.Errorf("miotool.1 lost its <placeholders>: %v", err)
	}
}

// Every command, hidden ones included, shows examples in its help.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no examples", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(New(cmdtest.New(t).F))
}

// Every flag with a fixed set of values completes them, from the same lists
// the flags accept.
func TestFlagValuesComplete(t *testing.T) {
	for _, tc := range []struct {
		args []string // after __complete; the last is the word being completed
		want []string // in order, exactly
	}{
		{[]string{"capture", "--reclaim", ""}, []string{"lazy", "guarded", "worker", "poller", "all"}},
		{[]string{"capture", "--reclaim=lazy,"}, []string{"lazy,guarded", "lazy,worker", "lazy,poller", "lazy,all"}},
		{[]string{"capture", "--mode", ""}, []string{"global", "thread-local", "relaxed", "all"}},
		{[]string{"capture", "--variant", ""}, []string{"same-thread", "other-thread", "all"}},
		{[]string{"capture", "--target", ""}, []string{"builtin", "miopen", "cudnn"}},
		{[]string{"capture", "--dialect", ""}, []string{"cuda", "hip"}},
		{[]string{"replay", "--mode", ""}, []string{"global", "thread-local", "relaxed"}},
		{[]string{"replay", "--reclaim", ""}, []string{"lazy", "guarded", "worker", "poller", "all"}},
		{[]string{"find", "--reclaim", ""}, []string{"lazy", "guarded", "worker", "poller"}},
		{[]string{"find", "--find-mode", ""}, []string{"normal", "fast", "hybrid", "dynamic-hybrid"}},
		{[]string{"stress-threads", "--cache", ""}, []string{"unlocked", "locked", "lockfree"}},
		{[]string{"stress-threads", "--target", ""}, []string{"builtin", "miopen", "cudnn"}},
		{[]string{"doctor", "--dialect", ""}, []string{"cuda", "hip"}},
		{[]string{"rules", "--dialect", ""}, []string{"cuda", "hip"}},
		{[]string{"rules", "--format", ""}, []string{"text", "markdown", "json"}},
		{[]string{"version", "--backend", ""}, []string{"auto", "sim", "cuda", "hip"}},
		{[]string{"heuristic", "--direction", ""}, []string{"F", "B", "W"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got, directive := complete(t, tc.args...)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if directive != ":4" {
				t.Errorf("directive %s, want :4 (no file names)", directive)
			}
		})
	}
	// --action offers every action of the matrix.
	got, _ := complete(t, "rules", "--action", "")
	if len(got) < 10 || !slices.Contains(got, "malloc") || !slices.Contains(got, "end-capture-other-thread") {
		t.Errorf("--action completes %q", got)
	}
	// --problem offers the names in problems.yaml, each with its description.
	got, _ = complete(t, "find", "--problem", "")
	if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "naive-timeout-sim\t") }) ||
		!slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "resnet50-conv4\t") }) {
		t.Errorf("--problem completes %q", got)
	}
	// ... or in the file --problems names.
	file := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(file, []byte("mine:\n  description: a small one\n  batchsize: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := complete(t, "capture", "--problems", file, "--problem", ""); !slices.Equal(got, []string{"mine\ta small one"}) {
		t.Errorf("--problem with --problems %s completes %q", file, got)
	}
}

// complete runs cobra's __complete and returns the candidates and the
// directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	h := cmdtest.New(t)
	if code := h.Run(New, append([]string{"__complete"}, args...)...); code != 0 {
		t.Fatalf("__complete %q: exit %d: %s", args, code, h.ErrOut)
	}
	lines := strings.Split(strings.TrimSuffix(h.Out.String(), "\n"), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// What follows trace's -- completes as a shell completes a command line:
// the program from $PATH (no file names), a path as files, and the
// program's own arguments as files.
func TestTraceCompletesTheProgram(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"mytool-a", "mytool-b"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	got, directive := complete(t, "trace", "--", "mytool")
	if !slices.Equal(got, []string{"mytool-a", "mytool-b"}) || directive != ":4" {
		t.Errorf("the program: %q %s", got, directive)
	}
	if got, directive := complete(t, "trace", "--", "./my"); len(got) != 0 || directive != ":0" {
		t.Errorf("a path: %q %s, want file names (:0)", got, directive)
	}
	if got, directive := complete(t, "trace", "--", "mytool-a", "in"); len(got) != 0 || directive != ":0" {
		t.Errorf("the program's argument: %q %s, want file names (:0)", got, directive)
	}
}
