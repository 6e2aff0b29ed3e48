package cli

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"miotool/internal/hip"
	"miotool/internal/report"
)

// Outcome is what a command's run hands to the runner: its judged result,
// a single check's or a suite's, which the runner writes and turns into
// the exit status.
type Outcome struct {
	doc document
	// err, when set, is what the runner prints after writing the result
	// instead of the verdict's own line (a configuration error doctor
	// reports with a hint); its code is the result's.
	err *ExitError
	// after, when set, says that the result follows a program's own output
	// on stdout (AfterProgram).
	after *afterProgram
}

// afterProgram is how a result that follows a program's output on stdout
// is written: on a line of its own, and JSON on one line, the last.
type afterProgram struct{ newlineFirst bool }

// AfterProgram says that the result follows, on stdout, the output of a
// program the command ran (trace): it starts on a line of its own
// (newlineFirst: the program left its last line open, or where it left it
// cannot be known), and as JSON it is one line, the last, so that
// "| tail -n 1 | jq" reads it whatever the program printed. The files the
// output flags name are written as always.
func (o *Outcome) AfterProgram(newlineFirst bool) *Outcome {
	o.after = &afterProgram{newlineFirst}
	return o
}

// Single is a single check's judged result.
func Single(r *report.Result) *Outcome { return &Outcome{doc: resultDocument{r}} }

// Suite is a suite's judged result, or a merge of several.
func Suite(s *report.SuiteResult) *Outcome { return &Outcome{doc: suiteDocument{s}} }

// WithMessage makes err (its message and hint) what is said on stderr once
// the result is written, in place of the verdict's line. The exit status
// stays the result's.
func (o *Outcome) WithMessage(err *ExitError) *Outcome {
	o.err = err
	return o
}

// Options are a command's inputs as the runner drives them, after cobra
// has parsed the flags: Complete reads what the flags and the
// configuration give, Validate refuses what cannot run (usage errors, exit
// 2) before anything is started.
type Options interface {
	Complete(f *Factory, cmd *cobra.Command, args []string) error
	Validate() error
}

// Check is a command whose run returns its judged result.
type Check interface {
	Options
	// Run runs the check and returns its judged result. An error with no
	// result is a usage error or the tool's failure and is printed as it
	// is; an error beside a result makes the result an ERROR.
	Run(ctx context.Context) (*Outcome, error)
}

// DeviceCheck is a command that runs on a device, which the runner opens
// before the run and closes after it.
type DeviceCheck interface {
	Options
	// Device says which device to open and how.
	Device() DeviceRequest
	// RunOn runs the check on d and returns the result d.Result began,
	// judged (see Check.Run for the errors).
	RunOn(ctx context.Context, d *Device) (*report.Result, error)
}

// DeviceRequest says which device a DeviceCheck runs on.
type DeviceRequest struct {
	// Check names the check, for the result begun when the device opens
	// and the one written when it cannot.
	Check string
	// Open opens the device and begins the result; when it cannot, dev is
	// nil and the result is the SKIP or ERROR to write. release, when not
	// nil, runs once the device is closed (a library target's handles).
	Open func(check string, start time.Time) (dev hip.Device, r *report.Result, release func())
}

// Device is an open device with the result that began with it.
type Device struct {
	hip.Device
	// Result is begun with the backend and device; RunOn fills and judges
	// it.
	Result *report.Result

	ctx     context.Context
	mu      sync.Mutex
	closed  bool
	keep    bool
	release func()
}

// CloseWith runs closeFn (which must close the device, after whatever
// teardown the check measures) and waits for it, or, once the run is
// interrupted, InterruptGrace at most: the process's exit ends the rest.
// It reports whether closeFn finished, and its error. The runner closes
// the device no more.
func (d *Device) CloseWith(closeFn func() error) (finished bool, err error) {
	d.mu.Lock()
	if d.closed || d.keep {
		d.mu.Unlock()
		return true, nil
	}
	d.closed = true
	d.mu.Unlock()
	return CloseUnlessInterrupted(d.ctx, closeFn)
}

// LeaveOpen leaves the device to the process's exit: a probe that stopped
// may have abandoned work on it that closing would wait for.
func (d *Device) LeaveOpen() {
	d.mu.Lock()
	d.keep = true
	d.mu.Unlock()
}

// finish closes the device unless the run did or asked not to.
func (d *Device) finish() {
	_, _ = d.CloseWith(d.Device.Close)
	if d.release != nil {
		d.release()
	}
}

// RunE is the cobra RunE of a command whose options are a Check: it
// completes and validates the options, then runs them (runF instead, when
// set, for tests of the wiring) and hands the result to the runner.
func RunE[C Check](f *Factory, opts C, runF func(C) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := prepare(f, opts, cmd, args); err != nil {
			return err
		}
		if runF != nil {
			return runF(opts)
		}
		out, err := opts.Run(contextOf(f, cmd))
		return f.Finish(out, err)
	}
}

// DeviceRunE is RunE for a command that runs on a device: the runner
// opens it (a SKIP or ERROR result when it cannot, and no run), hands it
// to RunOn, and closes it once RunOn has returned (waiting no longer than
// InterruptGrace once interrupted).
func DeviceRunE[C DeviceCheck](f *Factory, opts C, runF func(C) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := prepare(f, opts, cmd, args); err != nil {
			return err
		}
		if runF != nil {
			return runF(opts)
		}
		ctx := contextOf(f, cmd)
		r, err := runOnDevice(ctx, f, opts)
		var out *Outcome
		if r != nil {
			out = Single(r)
		}
		return f.Finish(out, err)
	}
}

func prepare(f *Factory, opts Options, cmd *cobra.Command, args []string) error {
	if err := opts.Complete(f, cmd, args); err != nil {
		return err
	}
	return opts.Validate()
}

func contextOf(f *Factory, cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	if f.Context != nil {
		return f.Context
	}
	return context.Background()
}

func runOnDevice(ctx context.Context, f *Factory, c DeviceCheck) (*report.Result, error) {
	req := c.Device()
	dev, r, release := req.Open(req.Check, f.Now())
	if dev == nil {
		if release != nil {
			release()
		}
		return r, nil
	}
	d := &Device{Device: dev, Result: r, ctx: ctx, release: release}
	defer d.finish()
	return c.RunOn(ctx, d)
}

// Finish is the runner's end of every command that returns a result: the
// verdict becomes the exit status, here and nowhere else. A run that
// returned no result ends with its error as it is. Otherwise an error
// beside the result makes it an ERROR, an interruption (a signal that came
// before the status was settled) makes it INTERRUPTED with the signal's
// status, and the result is written: the files the output flags name
// first, then the --format view on stdout.
// Tests of a command that change its options before its run end it here
// too: f.Finish(o.Run(ctx)).
func (f *Factory) Finish(out *Outcome, runErr error) error {
	if out == nil {
		// No result to write: a usage error, the tool's failure, or a run
		// whose output is its own (a stress run a parent started).
		return runErr
	}
	in := f.settle()
	if runErr != nil {
		out.doc.fail(runErr)
		if out.err == nil {
			out.err = exitErrorOf(runErr) // said on stderr as it is
		}
	}
	if in != nil {
		out.doc.interrupt(in)
	}
	code := out.doc.exitCode()
	failCode := ExitToolFailure
	if in != nil {
		failCode = code // interrupted it stays, whatever else went wrong
	}
	if werr := f.IOStreams.writeDocument(f.Global.Format, out.doc, failCode, out.after); werr != nil {
		return &resultExit{werr}
	}
	if code == ExitOK {
		return nil
	}
	if out.err != nil {
		ee := *out.err
		ee.Code = code
		return &resultExit{&ee}
	}
	return &resultExit{out.doc.exitError()}
}

// resultExit is how a command that wrote its result ends: its status is
// the result's, which a signal after the status was settled does not
// change.
type resultExit struct{ err error }

func (e *resultExit) Error() string { return e.err.Error() }
func (e *resultExit) Unwrap() error { return e.err }

// isResultExit reports whether err ends a command that wrote its result.
func isResultExit(err error) bool {
	var re *resultExit
	return errors.As(err, &re)
}

// interruptState is what Main and the runner share about the signal that
// stops a run: which came, and whether the exit status is settled, after
// which a signal changes nothing that is written or returned.
type interruptState struct {
	mu      sync.Mutex
	caught  *Interruption
	settled bool
	cancel  context.CancelCauseFunc
}

// caughtHook, when set (tests), is told each signal catch handled.
var caughtHook func(took bool)

// catch records in and cancels the run, unless the status is settled; it
// reports whether it did.
func (s *interruptState) catch(in *Interruption) (took bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if caughtHook != nil {
		defer func() { caughtHook(took) }()
	}
	if s.settled {
		return false
	}
	s.caught = in
	if s.cancel != nil {
		s.cancel(in)
	}
	return true
}

// unsettled is the interruption caught while the status was not yet
// settled, if any.
func (s *interruptState) unsettled() *Interruption {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.settled {
		return nil
	}
	return s.caught
}

// settle fixes the exit status: the interruption caught before, if any,
// is the one the result says; one after it changes nothing.
func (s *interruptState) settle() *Interruption {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settled = true
	return s.caught
}

// settle fixes the exit status of the run (see interruptState.settle).
// Without Main (tests that drive a command directly) the interruption is
// the one the factory's context was cancelled with.
func (f *Factory) settle() *Interruption {
	if f.interrupts != nil {
		return f.interrupts.settle()
	}
	if f.Context == nil || f.Context.Err() == nil {
		return nil
	}
	var in *Interruption
	if errors.As(context.Cause(f.Context), &in) {
		return in
	}
	return &Interruption{}
}
