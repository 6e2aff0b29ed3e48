package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"miotool/internal/cli"
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

// --write-expect rewrites a file with other hard links where it is: both
// names show the measurement, the inode and the mode (0664, which umask 022
// would not give a new file) are the file's own.
func TestWriteExpectKeepsTheFilesIdentity(t *testing.T) {
	dir := t.TempDir()
	target, other := filepath.Join(dir, "mine.yaml"), filepath.Join(dir, "other-name.yaml")
	if err := os.WriteFile(target, []byte("# old\n"), 0o664); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o664); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(target, other); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(target)
	h := cmdtest.New(t)
	if code := h.Run(tree, "rules", "--backend", "sim", "--action", "malloc", "--spin", "10ms", "--write-expect", target); code != cli.ExitSkipped {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	after, err := os.Stat(target)
	if err != nil || !os.SameFile(before, after) || after.Mode().Perm() != 0o664 {
		t.Fatalf("the file was replaced or re-permissioned: %v, same %v, mode %v", err, os.SameFile(before, after), after.Mode().Perm())
	}
	data, err := os.ReadFile(other)
	if err != nil || !strings.Contains(string(data), "malloc") || strings.Contains(string(data), "# old") {
		t.Errorf("the other name does not show the measurement: %v\n%s", err, data)
	}
}
