// Package rules is `miotool rules`: its options and flags.
package rules

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"miotool/configs"
	"miotool/internal/cli"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/rules"
	"miotool/internal/userfile"
)

// RulesOptions are the inputs of `miotool rules`.
type RulesOptions struct {
	IO          *cli.IOStreams
	Global      cli.GlobalOptions
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
	expectation *rules.Expectation
}

// shippedTables are the expectation tables miotool carries (configs/rules),
// which --expect takes by name where no file of that name is there.
var shippedTables = []string{"h200-cuda", "hip"}

// readExpectation reads --expect: the file it names, else, for a bare name
// no file has, the shipped table of that name, so that the examples run
// without a checkout.
func readExpectation(name string) (*rules.Expectation, error) {
	if _, err := os.Stat(name); err != nil && !strings.ContainsRune(name, os.PathSeparator) {
		if data, serr := configs.RulesFile(strings.TrimSuffix(name, ".yaml") + ".yaml"); serr == nil {
			return rules.ParseExpectation("miotool's "+strings.TrimSuffix(name, ".yaml"), data)
		}
	}
	return rules.ReadExpectation(name)
}

// maxSpin bounds --spin: every cell waits for it, up to 8 times on retries,
// and 300ms is a GPU's default; a longer spin has no use.
const maxSpin = 10 * time.Second

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
and host-to-device copy; device synchronize; end capture from another thread;
pinned host allocation and its free; host registration and unregistration;
module unload; a launch on the legacy default stream, beside a non-blocking
and a blocking capture.

With --expect the measurement is compared with an expectation file, or a
table miotool ships, by name: h200-cuda (the NVIDIA H200 measurements,
configs/rules/h200-cuda.yaml in the source) or hip (the HIP runtime's rules,
configs/rules/hip.yaml); any differing cell fails
the check (exit 1). The result says how many cells it compared of how many it
measured: a file that covers fewer cells passes for those only ("compared 1 of
369"), and a run that compared nothing (no --expect, or a file with none of the
measured cells) is SKIP (exit 4), a measurement rather than a check.
--write-expect writes the measurement in that format, once every cell has been
measured; it may not name the expectation file or the config file.

On the simulator, --dialect picks its rule table; GPU backends have their own.`,
		Example: `  # The simulator's CUDA rules, compared with the H200 measurements miotool ships
  miotool rules --backend sim --expect h200-cuda

  # The HIP rules
  miotool rules --backend sim --dialect hip --expect hip

  # Measure a GPU and keep the result as a new reference
  miotool rules --backend cuda --write-expect h200.yaml

  # Only the allocation and free cells, checked, as a table for a pull request
  miotool rules --action malloc,free --expect h200-cuda --format markdown`,
		Args: cobra.NoArgs,
		RunE: cli.DeviceRunE(f, opts, runF),
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.Var(cli.NewEnumValue(&opts.Dialect, hip.DialectCUDA, hip.DialectCUDA, hip.DialectHIP), "dialect",
		"the simulator's rule table and naming: cuda or hip (GPU backends use their own)")
	fl.DurationVar(&opts.Spin, "spin", 0,
		fmt.Sprintf("how long stream B stays busy in each cell, at most %v (default %v on a GPU, %v on the simulator)", maxSpin, rules.DefaultGPUSpin, rules.DefaultSimSpin))
	fl.StringSliceVar(&opts.actionNames, "action", nil, "measure only these actions (repeat or separate with commas), e.g. malloc,query-other-stream")
	cli.CompleteList(cmd, "action", cli.Names(rules.Actions))
	fl.StringVar(&opts.Expect, "expect", "", "compare with this expectation file, or a table miotool ships ("+strings.Join(shippedTables, ", ")+"); any differing cell fails the check")
	fl.StringVar(&opts.WriteExpect, "write-expect", "", "write the measured cells to this file as expectations")
	cli.MarkInputFile(cmd, "expect")
	cli.MarkOutputFile(cmd, "write-expect")
	return cmd
}

// Complete reads the global options and the actions --action names.
func (o *RulesOptions) Complete(f *cli.Factory, cmd *cobra.Command, _ []string) error {
	o.Global = f.Global
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

// Validate checks, before anything runs, the spin time and the
// expectation file. That --write-expect can be written and names none of
// the inputs (--expect, the config file) is checked before this, by the
// flags' marks (cli.MarkOutputFile, cli.MarkInputFile): replacing the
// reference it compares with by what it measured would lose the
// reference (its comments, notes and the cells not measured this time).
func (o *RulesOptions) Validate() error {
	if o.Spin < 0 || o.Spin > maxSpin {
		return cli.UsageErrorf("--spin %v: want a positive duration up to %v such as 300ms, or 0 for the default", o.Spin, maxSpin)
	}
	if o.Expect != "" {
		e, err := readExpectation(o.Expect)
		if err != nil {
			return cli.UsageError(err)
		}
		o.expectation = e
	}
	return nil
}

// Device opens the selected backend's device with the simulator's dialect.
func (o *RulesOptions) Device() cli.DeviceRequest {
	return cli.DeviceRequest{Check: "rules", Open: func(check string, start time.Time) (hip.Device, *report.Result, func()) {
		dev, sel, err := o.OpenDevice(string(o.Global.Backend), hip.OpenOptions{Ordinal: o.Global.Device, Dialect: o.Dialect})
		if err != nil {
			return nil, cli.OpenFailedResult(check, o.CommandLine, start, o.Now(), o.Global.Backend, sel, err), nil
		}
		return dev, cli.StartResult(check, o.CommandLine, start, sel, dev), nil
	}}
}

// RunOn measures the matrix on d and judges it. An interruption stops the
// probe at once: the cells measured so far are the INTERRUPTED result, and
// nothing is written to --write-expect. A probe that stopped leaves the
// device to the process's exit, since a cell it abandoned may still run
// (see rules.Probe).
func (o *RulesOptions) RunOn(ctx context.Context, d *cli.Device) (*report.Result, error) {
	start, r, dev := d.Result.Started, d.Result, d.Device
	o.Verbosef("backend %s (%s) on %s", r.Backend, r.BackendReason, dev.Props())
	if e := o.expectation; e != nil && e.Dialect != dev.Dialect() {
		// Cells of one runtime's rules compared with another's pass or
		// fail by accident: refuse before anything is measured.
		return nil, cli.UsageErrorf("--expect %s holds %s rules, but the device speaks %s (%s): compare it with a %s table, or choose the device or --dialect the table is for",
			o.Expect, e.Dialect, dev.Dialect(), dev.Props().Name, dev.Dialect())
	}
	if p := dev.Props(); p.Backend != string(hip.BackendSim) && o.DialectSet && o.Dialect != dev.Dialect() {
		r.Note("--dialect %s is ignored on the %s backend, which speaks %s", o.Dialect, p.Backend, dev.Dialect())
	}
	update, done := o.Progress("rules: cell")
	progress := func(n, total int) {
		update(n, total)
		o.Verbosef("cell %d of %d measured", n, total)
	}
	m, probeErr := rules.Probe(ctx, dev, rules.Options{Spin: o.Spin, Cells: rules.CellsFor(o.Actions...), Progress: progress})
	done()
	why := ""
	if ctx.Err() != nil {
		why = cli.InterruptedReason(ctx).Error()
	}
	if probeErr != nil {
		d.LeaveOpen()
	}
	fill(r, m, o.expectation, rules.Summarize(m, o.expectation), probeErr, why, o.Now())

	if o.WriteExpect != "" {
		switch {
		case why != "" || probeErr != nil:
			r.Note("--write-expect %s: not written, since the probe did not measure every cell", o.WriteExpect)
		default:
			if n, err := writeExpectation(o, m, start); err != nil {
				r.Finish(report.Error, err.Error(), o.Now())
			} else {
				r.Note("wrote %d measured cells to %s", n, o.WriteExpect)
			}
		}
	}
	return r, nil
}

// writeExpectation writes the valid measured cells and returns their
// count. A file already there keeps its identity (userfile): a link keeps
// pointing where it did, a hard-linked file is rewritten where it is, and
// its mode and owner stay.
func writeExpectation(opts *RulesOptions, m *rules.Measurement, start time.Time) (int, error) {
	source := fmt.Sprintf("measured by %q on %s", opts.CommandLine, start.UTC().Format(time.RFC3339))
	e := rules.FromMeasurement(m, source)
	var buf bytes.Buffer
	if err := rules.WriteExpectation(&buf, e); err != nil {
		return 0, fmt.Errorf("--write-expect %s: %w", opts.WriteExpect, err)
	}
	if err := userfile.Write(opts.WriteExpect, buf.Bytes(), userfile.Options{NewMode: 0o644}); err != nil {
		return 0, fmt.Errorf("--write-expect %s: %w", opts.WriteExpect, err)
	}
	return len(e.Cells), nil
}
