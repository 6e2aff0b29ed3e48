package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"miotool/configs"
	"miotool/internal/conv"
	"miotool/internal/hip"
)

// ProblemFlags are MIOpenDriver's convolution flags (-n -c -H -W -k -y -x
// -p -q -u -v -l -j -g and their long names) plus --problem NAME from
// problems.yaml and --problems FILE to read another such file.
type ProblemFlags struct {
	Problem  conv.Problem
	Name     string
	File     string
	cmd      *cobra.Command
	fallback string
}

// driverFlag is one MIOpenDriver geometry flag.
type driverFlag struct {
	long, short, usage string
	field              func(*conv.Problem) *int
}

var driverFlags = []driverFlag{
	{"batchsize", "n", "batch size N", func(p *conv.Problem) *int { return &p.N }},
	{"in_channels", "c", "input channels C", func(p *conv.Problem) *int { return &p.C }},
	{"in_h", "H", "input height H", func(p *conv.Problem) *int { return &p.H }},
	{"in_w", "W", "input width W", func(p *conv.Problem) *int { return &p.W }},
	{"out_channels", "k", "output channels K", func(p *conv.Problem) *int { return &p.K }},
	{"fil_h", "y", "filter height", func(p *conv.Problem) *int { return &p.R }},
	{"fil_w", "x", "filter width", func(p *conv.Problem) *int { return &p.S }},
	{"pad_h", "p", "zero padding, height", func(p *conv.Problem) *int { return &p.PadH }},
	{"pad_w", "q", "zero padding, width", func(p *conv.Problem) *int { return &p.PadW }},
	{"conv_stride_h", "u", "stride, height", func(p *conv.Problem) *int { return &p.StrideH }},
	{"conv_stride_w", "v", "stride, width (-v is the stride here, as in MIOpenDriver; use --verbose)", func(p *conv.Problem) *int { return &p.StrideW }},
	{"dilation_h", "l", "dilation, height", func(p *conv.Problem) *int { return &p.DilH }},
	{"dilation_w", "j", "dilation, width", func(p *conv.Problem) *int { return &p.DilW }},
	{"group_count", "g", "groups", func(p *conv.Problem) *int { return &p.Groups }},
}

// AddProblemFlags adds the problem flags to cmd. fallback names the
// problem used when neither --problem nor a geometry flag is given; "%s" in
// it is replaced by "sim" or "gpu" for the backend that runs.
//
// MIOpenDriver's -v (stride width) takes the shorthand the root gives to
// --verbose, so the command gets its own --verbose without one, bound to
// the same option: pflag then leaves the root's flag out of this command.
func AddProblemFlags(cmd *cobra.Command, f *Factory, pf *ProblemFlags, fallback string) {
	pf.cmd, pf.fallback = cmd, fallback
	pf.Problem = conv.DefaultDriverProblem
	fl := cmd.Flags()
	for _, d := range driverFlags {
		fl.IntVarP(d.field(&pf.Problem), d.long, d.short, *d.field(&conv.DefaultDriverProblem), d.usage)
	}
	fl.StringVar(&pf.Name, "problem", "", "a named problem from problems.yaml (see --problems); geometry flags override its fields")
	fl.StringVar(&pf.File, "problems", "", "read named problems from this file instead of the built-in problems.yaml")
	CompleteProblems(cmd)
	_ = cmd.MarkFlagFilename("problems", "yaml", "yml")
	fl.BoolVar(&f.Global.Verbose, "verbose", false, "print what the tool decides (config file, backend) on stderr")
}

// Resolve returns the problem and a label for it. backend is "sim" or
// another backend name (a GPU).
func (pf *ProblemFlags) Resolve(backend string) (conv.Problem, string, error) {
	changed := false
	for _, d := range driverFlags {
		if pf.cmd.Flags().Changed(d.long) {
			changed = true
		}
	}
	name := pf.Name
	if name == "" && !changed {
		kind := "gpu"
		if backend == string(hip.BackendSim) {
			kind = "sim"
		}
		name = fmt.Sprintf(pf.fallback, kind)
	}
	if name == "" {
		if err := pf.Problem.Validate(); err != nil {
			return conv.Problem{}, "", UsageError(err)
		}
		return pf.Problem, "", nil
	}
	np, err := configs.Problem(pf.File, name)
	if err != nil {
		return conv.Problem{}, "", UsageErrorf("--problem: %v", err)
	}
	p := np.Problem
	for _, d := range driverFlags {
		if pf.cmd.Flags().Changed(d.long) {
			*d.field(&p) = *d.field(&pf.Problem)
		}
	}
	if err := p.Validate(); err != nil {
		return conv.Problem{}, "", UsageErrorf("problem %s: %v", name, err)
	}
	return p, name, nil
}
