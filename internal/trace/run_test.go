package trace

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Where the program left miotool's standard output, which says whether
// miotool's result needs a newline first to start on a line of its own:
// exact through a copy and on a regular file, unknown (so a newline) on a
// pipe the program had as it is.
func TestTraceSaysWhereTheProgramLeftStdout(t *testing.T) {
	k := standIns(t)
	dir := t.TempDir()
	file := func(t *testing.T) io.Writer {
		f, err := os.Create(filepath.Join(dir, filepath.Base(t.Name())))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	pipe := func(t *testing.T) io.Writer {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pr.Close(); pw.Close() })
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		return pw
	}
	copied := func(*testing.T) io.Writer { return &bytes.Buffer{} }
	for _, tt := range []struct {
		name    string
		stdout  func(t *testing.T) io.Writer
		printf  string
		want    StdoutEnd
		newline bool
	}{
		{"copied, a line", copied, `a line\n`, StdoutAtLineStart, false},
		{"copied, an open line", copied, `no newline`, StdoutMidLine, true},
		{"copied, nothing", copied, ``, StdoutAtLineStart, false},
		{"a file, a line", file, `a line\n`, StdoutAtLineStart, false},
		{"a file, an open line", file, `no newline`, StdoutMidLine, true},
		{"a pipe", pipe, `a line\n`, StdoutPipe, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			r, err := Run(context.Background(), Options{Program: "/bin/sh", Args: []string{"-c", `printf '` + tt.printf + `'`},
				Observer: k.observer, CUPTI: k.cupti, Stdout: tt.stdout(t), Stderr: &stderr, Timeout: limit,
				Started: func(pid int) { killOnCleanup(t, pid) }})
			if err != nil {
				t.Fatal(err)
			}
			if !r.Exit.OK() || r.Exit.Stdout != tt.want || r.Exit.Stdout.NewlineFirst() != tt.newline {
				t.Fatalf("exit %+v (stderr %q); want stdout %v, newline first %v", r.Exit, stderr.String(), tt.want, tt.newline)
			}
		})
	}
}
