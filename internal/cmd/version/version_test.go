package version

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
)

// tree is a command tree with the version command.
var tree = cmdtest.Tree(func(f *cli.Factory) *cobra.Command { return NewCmdVersion(f, nil) })

func TestVersion(t *testing.T) {
	h := cmdtest.New(t)
	if code := h.Run(tree, "version", "--format", "json"); code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	var v map[string]any
	if err := json.Unmarshal(h.Out.Bytes(), &v); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if v["version"] != "1.2.3" || v["commit"] != "c0ffee" || v["go"] != "go1.26.8" {
		t.Errorf("version JSON %v", v)
	}
	h = cmdtest.New(t)
	h.Run(tree, "version")
	if !strings.HasPrefix(h.Out.String(), "miotool 1.2.3\n  commit: c0ffee\n") {
		t.Errorf("version text %q", h.Out)
	}
}
