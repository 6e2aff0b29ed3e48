// Package doctor is `miotool doctor`: its options, flags and the
// rendering of its diagnosis.
package doctor

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/buildinfo"
	"miotool/internal/cli"
	"miotool/internal/doctor"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/runenv"
)

// DoctorOptions are the inputs of `miotool doctor`.
type DoctorOptions struct {
	IO          *cli.IOStreams
	Global      cli.GlobalOptions
	CommandLine string
	OpenDevice  cli.OpenFunc
	Backends    func() []hip.Registration
	Env         runenv.Env
	ConfigUsed  string
	Build       buildinfo.Info
	Now         func() time.Time

	Dialect hip.Dialect
}

// NewCmdDoctor builds `miotool doctor`; runF, when set, replaces the run
// function.
func NewCmdDoctor(f *cli.Factory, runF func(*DoctorOptions) error) *cobra.Command {
	opts := &DoctorOptions{IO: f.IOStreams, OpenDevice: f.OpenDevice, Backends: f.Backends, Build: f.Build, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Show which backend and device would run, every library tried, and the runtime settings",
		Long: `doctor reports the backend --backend selects and why, every backend and
shared library tried with each path and what failed, the device (name, arch,
compute units, runtime and driver versions), the effective runtime variables
GPU_MAX_HW_QUEUES, MIOPEN_NAIVE_TIMEOUT, MIOPEN_USER_DB_PATH and
MIOPEN_FIND_MODE with where each value came from, and the config file used.

It exits 0 when the chosen backend opened (with --backend auto the simulator
counts, so a machine without a GPU passes), 4 when the backend named with
--backend did not open, and 2 when MIOPEN_NAIVE_TIMEOUT or MIOPEN_FIND_MODE
holds a value the other commands refuse, or MIOPEN_USER_DB_PATH a path find
refuses (a file, or below one). The report is printed either way; in the last
case its verdict is ERROR and its exit status 2, in every format, and the
variable's row says what is wrong.`,
		Example: `  miotool doctor
  miotool doctor --backend cuda
  GPU_MAX_HW_QUEUES=8 miotool doctor --format json`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, opts, runF),
	}
	cmd.Flags().Var(cli.NewEnumValue(&opts.Dialect, hip.DialectCUDA, hip.DialectCUDA, hip.DialectHIP), "dialect",
		"rule table and naming of the simulated device: cuda or hip")
	return cmd
}

// Complete reads the global options, the runtime variables and the
// configuration file used.
func (o *DoctorOptions) Complete(f *cli.Factory, _ *cobra.Command, _ []string) error {
	o.Global = f.Global
	o.CommandLine = f.CommandLine()
	o.Env = f.RuntimeEnv()
	o.ConfigUsed = f.ConfigUsed
	return nil
}

// Validate has nothing to refuse: a runtime variable other commands
// refuse is what doctor is there to report.
func (o *DoctorOptions) Validate() error { return nil }

// Run diagnoses and judges the diagnosis.
func (o *DoctorOptions) Run(context.Context) (*cli.Outcome, error) {
	start := o.Now()
	d := doctor.Diagnose(doctor.Input{
		Backend:  string(o.Global.Backend),
		Ordinal:  o.Global.Device,
		Dialect:  o.Dialect,
		Open:     o.OpenDevice,
		Backends: o.Backends,
		Env:      o.Env,
	})
	r := render(o, d, start, o.Now())
	// A runtime variable the other commands refuse is a configuration
	// error here too (exit 2), so that "doctor && ..." stops where the
	// next command would. The report is still written, to show the
	// variable, but as what it is: an ERROR whose exit status is 2, never
	// a PASS beside exit 2.
	var refused []string
	if err := o.Env.Err(); err != nil {
		for _, e := range strings.Split(err.Error(), "\n") {
			refused = append(refused, e+": find, capture, replay and stress-threads refuse to run with it")
		}
	}
	if err := o.Env.UserDBErr(); err != nil {
		refused = append(refused, err.Error()+": find refuses it")
	}
	if len(refused) == 0 {
		return cli.Single(r), nil
	}
	r.Finish(report.Error, strings.Join(refused, "; "), o.Now())
	r.ExitStatus = cli.ExitUsage
	return cli.Single(r).WithMessage(&cli.ExitError{Code: cli.ExitUsage, Err: errors.New(strings.Join(refused, "; ")),
		Hint: "Unset it or give a value miotool can use (see Runtime variables in the report)."}), nil
}
