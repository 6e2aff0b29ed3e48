package cli

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"miotool/configs"
	"miotool/internal/conv"
	"miotool/internal/hip"
)

// ProblemFlags are MIOpenDriver's convolution flags (-n -c -H -W -k -y -x
// -p -q -u -v -l -j -g and their long names) plus --problem NAME from
// problems.yaml and --problems FILE to read another such file.
//
// The geometry flags change only the fields they name. The others come from
// the problem the command starts from: --problem's, else the command's
// default problem (a named one per backend, e.g. naive-long-sim on the
// simulator; MIOpenDriver's defaults for a command that names none), so
// `-n 2` alone is the default problem with a batch of 2, and help shows
// those defaults, not MIOpenDriver's.
type ProblemFlags struct {
	// Problem holds the geometry flags' values; only the fields of flags
	// given on the command line are used.
	Problem conv.Problem
	Name    string
	File    string
	cmd     *cobra.Command
	// fallback names the problem used without --problem: "%s" in it is
	// "sim" or "gpu"; "" means MIOpenDriver's defaults.
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
	{"conv_stride_w", "v", "stride, width", func(p *conv.Problem) *int { return &p.StrideW }},
	{"dilation_h", "l", "dilation, height", func(p *conv.Problem) *int { return &p.DilH }},
	{"dilation_w", "j", "dilation, width", func(p *conv.Problem) *int { return &p.DilW }},
	{"group_count", "g", "groups", func(p *conv.Problem) *int { return &p.Groups }},
}

// fieldValue is one geometry flag's value. Its default is not printed by
// the flag library: the usage says it, since it depends on the problem the
// command starts from (and, for a named default, on the backend).
type fieldValue struct{ v *int }

func (f fieldValue) String() string {
	if f.v == nil {
		return ""
	}
	return strconv.Itoa(*f.v)
}
func (f fieldValue) Type() string { return "int" }
func (f fieldValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, 0)
	if err != nil {
		return fmt.Errorf("want a whole number")
	}
	*f.v = int(n)
	return nil
}

// builtinProblems is problems.yaml as built in, read once: the help of
// every command that names a default problem quotes its fields.
var builtinProblems = sync.OnceValues(func() (map[string]conv.Problem, error) {
	all, err := configs.Problems("")
	if err != nil {
		return nil, err
	}
	m := make(map[string]conv.Problem, len(all))
	for _, p := range all {
		m[p.Name] = p.Problem
	}
	return m, nil
})

// backendKinds are the words a fallback's "%s" takes, and where.
var backendKinds = []struct{ kind, where string }{{"sim", "on the simulator"}, {"gpu", "on a GPU"}}

// DefaultProblemNames are the problems a command with fallback (e.g.
// "naive-long-%s") starts from: on the simulator, then on a GPU.
func DefaultProblemNames(fallback string) []string {
	if fallback == "" {
		return nil
	}
	out := make([]string, len(backendKinds))
	for i, k := range backendKinds {
		out[i] = fmt.Sprintf(fallback, k.kind)
	}
	return out
}

// defaultsText is what a geometry flag's usage says of its default: the
// field of each default problem ("1 on the simulator, 128 on a GPU", or one
// number when they agree), or MIOpenDriver's default.
func defaultsText(fallback string, d driverFlag) string {
	base := conv.DefaultDriverProblem
	if fallback == "" {
		return fmt.Sprintf("(default %d, as MIOpenDriver's)", *d.field(&base))
	}
	problems, err := builtinProblems()
	var vals []int
	for _, name := range DefaultProblemNames(fallback) {
		p, ok := problems[name]
		if err != nil || !ok {
			return "(default: the default problem's)"
		}
		vals = append(vals, *d.field(&p))
	}
	if vals[0] == vals[1] {
		return fmt.Sprintf("(default %d)", vals[0])
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = fmt.Sprintf("%d %s", v, backendKinds[i].where)
	}
	return "(default " + strings.Join(parts, ", ") + ")"
}

// AddProblemFlags adds the problem flags to cmd. fallback names the
// problem used when --problem is not given; "%s" in it is replaced by
// "sim" or "gpu" for the backend that runs. An empty fallback starts from
// MIOpenDriver's defaults. Each geometry flag's usage says its default.
//
// MIOpenDriver's -v (stride width) takes the shorthand the root gives to
// --verbose, so the command gets its own --verbose without one, bound to
// the same option: pflag then leaves the root's flag out of this command.
func AddProblemFlags(cmd *cobra.Command, f *Factory, pf *ProblemFlags, fallback string) {
	pf.cmd, pf.fallback = cmd, fallback
	pf.Problem = conv.DefaultDriverProblem
	fl := cmd.Flags()
	for _, d := range driverFlags {
		usage := d.usage + " " + defaultsText(fallback, d)
		if d.short == "v" {
			usage += "; -v is the stride here, as in MIOpenDriver: verbose output is --verbose"
		}
		fl.VarP(fieldValue{d.field(&pf.Problem)}, d.long, d.short, usage)
		// The usage says the default: the flag library's would be
		// MIOpenDriver's, which is not what runs.
		fl.Lookup(d.long).DefValue = ""
	}
	problemUsage := "a named problem from problems.yaml (see --problems); geometry flags change only the fields they name"
	if names := DefaultProblemNames(fallback); names != nil {
		problemUsage += fmt.Sprintf(" (default %s %s, %s %s)", names[0], backendKinds[0].where, names[1], backendKinds[1].where)
	}
	fl.StringVar(&pf.Name, "problem", "", problemUsage)
	fl.StringVar(&pf.File, "problems", "", "read named problems from this file instead of the built-in problems.yaml")
	CompleteProblems(cmd)
	_ = cmd.MarkFlagFilename("problems", "yaml", "yml")
	fl.BoolVar(&f.Global.Verbose, "verbose", false, "print what the tool decides (config file, backend) on stderr")
}

// changedFlags are the geometry flags given on the command line, as
// MIOpenDriver spells them ("-n 2 -c 256"), in the flags' order.
func (pf *ProblemFlags) changedFlags() []string {
	var out []string
	for _, d := range driverFlags {
		if pf.cmd.Flags().Changed(d.long) {
			out = append(out, fmt.Sprintf("-%s %d", d.short, *d.field(&pf.Problem)))
		}
	}
	return out
}

// Resolve returns the problem and a label for it. backend is "sim" or
// another backend name (a GPU). The problem is --problem's, else the
// default problem for the backend (MIOpenDriver's defaults when the
// command names none), with the geometry flags given over it. The label
// names where it came from: "resnet50-conv4", "naive-long-sim with -n 2",
// or "" for MIOpenDriver's defaults and every field from flags.
func (pf *ProblemFlags) Resolve(backend string) (conv.Problem, string, error) {
	name := pf.Name
	if name == "" && pf.fallback != "" {
		kind := "gpu"
		if backend == string(hip.BackendSim) {
			kind = "sim"
		}
		name = fmt.Sprintf(pf.fallback, kind)
	}
	p := conv.DefaultDriverProblem
	if name != "" {
		np, err := configs.Problem(pf.File, name)
		if err != nil {
			return conv.Problem{}, "", UsageErrorf("--problem: %v", err)
		}
		p = np.Problem
	}
	changed := pf.changedFlags()
	for _, d := range driverFlags {
		if pf.cmd.Flags().Changed(d.long) {
			*d.field(&p) = *d.field(&pf.Problem)
		}
	}
	label := name
	switch {
	case len(changed) == len(driverFlags):
		label = ""
	case name != "" && len(changed) > 0:
		label = name + " with " + strings.Join(changed, " ")
	}
	if err := p.Validate(); err != nil {
		if name == "" {
			return conv.Problem{}, "", UsageError(err)
		}
		return conv.Problem{}, "", UsageErrorf("problem %s: %v", label, err)
	}
	return p, label, nil
}
