package heuristic

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"miotool/internal/aiheur"
	"miotool/internal/cli"
	"miotool/internal/cmd/cmdtest"
	"miotool/internal/testutil"
)

// tree is a command tree with the heuristic command.
var tree = withRun(nil)

// withRun is a command tree whose heuristic command hands its options to
// runF.
func withRun(runF func(*cli.Factory, *HeuristicOptions) error) func(*cli.Factory) *cobra.Command {
	return cmdtest.Tree(func(f *cli.Factory) *cobra.Command {
		var run func(*HeuristicOptions) error
		if runF != nil {
			run = func(o *HeuristicOptions) error { return runF(f, o) }
		}
		return NewCmdHeuristic(f, run)
	})
}

// noROCm runs the command as on a machine without an installed ROCm.
func noROCm(f *cli.Factory, o *HeuristicOptions) error {
	o.FindModels = func() (string, string) { return "", aiheur.SourceEmbedded }
	return f.Finish(o.Run(f.Context))
}

var doneWhenProblem = []string{"-n", "16", "-c", "64", "-H", "56", "-W", "56", "-k", "64", "-y", "3", "-x", "3", "-p", "1", "-q", "1"}

// The command of the issue prints a ranking, in every format.
func TestHeuristicRanksFromAModelDirectory(t *testing.T) {
	models := testutil.Shared(t, "miopen-models")
	args := append([]string{"heuristic", "--model-dir", models, "--arch", "gfx942"}, doneWhenProblem...)

	h := cmdtest.New(t)
	if code := h.Run(tree, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	for _, re := range []string{
		`(?m)^heuristic: PASS - TunaNet gfx942 ranks ConvBinWinogradRxSf2x3g1 first \(score 5\.\d{4}\) of 21 solvers$`,
		`(?m)^TunaNet gfx942: solvers ranked for the problem$`,
		`(?m)^1 +ConvBinWinogradRxSf2x3g1 +5\.\d{4}$`,
		`(?m)^21 +\S+ +-\d+\.\d{4}$`,
		`problem 64-56-56-3x3-64-56-56-16-1x1-1x1-1x1-0-NCHW-FP32-F`,
	} {
		if !regexp.MustCompile(re).MatchString(h.Out.String()) {
			t.Errorf("text output lacks %s:\n%s", re, h.Out)
		}
	}

	h = cmdtest.New(t)
	if code := h.Run(tree, append(args, "--format", "json", "--verbose")...); code != 0 {
		t.Fatalf("json: exit %d: %s", code, h.ErrOut)
	}
	var doc struct {
		Schema  string `json:"schema"`
		Verdict string `json:"verdict"`
		Device  struct {
			Arch string `json:"arch"`
		} `json:"device"`
		Tables []struct {
			Title   string           `json:"title"`
			Records []map[string]any `json:"records"`
		} `json:"tables"`
	}
	if err := json.Unmarshal(h.Out.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, h.Out)
	}
	if doc.Schema != "miotool/result/v3" || doc.Verdict != "PASS" || doc.Device.Arch != "gfx942" || len(doc.Tables) != 3 {
		t.Fatalf("json: %+v", doc)
	}
	if r := doc.Tables[0].Records[0]; r["rank"] != 1.0 || r["solver"] != "ConvBinWinogradRxSf2x3g1" {
		t.Errorf("first record %v", r)
	}
	if f := doc.Tables[1].Records; !strings.HasPrefix(doc.Tables[1].Title, "features") || len(f) != 18 || f[0]["feature"] != "Inp_0" || fmt.Sprint(f[0]["value"]) != "64" {
		t.Errorf("--verbose features: %q %v", doc.Tables[1].Title, f)
	}

	h = cmdtest.New(t)
	if code := h.Run(tree, append(args, "--format", "markdown")...); code != 0 {
		t.Fatalf("markdown: exit %d: %s", code, h.ErrOut)
	}
	if !regexp.MustCompile("(?m)^\\| heuristic +\\| `miotool heuristic --model-dir \\S+ --arch gfx942 -n 16 .*` +\\| no device \\(gfx942\\) +\\| Ranked: ConvBinWinogradRxSf2x3g1 first +\\|$").MatchString(h.Out.String()) {
		t.Errorf("no checklist row:\n%s", h.Out)
	}
}

func TestHeuristicFlagsReachTheOptions(t *testing.T) {
	var got *HeuristicOptions
	h := cmdtest.New(t)
	code := h.Run(withRun(func(_ *cli.Factory, o *HeuristicOptions) error { got = o; return nil }),
		"heuristic", "-n", "2", "-c", "8", "-H", "9", "-W", "10", "-k", "16", "-y", "1", "-x", "3", "-p", "0", "-q", "1",
		"-u", "2", "-v", "3", "-l", "1", "-j", "2", "-g", "4", "--direction", "wrw", "--dtype", "bf16",
		"--arch", "gfx90a", "--model-dir", "/models", "--verbose")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, h.ErrOut)
	}
	p, err := got.problem()
	if err != nil {
		t.Fatal(err)
	}
	want := aiheur.Problem{N: 2, C: 8, H: 9, W: 10, K: 16, R: 1, S: 3, PadH: 0, PadW: 1, StrideH: 2, StrideW: 3,
		DilationH: 1, DilationW: 2, Groups: 4, Direction: aiheur.BackwardWeights, DataType: "BF16", Layout: "NCHW"}
	if p != want || got.Arch != "gfx90a" || got.ModelDir != "/models" || !got.Global.Verbose {
		t.Errorf("options: problem %+v arch %q dir %q verbose %v", p, got.Arch, got.ModelDir, got.Global.Verbose)
	}
}

func TestHeuristicExitCodes(t *testing.T) {
	const models = "MODELS" // the reference model directory, where a case names it
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"embedded model, named problem", []string{"--problem", "resnet50-conv2"}, 0, "GemmFwd1x1Tiled +-?\\d+\\.\\d{4} +no: GemmFwd1x1Tiled is not applicable", ""},
		{"not covered by the model", []string{"--model-dir", models, "--arch", "gfx90a", "-c", "3", "-k", "64", "-y", "7", "-x", "7", "-u", "2", "-v", "1"}, 4,
			"heuristic: SKIP - the gfx90a model does not cover the problem: stride 2x1 is not square", "stride 2x1 is not square"},
		{"an arch with no model", []string{"--arch", "gfx942"}, 2, "", "no TunaNet model for gfx942 in miotool's embedded models, which has miotool; no installed ROCm's share/miopen/db was found: name a directory of MIOpen model files with --model-dir"},
		{"several archs, none named", []string{"--model-dir", models}, 2, "", "name the arch: " + models + " (--model-dir) has the TunaNet models of gfx908, gfx90a, gfx942"},
		{"no such directory", []string{"--model-dir", filepath.Join(t.TempDir(), "none")}, 2, "", "--model-dir: model directory: stat"},
		{"zero channels", []string{"-c", "0"}, 2, "", "problem: c must be at least 1, got 0"},
		{"groups that do not divide", []string{"-c", "6", "-g", "4"}, 2, "", "groups 4 must divide c 6"},
		{"filter larger than the input", []string{"-H", "2", "-y", "5"}, 2, "", "does not fit the padded"},
		{"a data type TunaNet does not encode", []string{"--dtype", "FP64"}, 2, "", `invalid argument "FP64" for "--dtype" flag: want FP32, FP16 or BF16`},
		{"a direction", []string{"--direction", "up"}, 2, "", `want F (forward), B (backward data) or W (backward weights)`},
		{"an argument", []string{"gfx942"}, 2, "", `unknown command "gfx942"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"heuristic"}, tc.args...)
			if strings.Contains(strings.Join(args, " ")+tc.stderr, models) {
				dir := testutil.Shared(t, "miopen-models")
				for i := range args {
					args[i] = strings.ReplaceAll(args[i], models, dir)
				}
				tc.stderr = strings.ReplaceAll(tc.stderr, models, dir)
			}
			h := cmdtest.New(t)
			code := h.Run(withRun(noROCm), args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, h.Out, h.ErrOut)
			}
			if tc.stdout != "" && !regexp.MustCompile(tc.stdout).MatchString(h.Out.String()) {
				t.Errorf("stdout lacks %s:\n%s", tc.stdout, h.Out)
			}
			if tc.stderr != "" && !strings.Contains(h.ErrOut.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, h.ErrOut)
			}
			if tc.code == 2 && h.Out.Len() != 0 {
				t.Errorf("a usage error printed to stdout:\n%s", h.Out)
			}
		})
	}
}
