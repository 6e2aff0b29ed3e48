// Package heuristic is `miotool heuristic`: its options, flags and the
// rendering of the heuristic's answer.
package heuristic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/aiheur"
	"miotool/internal/cli"
	"miotool/internal/hip"
	"miotool/internal/report"
	heuristicscen "miotool/internal/scenario/heuristic"
)

// HeuristicOptions are the inputs of `miotool heuristic`.
type HeuristicOptions struct {
	IO          *cli.IOStreams
	Global      cli.GlobalOptions
	CommandLine string
	Now         func() time.Time
	// FindModels searches for a model directory when --model-dir is not
	// given (aiheur.ModelDir when nil); tests replace it.
	FindModels func() (dir, source string)

	Problem   cli.ProblemFlags
	Direction aiheur.Direction
	DataType  string
	Arch      string
	ModelDir  string
}

// dataTypes are the precisions TunaNet encodes.
var dataTypes = []string{"FP32", "FP16", "BF16"}

// directionValue is --direction: F, B or W (also fwd, bwd, wrw).
type directionValue struct{ target *aiheur.Direction }

func (d directionValue) String() string { return d.target.String() }
func (d directionValue) Type() string   { return "F|B|W" }
func (d directionValue) Set(s string) error {
	v, err := aiheur.ParseDirection(s)
	if err != nil {
		return errors.New("want F (forward), B (backward data) or W (backward weights)")
	}
	*d.target = v
	return nil
}

// dataTypeValue is --dtype: FP32, FP16 or BF16, in any case.
type dataTypeValue struct{ target *string }

func (d dataTypeValue) String() string { return *d.target }
func (d dataTypeValue) Type() string   { return "FP32|FP16|BF16" }
func (d dataTypeValue) Set(s string) error {
	v := strings.ToUpper(strings.TrimSpace(s))
	for _, t := range dataTypes {
		if v == t {
			*d.target = v
			return nil
		}
	}
	return errors.New("want FP32, FP16 or BF16")
}

// NewCmdHeuristic builds `miotool heuristic`; runF, when set, replaces the
// run function.
func NewCmdHeuristic(f *cli.Factory, runF func(*HeuristicOptions) error) *cobra.Command {
	opts := &HeuristicOptions{IO: f.IOStreams, Now: f.Now, Direction: aiheur.Forward, DataType: "FP32"}
	cmd := &cobra.Command{
		Use:   "heuristic [problem flags] [--arch ARCH]",
		Short: "Show how MIOpen's AI heuristic (TunaNet, and KTN where it applies) ranks the solvers of a problem on an arch",
		Long: `heuristic asks MIOpen's immediate-mode AI heuristic what it would choose for a
convolution on a GPU arch, from the model files alone: no GPU of that arch (or
any GPU) is needed. It prints TunaNet's ranking of the solvers with the
network's scores, best first, or, when the arch's model does not cover the
problem, MIOpen's reason (then MIOpen makes no AI prediction and falls back to
its other heuristics). Where the solver of the problem's direction tunes itself
with KernelTuningNet (the CK grouped-convolution solvers on gfx90a and gfx942,
ConvAsm1x1U on gfx908), the tuning values the model predicts follow.
--verbose adds the features fed to the network, raw and normalised.

The problem takes MIOpenDriver's flags (-n -c -H -W -k -y -x -p -q -u -v -l -j
-g; -v is the stride width, as in MIOpenDriver, so verbose is --verbose),
--direction F, B or W and --dtype FP32, FP16 or BF16, or --problem NAME from
problems.yaml.

--arch is any arch whose TunaNet files (<arch>.tn.model and
<arch>_metadata.tn.model) are in the model directory: --model-dir, by default
an installed ROCm's share/miopen/db (found as stress-threads finds it), else
the model embedded in miotool (arch miotool), which ranks miotool's own solvers
and says which of them apply. An arch without its own model gets gfx908's, as
in MIOpen 3.3.

Exit status: 0 the model ranked the solvers; 4 the model does not cover the
problem; 2 a bad problem, arch or model directory; 3 a model that fails to
load or its self-tests.`,
		Example: `  # miotool's own model and solvers (runs anywhere: the model is inside miotool)
  miotool heuristic --arch miotool --problem resnet50-conv2 --format json

  # MI300 (gfx942), ResNet-50's 3x3 layer, from the models of an installed ROCm
  # (without one, name a directory of MIOpen model files with --model-dir)
  miotool heuristic --arch gfx942 -n 16 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1

  # The same from a directory of MIOpen model files, backward data in FP16, with the features
  miotool heuristic --model-dir /opt/rocm/share/miopen/db --arch gfx942 --direction B --dtype FP16 \
      -n 32 -c 64 -H 56 -W 56 -k 64 -y 3 -x 3 -p 1 -q 1 --verbose

  # A stride TunaNet does not cover, as a PR checklist row (ROCm's models, or --model-dir)
  miotool heuristic --arch gfx90a -n 1 -c 3 -H 224 -W 224 -k 64 -y 7 -x 7 -u 2 -v 1 --format markdown`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, opts, runF),
	}
	cli.AddProblemFlags(cmd, f, &opts.Problem, "")
	fl := cmd.Flags()
	fl.Var(directionValue{&opts.Direction}, "direction", "convolution direction: F (forward), B (backward data) or W (backward weights)")
	fl.Var(dataTypeValue{&opts.DataType}, "dtype", "data type: FP32, FP16 or BF16")
	fl.StringVar(&opts.Arch, "arch", "", "GPU arch whose model to ask, e.g. gfx90a or gfx942, or miotool for the embedded model (default: the only model set there)")
	fl.StringVar(&opts.ModelDir, "model-dir", "", "directory of MIOpen model files (default: an installed ROCm's share/miopen/db, else the embedded model)")
	_ = cmd.RegisterFlagCompletionFunc("direction", cobra.FixedCompletions([]string{"F", "B", "W"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("dtype", cobra.FixedCompletions(dataTypes, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("arch", cobra.FixedCompletions(aiheur.TunaNetArchs(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("model-dir")
	return cmd
}

// problem is the problem the flags describe: --problem's, with the
// geometry flags over it, else the geometry flags alone. Only a named
// problem goes through the conv package's limits; a query runs no kernel,
// so a problem too large for miotool's own kernels can still be asked.
func (o *HeuristicOptions) problem() (aiheur.Problem, error) {
	g := o.Problem.Problem
	if o.Problem.Name != "" {
		var err error
		if g, _, err = o.Problem.Resolve(string(hip.BackendHIP)); err != nil {
			return aiheur.Problem{}, err
		}
	}
	p := aiheur.Problem{N: g.N, C: g.C, H: g.H, W: g.W, K: g.K, R: g.R, S: g.S, PadH: g.PadH, PadW: g.PadW,
		StrideH: g.StrideH, StrideW: g.StrideW, DilationH: g.DilH, DilationW: g.DilW, Groups: g.Groups,
		Direction: o.Direction, DataType: o.DataType, Layout: "NCHW"}
	if err := p.Validate(); err != nil {
		return aiheur.Problem{}, cli.UsageError(err)
	}
	return p, nil
}

// Complete reads the global options.
func (o *HeuristicOptions) Complete(f *cli.Factory, _ *cobra.Command, _ []string) error {
	o.Global = f.Global
	o.CommandLine = f.CommandLine()
	return nil
}

// Validate has nothing to check before the run: the problem and the
// model directory are checked as they are read.
func (o *HeuristicOptions) Validate() error { return nil }

// Run asks the model and judges its answer. A question that cannot be
// answered as asked (a bad problem, arch or model directory) is a usage
// error with no result; a model that is there but does not load or fails
// its self-tests is an ERROR result (exit 3), written like any other.
func (o *HeuristicOptions) Run(context.Context) (*cli.Outcome, error) {
	start := o.Now()
	p, err := o.problem()
	if err != nil {
		return nil, err
	}
	models, err := heuristicscen.FindModels(o.ModelDir, "--model-dir", o.FindModels)
	if err != nil {
		if o.ModelDir != "" {
			err = fmt.Errorf("--model-dir: %w", err)
		}
		return o.failed(start, err)
	}
	answer, err := heuristicscen.Ask(heuristicscen.Query{Problem: p, Arch: o.Arch, Models: models})
	var in *heuristicscen.InputError
	if errors.As(err, &in) && models.Dir == "" {
		err = &heuristicscen.InputError{Err: fmt.Errorf("%w; no installed ROCm's share/miopen/db was found: name a directory of MIOpen model files with --model-dir", err)}
	}
	if err != nil {
		return o.failed(start, err)
	}
	r := report.New(check, o.CommandLine, start)
	fill(r, answer, o.Global.Verbose, o.Now())
	return cli.Single(r), nil
}

// failed is how a question the heuristic could not answer ends: exit 2
// for a question that cannot be answered as asked, an ERROR result for a
// model that fails (exit 3), the tool's failure otherwise.
func (o *HeuristicOptions) failed(start time.Time, err error) (*cli.Outcome, error) {
	var in *heuristicscen.InputError
	var model *heuristicscen.ModelError
	switch {
	case errors.As(err, &in):
		return nil, cli.UsageError(err)
	case errors.As(err, &model):
		r := report.New(check, o.CommandLine, start)
		r.Finish(report.Error, model.Error(), o.Now())
		return cli.Single(r), nil
	}
	return nil, err
}
