package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the command line args with the root command that newRoot
// builds, writes the result the command rendered, prints any error, and
// returns the exit code. The binary's main is os.Exit(cli.Main(...)).
//
// The first SIGINT or SIGTERM cancels the command's context with an
// *Interruption as its cause: the command writes what it finished and
// Main exits 130 (SIGINT) or 143 (SIGTERM). A second one ends the process
// at once, as if miotool did not catch it; its children die with it.
// SIGQUIT (Ctrl-\) quits at once with every goroutine's stack on stderr,
// exit 131 (see handleQuit).
//
// A command's result is written by the runner (RunE, DeviceRunE), which
// computes the exit status from its verdict; Main exits with it. A write
// to stdout that fails, whatever made it (a result, help, a completion
// script), is exit 3, said on stderr.
func Main(f *Factory, args []string, newRoot func(*Factory) *cobra.Command) (code int) {
	ctx, cancel := context.WithCancelCause(f.Context)
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	state := &interruptState{cancel: cancel}
	go func() {
		select {
		case sig := <-sigs:
			// A second signal ends the process at once, as if miotool
			// did not catch it; one that comes after the exit status is
			// settled changes nothing.
			signal.Stop(sigs)
			state.catch(&Interruption{Signal: sig})
		case <-ctx.Done():
		}
	}()
	// Asked for, SIGPIPE is delivered to this channel, which nobody reads,
	// and a write to a pipe whose reader has gone fails with EPIPE rather
	// than killing the process, as Go does for stdout otherwise: the
	// files were written before stdout, and the lost output is reported.
	// Unlike signal.Ignore, this leaves the programs miotool starts with
	// the default SIGPIPE.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)
	defer handleQuit(f.IOStreams.ErrOut)()
	defer func() {
		// Whatever the command made of it (a panic included), a run the
		// user stopped before its status was settled ends with the
		// signal's status.
		if in := state.unsettled(); in != nil {
			code = in.ExitCode()
		}
	}()
	f.Context = ctx
	f.interrupts = state
	f.Args = args

	ios := f.IOStreams
	stdout := &stdoutWriter{w: ios.Out}
	savedOut := ios.Out
	ios.Out = stdout
	defer func() { ios.Out = savedOut }()

	// A panic is a bug in miotool, not bad input: report it as a tool
	// failure with the stack, which a bug report needs.
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(f.IOStreams.ErrOut, "miotool: internal error: %v\n%s", p, debug.Stack())
			code = ExitToolFailure
		}
	}()

	root := newRoot(f)
	prepareRoot(root)
	root.SetArgs(args)
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)

	cmd, err := root.ExecuteContextC(ctx)
	if cmd == nil {
		cmd = root
	}
	code = ExitCodeOf(err)
	if in := state.settle(); in != nil && !isResultExit(err) {
		// A command that returned no result (help, version, an error
		// before its run) ends with the signal's status all the same.
		code = in.ExitCode()
	}
	if err != nil {
		printError(f, cmd, err)
	}
	if serr := stdout.failed(); serr != nil && code < 128 {
		fmt.Fprintf(ios.ErrOut, "miotool: %v\n", serr)
		code = ExitToolFailure
	}
	return code
}

// handleQuit makes SIGQUIT (Ctrl-\) what a user means by it, quit now: the
// stacks of every goroutine on stderr, as Go's own handler prints them
// (where a hang is is what one asks a hung program for), then exit 131,
// 128+SIGQUIT, at once and without a result. Go's own handler would exit
// 2, which reads as a usage error. The returned func stops handling it.
func handleQuit(errOut io.Writer) (stop func()) {
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	done := make(chan struct{})
	go func() {
		select {
		case <-quit:
			buf := make([]byte, 64<<10)
			for {
				n := runtime.Stack(buf, true)
				if n < len(buf) {
					buf = buf[:n]
					break
				}
				buf = make([]byte, 2*len(buf))
			}
			fmt.Fprintf(errOut, "miotool: quit by SIGQUIT; the goroutines were:\n\n%s", buf)
			exitNow(ExitQuit)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(quit)
		close(done)
	}
}

// exitNow ends the process; tests replace it.
var exitNow = os.Exit

// prepareRoot gives the help command an example like every other command,
// and marks the errors of every command's argument check as usage errors.
func prepareRoot(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" && c.Example == "" {
			c.Example = "  miotool help rules"
		}
	}
	markArgErrors(root)
}

// markArgErrors makes the argument check of every command under c (cobra's
// NoArgs, ExactArgs, OnlyValidArgs and the like) return usage errors, as
// its flag error hook does for flags: wrong arguments are bad input.
func markArgErrors(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error { return UsageError(check(cmd, args)) }
	}
	for _, sub := range c.Commands() {
		markArgErrors(sub)
	}
}

var unknownCommand = regexp.MustCompile(`^unknown command "([^"]*)" for "([^"]*)"`)

// printError writes err as one line (plus a hint for usage errors) and
// returns its exit code, the one ExitCodeOf gives.
func printError(f *Factory, cmd *cobra.Command, err error) int {
	ee := exitErrorOf(err)
	if ee.Silent || isStdoutError(err) {
		return ee.Code
	}
	msg := oneLineErr(ee)
	if m := unknownCommand.FindStringSubmatch(msg); m != nil {
		if s := cmd.SuggestionsFor(m[1]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", s[0])
		}
	}
	fmt.Fprintf(f.IOStreams.ErrOut, "miotool: %s\n", strings.TrimPrefix(msg, "miotool: "))
	if ee.Code == ExitUsage {
		hint := ee.Hint
		if hint == "" {
			hint = UsageHint(cmd)
		}
		fmt.Fprintln(f.IOStreams.ErrOut, hint)
	}
	return ee.Code
}
