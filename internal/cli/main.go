package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the command line args with the root command that newRoot
// builds, prints any error, and returns the exit code. The binary's main is
// os.Exit(cli.Main(...)).
//
// The first SIGINT or SIGTERM cancels the command's context with an
// *Interruption as its cause: the command writes what it finished and
// Main exits 130 (SIGINT) or 143 (SIGTERM). A second one ends the process
// at once, as if miotool did not catch it; its children die with it.
func Main(f *Factory, args []string, newRoot func(*Factory) *cobra.Command) (code int) {
	ctx, cancel := context.WithCancelCause(f.Context)
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var caught atomic.Pointer[Interruption]
	go func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs)
			in := &Interruption{Signal: sig}
			caught.Store(in)
			cancel(in)
		case <-ctx.Done():
		}
	}()
	defer func() {
		// Whatever the command made of it, a run the user stopped ends
		// with the signal's status.
		if in := caught.Load(); in != nil {
			code = in.ExitCode()
		}
	}()
	f.Context = ctx
	f.Args = args

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
	root.SetIn(f.IOStreams.In)
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)

	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if cmd == nil {
		cmd = root
	}
	return printError(f, cmd, err)
}

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
	if ee.Silent {
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
