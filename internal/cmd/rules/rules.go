// Package rules is `miotool rules`: its options and flags.
package rules

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/cli"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/rules"
)

// RulesOptions are the inputs of `miotool rules`.
type RulesOptions struct {
	IO          *cli.IOStreams
	Global      cli.GlobalOptions
	Context     context.Context
	CommandLine string
	OpenDevice  cli.OpenFunc
	Now         func() time.Time
	Progress    func(label string) (update func(done, total int), done func())
	Verbosef    func(format string, args ...any)

	Dialect hip.Dialect
	// DialectSet says --dialect was given (on the command line, in the
	// environment or in the config file).
	DialectSet  bool
	Spin        time.Duration
	Actions     []rules.Action // empty: every action
	Expect      string
	WriteExpect string

	actionNames []string
}

// NewCmdRules builds `miotool rules`; runF, when set, replaces the run
// function.
func NewCmdRules(f *cli.Factory, runF func(*RulesOptions) error) *cobra.Command {
	opts := &RulesOptions{IO: f.IOStreams, OpenDevice: f.OpenDevice, Now: f.Now, Progress: f.Progress, Verbosef: f.Verbosef}
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Measure which calls a stream capture refuses and which of them invalidate it",
		Long: `rules makes every call of the capture-rules matrix for real on the selected
device and prints, for each cell, what the call and the capture's end returned.

Set-up of each cell: stream B (non-blocking) runs a spin kernel with event evB
recorded after it; buffer p is allocated; stream A (non-blocking) begins a
capture in the cell's mode and a tiny kernel is launched into it; then the
action runs on the capturing OS thread or on another one, optionally after that
thread switched itself to relaxed or thread-local mode; then A ends its capture
on the capturing thread. Every cell uses fresh streams and is cleaned up fully.

Actions: query and synchronize of the capturing stream, of B, of an event
recorded inside the capture and of evB; malloc; free of p; synchronous memset
and host-to-device copy; device synchronize; end capture from another thread.

With --expect the measurement is compared with an expectation file
(configs/rules/h200-cuda.yaml holds the NVIDIA H200 measurements,
configs/rules/hip.yaml the HIP runtime's rules) and any differing cell fails
the check (exit 1). --write-expect writes the measurement in that format.

On the simulator, --dialect picks its rule table; GPU backends have their own.`,
		Example: `  # The simulator's CUDA rules, compared with the H200 measurements
  miotool rules --backend sim --expect configs/rules/h200-cuda.yaml

  # The HIP rules
  miotool rules --backend sim --dialect hip --expect configs/rules/hip.yaml

  # Measure a GPU and keep the result as a new reference
  miotool rules --backend cuda --write-expect h200.yaml

  # Only the allocation and free cells, as a table for a pull request
  miotool rules --action malloc,free --format markdown`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Complete(f, cmd); err != nil {
				return err
			}
			if err := opts.Validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return opts.Run()
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.Var(cli.NewEnumValue(&opts.Dialect, hip.DialectCUDA, hip.DialectCUDA, hip.DialectHIP), "dialect",
		"the simulator's rule table and naming: cuda or hip (GPU backends use their own)")
	fl.DurationVar(&opts.Spin, "spin", 0,
		fmt.Sprintf("how long stream B stays busy in each cell (default %v on a GPU, %v on the simulator)", rules.DefaultGPUSpin, rules.DefaultSimSpin))
	fl.StringSliceVar(&opts.actionNames, "action", nil, "measure only these actions (repeat or separate with commas), e.g. malloc,query-other-stream")
	cli.CompleteList(cmd, "action", cli.Names(rules.Actions))
	fl.StringVar(&opts.Expect, "expect", "", "compare with this expectation file; any differing cell fails the check")
	fl.StringVar(&opts.WriteExpect, "write-expect", "", "write the measured cells to this file as expectations")
	return cmd
}

// Complete reads the global options and the actions --action names.
func (o *RulesOptions) Complete(f *cli.Factory, cmd *cobra.Command) error {
	o.Global = f.Global
	o.Context = cmd.Context()
	o.CommandLine = f.CommandLine()
	o.DialectSet = cmd.Flags().Changed("dialect")
	o.Actions = nil
	for _, name := range o.actionNames {
		a, err := rules.ParseAction(name)
		if err != nil {
			return cli.UsageErrorf("--action: %v", err)
		}
		o.Actions = append(o.Actions, a)
	}
	return nil
}

// Validate checks the spin time.
func (o *RulesOptions) Validate() error {
	if o.Spin < 0 {
		return cli.UsageErrorf("--spin %v: want a positive duration such as 300ms, or 0 for the default", o.Spin)
	}
	return nil
}

// Run measures the matrix and writes the result.
func (o *RulesOptions) Run() error {
	start := o.Now()
	var exp *rules.Expectation
	if o.Expect != "" {
		e, err := rules.ReadExpectation(o.Expect)
		if err != nil {
			return cli.UsageError(err)
		}
		exp = e
	}

	dev, sel, err := o.OpenDevice(string(o.Global.Backend), hip.OpenOptions{Ordinal: o.Global.Device, Dialect: o.Dialect})
	if err != nil {
		r := cli.OpenFailedResult("rules", o.CommandLine, start, o.Now(), o.Global.Backend, sel, err)
		return cli.RenderResult(o.IO, o.Global.Format, r)
	}
	defer dev.Close()

	r := cli.StartResult("rules", o.CommandLine, start, sel, dev)
	o.Verbosef("backend %s (%s) on %s", sel.Chosen, cli.SelectionReason(sel), dev.Props())
	if p := dev.Props(); p.Backend != string(hip.BackendSim) && o.DialectSet && o.Dialect != dev.Dialect() {
		r.Note("--dialect %s is ignored on the %s backend, which speaks %s", o.Dialect, p.Backend, dev.Dialect())
	}
	update, done := o.Progress("rules: cell")
	m, probeErr := rules.Probe(o.Context, dev, rules.Options{Spin: o.Spin, Cells: rules.CellsFor(o.Actions...), Progress: update})
	done()
	rules.Fill(r, m, probeErr, exp, o.Now())

	if o.WriteExpect != "" {
		if n, err := writeExpectation(o, m, start); err != nil {
			r.Finish(report.Error, err.Error(), o.Now())
		} else {
			r.Note("wrote %d measured cells to %s", n, o.WriteExpect)
		}
	}
	return cli.RenderResult(o.IO, o.Global.Format, r)
}

// writeExpectation writes the valid measured cells and returns their count.
func writeExpectation(opts *RulesOptions, m *rules.Measurement, start time.Time) (int, error) {
	source := fmt.Sprintf("measured by %q on %s", opts.CommandLine, start.UTC().Format(time.RFC3339))
	e := rules.FromMeasurement(m, source)
	f, err := os.Create(opts.WriteExpect)
	if err != nil {
		return 0, fmt.Errorf("--write-expect: %w", err)
	}
	if err := rules.WriteExpectation(f, e); err != nil {
		f.Close()
		return 0, fmt.Errorf("--write-expect %s: %w", opts.WriteExpect, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("--write-expect %s: %w", opts.WriteExpect, err)
	}
	return len(e.Cells), nil
}
