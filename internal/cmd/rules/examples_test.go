package rules

import (
	"os"
	"strings"
	"testing"

	"miotool/internal/cmd/cmdtest"
)

// Every table --expect takes by name is one miotool ships, of the dialect
// its name says, so that the help's examples run without a checkout.
func TestShippedTablesByName(t *testing.T) {
	t.Chdir(t.TempDir()) // no file of those names here
	for _, name := range shippedTables {
		e, err := readExpectation(name)
		if err != nil {
			t.Fatalf("--expect %s: %v", name, err)
		}
		if len(e.Cells) == 0 || !strings.Contains(name, string(e.Dialect)) {
			t.Errorf("--expect %s: %d cells, dialect %s", name, len(e.Cells), e.Dialect)
		}
	}
	if _, err := readExpectation("nosuch"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("an unknown name: %v", err)
	}
	// A file of that name is the user's and wins.
	if err := os.WriteFile("hip", []byte("not: a table\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readExpectation("hip"); err == nil {
		t.Error("a file named hip was not read")
	}
}

// The help's example of a table for a pull request checks what it
// measures: it passes, rather than skipping for want of --expect.
func TestTheChecklistExampleIsACheck(t *testing.T) {
	var line string
	for _, l := range strings.Split(NewCmdRules(cmdtest.New(t).F, nil).Example, "\n") {
		if strings.Contains(l, "--format markdown") {
			line = strings.TrimSpace(l)
		}
	}
	args := strings.Fields(strings.TrimPrefix(line, "miotool "))
	if len(args) == 0 || !strings.Contains(line, "--expect") {
		t.Fatalf("no checked table example: %q", line)
	}
	h := cmdtest.New(t)
	if code := h.Run(tree, append(args, "--backend", "sim", "--spin", "10ms")...); code != 0 {
		t.Fatalf("%s: exit %d: %s", line, code, h.ErrOut)
	}
	if !strings.Contains(h.Out.String(), "| Passed (") {
		t.Errorf("%s: no passed row:\n%s", line, h.Out)
	}
}
