// Package cli is the plumbing every miotool command shares, and where the
// flags that several commands print are spelled: IO streams with terminal
// detection, exit codes and the typed exit error, the global options,
// configuration loading (flags, MIOTOOL_* environment, config file), flag
// types and list parsing, the output flags and the child command lines
// built from them, and the flag spellings results print. The commands
// themselves are in internal/cmd.
package cli

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/term"
)

// IOStreams are a command's standard streams plus what is known about them.
// Commands write only through these, so tests can read what they print.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdoutTTY bool
	stderrTTY bool
	color     bool

	out *outputState
}

// System returns the process's streams. Colour is on only for a terminal,
// and off when NO_COLOR is set or TERM is "dumb".
func System() *IOStreams {
	s := &IOStreams{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		stdoutTTY: term.IsTerminal(int(os.Stdout.Fd())),
		stderrTTY: term.IsTerminal(int(os.Stderr.Fd())),
	}
	_, noColor := os.LookupEnv("NO_COLOR")
	s.color = s.stdoutTTY && !noColor && os.Getenv("TERM") != "dumb"
	return s
}

// Test returns streams backed by buffers (stdin, stdout, stderr), none of
// them a terminal.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdoutTTY reports whether standard output is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// SetStdoutTTY overrides terminal detection for standard output (tests).
func (s *IOStreams) SetStdoutTTY(v bool) { s.stdoutTTY = v }

// IsStderrTTY reports whether standard error is a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// SetStderrTTY overrides terminal detection for standard error (tests).
func (s *IOStreams) SetStderrTTY(v bool) { s.stderrTTY = v }

// ColorEnabled reports whether output may use ANSI colours.
func (s *IOStreams) ColorEnabled() bool { return s.color }

// SetColorEnabled overrides the colour decision (tests).
func (s *IOStreams) SetColorEnabled(v bool) { s.color = v }

// OutFile is the file standard output is, when it is one (a terminal, a
// pipe, a regular file), also while Main wraps Out to catch a failed
// write; nil when Out is no file (tests' buffers). A program miotool runs
// is given this very file, so that it sees what it would see without
// miotool.
func (s *IOStreams) OutFile() *os.File { return fileOf(s.Out) }

// InFile is the file standard input is, when it is one; nil otherwise.
func (s *IOStreams) InFile() *os.File {
	f, _ := s.In.(*os.File)
	return f
}

// fileOf is the file w writes to, through Main's wrapper; nil for a
// writer that is no file.
func fileOf(w io.Writer) *os.File {
	switch w := w.(type) {
	case *os.File:
		return w
	case *stdoutWriter:
		return fileOf(w.w)
	}
	return nil
}
