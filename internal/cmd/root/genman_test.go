package root_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"miotool/internal/cmd/cmdtest"
	"miotool/internal/cmd/genman"
	"miotool/internal/cmd/root"
)

// pages generates the man pages of the real command tree into a temporary
// folder and returns them by file name.
func pages(t *testing.T) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	if err := genman.GenManPages(root.New(cmdtest.New(t).F), dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(data)
	}
	return dir, out
}

// mandoc, where it is installed, finds nothing to warn about in any page.
func TestMandocFindsNoWarnings(t *testing.T) {
	mandoc, err := exec.LookPath("mandoc")
	if err != nil {
		t.Skip("mandoc is not installed (Debian: mandoc)")
	}
	dir, got := pages(t)
	var files []string
	for name := range got {
		files = append(files, filepath.Join(dir, name))
	}
	out, err := exec.Command(mandoc, append([]string{"-T", "lint", "-W", "warning"}, files...)...).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("mandoc -T lint -W warning: %v\n%s", err, out)
	}
}

// Each page is titled by its command and dated so that mandoc reads the
// date; hyphenation is off; every flag is a tagged paragraph whose tag
// holds the flag and only it; no tab is in the text; the root's page has
// --version.
func TestPagesAreReadable(t *testing.T) {
	_, got := pages(t)
	if len(got) < 10 {
		t.Fatalf("only %d pages", len(got))
	}
	byPage := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		byPage[strings.ReplaceAll(c.CommandPath(), " ", "-")+".1"] = c
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root.New(cmdtest.New(t).F))
	title := regexp.MustCompile(`(?m)^\.TH "([^"]+)" "1" "(\d{4}-\d{2}-\d{2})" `)
	for name, page := range got {
		m := title.FindStringSubmatch(page)
		want := strings.ToUpper(strings.ReplaceAll(strings.TrimSuffix(name, ".1"), "-", `\-`))
		if m == nil || m[1] != want {
			t.Errorf("%s: title %v, want %q", name, m, want)
		}
		if !strings.Contains(page, "\n.nh\n") {
			t.Errorf("%s: hyphenation is not off", name)
		}
		if strings.Contains(page, "\t") {
			t.Errorf("%s: a tab in the text", name)
		}
		cmd := byPage[name]
		if cmd == nil {
			t.Fatalf("%s: no such command", name)
		}
		cmd.InitDefaultHelpFlag()
		cmd.Flags().VisitAll(func(fl *pflag.Flag) {
			if fl.Hidden {
				return
			}
			tag := `.TP` + "\n" + `\fB\-\-` + strings.ReplaceAll(fl.Name, "-", `\-`) + `\fR`
			if fl.Shorthand != "" {
				tag = `.TP` + "\n" + `\fB\-` + fl.Shorthand + `\fR, \fB\-\-` + strings.ReplaceAll(fl.Name, "-", `\-`) + `\fR`
			}
			if !strings.Contains(page, tag) {
				t.Errorf("%s: --%s is not a tagged paragraph (%q)", name, fl.Name, tag)
			}
		})
	}
	if !strings.Contains(got["miotool.1"], `\fB\-\-version\fR`) {
		t.Error("miotool(1) lacks --version")
	}
	if !strings.Contains(got["miotool-capture.1"], `\fB\-\-junit\fR \fIFILE\fR`) {
		t.Error("miotool-capture(1) lacks --junit FILE")
	}
}
