// Package cmdtest runs miotool's commands in tests: a Factory with buffers
// for its streams, a temporary directory for configuration and no
// environment, so that nothing on the machine running the tests changes
// the outcome. Only tests import it.
package cmdtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"

	"miotool/internal/buildinfo"
	"miotool/internal/cli"
	"miotool/internal/testutil"

	// The backends the binary links in (see internal/cmd/root).
	_ "miotool/internal/hip/amd"
	_ "miotool/internal/hip/cuda"
	_ "miotool/internal/hip/sim"
)

// Harness is a Factory for one command line, and what it printed.
type Harness struct {
	F      *cli.Factory
	Out    *bytes.Buffer
	ErrOut *bytes.Buffer
	// Dir is the working directory the Factory reports, empty and the
	// test's own.
	Dir string
}

// New returns a harness whose Factory sees no environment, works in a
// temporary directory and reports version 1.2.3, commit c0ffee.
func New(t testing.TB) *Harness {
	t.Helper()
	ios, _, out, errOut := cli.Test()
	h := &Harness{Out: out, ErrOut: errOut, Dir: t.TempDir()}
	h.F = cli.NewFactory(ios, buildinfo.Info{Version: "1.2.3", Commit: "c0ffee", GoVersion: "go1.26.8", Platform: "linux/amd64"})
	h.F.Getwd = func() (string, error) { return h.Dir, nil }
	h.F.UserConfigDir = func() (string, error) { return filepath.Join(h.Dir, "config"), nil }
	h.F.LookupEnv = func(string) (string, bool) { return "", false }
	return h
}

// Run runs args through the tree that newTree builds, as the binary does,
// and returns the exit code.
func (h *Harness) Run(newTree func(*cli.Factory) *cobra.Command, args ...string) int {
	return cli.Main(h.F, args, newTree)
}

// Tree builds a tree of the root command and the commands that cmds build
// from the Factory, readied as miotool's own tree is.
func Tree(cmds ...func(*cli.Factory) *cobra.Command) func(*cli.Factory) *cobra.Command {
	return func(f *cli.Factory) *cobra.Command {
		built := make([]*cobra.Command, len(cmds))
		for i, c := range cmds {
			built[i] = c(f)
		}
		return cli.NewTree(f, built...)
	}
}

// ScenarioEnv is the runtime environment the scenario commands' tests run
// in, with env's variables over it: MIOPEN_NAIVE_TIMEOUT=10, a naive
// deadline of 10% of the best time rather than 300%, since under the race
// detector the tiled twin slows down as much as the naive one and the
// tests must not depend on their ratio.
func ScenarioEnv(env map[string]string) func(string) (string, bool) {
	base := map[string]string{"MIOPEN_NAIVE_TIMEOUT": "10"}
	return func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		v, ok := base[k]
		return v, ok
	}
}

// BuildMiotool builds the real binary into a temporary folder, for tests
// that start it as a process; it skips without a go command.
func BuildMiotool(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build miotool with")
	}
	bin := filepath.Join(t.TempDir(), "miotool")
	cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/miotool")
	cmd.Dir = testutil.ModuleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// ExpectationWithOneChange copies the committed H200 expectations with the
// cell malloc/global/other/global changed to "allowed".
func ExpectationWithOneChange(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "configs", "rules", "h200-cuda.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const cell = "{action: malloc, capture: global, thread: other, mode: global, returns: 900, end: 901"
	if !bytes.Contains(data, []byte(cell)) {
		t.Fatalf("h200-cuda.yaml lacks %q", cell)
	}
	data = bytes.Replace(data, []byte(cell), []byte("{action: malloc, capture: global, thread: other, mode: global, returns: 0, end: 0"), 1)
	p := filepath.Join(dir, "changed.yaml")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
