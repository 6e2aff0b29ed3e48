package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"miotool/internal/report"
)

// A command whose arguments are a program and its arguments (trace) may
// not write a result over the program as $PATH finds it, a file an
// argument names, also inside --opt=FILE or -oFILE, or the file that is
// its standard input, which the program reads; through a link or another
// path it is the same file.
func TestAnOutputThatTheProgramReadsIsRefused(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(bin, "prog")
	in := filepath.Join(dir, "in.txt")
	for path, mode := range map[string]os.FileMode{prog: 0o755, in: 0o644} {
		if err := os.WriteFile(path, []byte("keep me\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	progLink, inHard := filepath.Join(dir, "prog-link"), filepath.Join(dir, "in-hard.txt")
	if err := os.Symlink(prog, progLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(in, inHard); err != nil {
		t.Fatal(err)
	}
	beside := filepath.Join(dir, "result.xml")
	for _, tt := range []struct {
		name  string
		stdin string // a file open as standard input
		args  []string
		want  string // "" when it runs
	}{
		{"the program as $PATH finds it", "", []string{"merge", "--junit", prog, "--", "prog"},
			"--junit " + prog + ": is the program prog as $PATH finds it (" + prog + "), which miotool merge reads"},
		{"the program through a link", "", []string{"merge", "--export-json", progLink, "--", "prog"}, "is the program prog as $PATH finds it"},
		{"an argument", "", []string{"merge", "--junit", in, "--", "prog", in}, "is the file " + in + " the argument names"},
		{"after --opt=", "", []string{"merge", "--junit", in, "--", "prog", "--in=" + in},
			"is the file " + in + " the argument --in=" + in + " names"},
		{"after if=", "", []string{"merge", "--junit", inHard, "--", "prog", "if=" + in}, "the argument if=" + in + " names"},
		{"after a short option's letter", "", []string{"merge", "--junit", in, "--", "prog", "-i" + in}, "the argument -i" + in + " names"},
		{"standard input", in, []string{"merge", "--junit", in, "--", "prog"}, "is the file open as standard input"},
		{"standard input by another name", in, []string{"merge", "--export-markdown", inHard, "--", "prog"}, "is the file open as standard input"},
		{"a file beside them", in, []string{"merge", "--junit", beside, "--", "prog", "--in=" + in, "-i" + in}, ""},
		{"a name inside an argument that is no file yet", "", []string{"merge", "--junit", beside, "--", "prog", "--out=" + beside + ".x"}, ""},
		{"the null device as input and output", os.DevNull, []string{"merge", "--junit", os.DevNull, "--", "prog"}, ""},
		{"a program with a slash is not looked up", "", []string{"merge", "--junit", beside, "--", "./prog"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCLI(t)
			tc.f.LookupEnv = func(k string) (string, bool) {
				if k == "PATH" {
					return bin, true
				}
				return "", false
			}
			if tt.stdin != "" {
				f, err := os.Open(tt.stdin)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				tc.f.IOStreams.In = f
			}
			ran := false
			tc.checkRun = func() (*Outcome, error) { ran = true; return Single(testResult(report.Pass)), nil }
			code := tc.run(tt.args...)
			if tt.want == "" {
				if code != 0 || !ran {
					t.Fatalf("exit %d, ran %v: %s", code, ran, tc.errOut)
				}
				return
			}
			if code != ExitUsage || ran {
				t.Fatalf("exit %d, ran %v; want 2 before the command runs: %s", code, ran, tc.errOut)
			}
			if first, _, _ := strings.Cut(tc.errOut.String(), "\n"); !strings.HasPrefix(first, "miotool: ") || !strings.Contains(first, tt.want) {
				t.Errorf("stderr %q, want its first line to say %q", tc.errOut, tt.want)
			}
		})
	}
	for _, f := range []string{prog, in} {
		if data, err := os.ReadFile(f); err != nil || string(data) != "keep me\n" {
			t.Errorf("%s holds %q (%v)", f, data, err)
		}
	}
	_ = os.Remove(beside)
}
