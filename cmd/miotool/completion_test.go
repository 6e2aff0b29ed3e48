package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestCompletionScripts(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "__start_miotool", "zsh": "#compdef miotool", "fish": "complete -c miotool"} {
		h := newHarness(t)
		if code := h.run("completion", shell); code != 0 {
			t.Fatalf("%s: exit %d: %s", shell, code, h.errOut)
		}
		if !strings.Contains(h.out.String(), marker) {
			t.Errorf("%s completion lacks %q", shell, marker)
		}
	}
	// The scripts ask the binary itself; it must answer with the commands.
	h := newHarness(t)
	if code := h.run("__complete", "rep"); code != 0 {
		t.Fatalf("__complete: exit %d: %s", code, h.errOut)
	}
	if !strings.Contains(h.out.String(), "report\t") {
		t.Errorf("completing 'rep' does not offer report:\n%s", h.out)
	}
}

// man/ is what scripts/gen-man.sh writes from the current command tree.
func TestManPagesAreCurrent(t *testing.T) {
	committed := filepath.Join(moduleRoot(t), "man")
	fresh := t.TempDir()
	if err := GenManPages(newRootCmd(newHarness(t).f), fresh); err != nil {
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
	// Placeholders such as <user config dir> survive the Markdown step.
	page, err := os.ReadFile(filepath.Join(fresh, "miotool.1"))
	if err != nil || !bytes.Contains(page, []byte("<user config dir>")) || !bytes.Contains(page, []byte("miotool <command> [flags]")) {
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
	walk(newRootCmd(newHarness(t).f))
}
