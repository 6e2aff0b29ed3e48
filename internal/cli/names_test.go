package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"miotool/internal/report"
	"miotool/internal/runenv"
)

// environOf is an Environ listing env, for a Factory whose LookupEnv is
// envOf(env).
func environOf(env map[string]string) func() []string {
	return func() []string {
		var out []string
		for k, v := range env {
			out = append(out, k+"="+v)
		}
		slices.Sort(out)
		return out
	}
}

// A MIOTOOL_* variable that changes nothing says so on stderr, naming the
// variable it was probably meant to be, and the run goes on as it would
// without it; the variables miotool reads, and empty ones, say nothing.
func TestUnreadEnvironmentVariablesAreNamed(t *testing.T) {
	for _, tt := range []struct {
		name  string
		env   map[string]string
		wants []string // one stderr line each
	}{
		{"a typo of a global key", map[string]string{"MIOTOOL_FROMAT": "json"},
			[]string{"miotool: warning: MIOTOOL_FROMAT is set, but miotool reads no such variable (did you mean MIOTOOL_FORMAT?): it changes nothing"}},
		{"a typo of a command's key", map[string]string{"MIOTOOL_PROBE_LEVLE": "high"},
			[]string{"miotool: warning: MIOTOOL_PROBE_LEVLE is set, but miotool reads no such variable (did you mean MIOTOOL_PROBE_LEVEL?): it changes nothing"}},
		{"nothing near", map[string]string{"MIOTOOL_SKIP_HIP_TOOLCHAIN": "1"},
			[]string{"miotool: warning: MIOTOOL_SKIP_HIP_TOOLCHAIN is set, but miotool reads no such variable: it changes nothing"}},
		{"a result file", map[string]string{"MIOTOOL_CHECK_JUNIT": "r.xml"},
			[]string{"miotool: warning: MIOTOOL_CHECK_JUNIT is set, but --junit is given on the command line only: the variable changes nothing"}},
		{"two", map[string]string{"MIOTOOL_FROMAT": "json", "MIOTOOL_DEVCE": "1"},
			[]string{"miotool: warning: MIOTOOL_DEVCE is set, but miotool reads no such variable (did you mean MIOTOOL_DEVICE?): it changes nothing",
				"miotool: warning: MIOTOOL_FROMAT is set, but miotool reads no such variable (did you mean MIOTOOL_FORMAT?): it changes nothing"}},
		{"read ones", map[string]string{"MIOTOOL_FORMAT": "text", "MIOTOOL_PROBE_LEVEL": "high", "MIOTOOL_NVRTC": "off", "MIOTOOL_TRACE_SOCKET": "/x"}, nil},
		{"an empty one is unset", map[string]string{"MIOTOOL_FROMAT": ""}, nil},
		{"another prefix", map[string]string{"MIOPEN_FROMAT": "x", "XMIOTOOL_FORMAT": "json", "_MIOTOOL_STRESS_RUN": "1"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCLI(t)
			tc.f.LookupEnv, tc.f.Environ = envOf(tt.env), environOf(tt.env)
			if code := tc.run("check"); code != 0 {
				t.Fatalf("exit %d: %s", code, tc.errOut)
			}
			var got []string
			if s := strings.TrimSuffix(tc.errOut.String(), "\n"); s != "" {
				got = strings.Split(s, "\n")
			}
			if !slices.Equal(got, tt.wants) {
				t.Errorf("stderr\n got %q\nwant %q", got, tt.wants)
			}
			if _, err := report.ReadJSON(strings.NewReader(tc.out.String())); err == nil && tt.env["MIOTOOL_FORMAT"] == "" {
				t.Errorf("an unread variable changed the output to JSON")
			}
		})
	}
}

// A variable listed twice is named once; a Factory without Environ checks
// nothing.
func TestUnreadVariableNamedOnce(t *testing.T) {
	tc := newTestCLI(t)
	tc.f.LookupEnv = envOf(map[string]string{"MIOTOOL_FROMAT": "json"})
	tc.f.Environ = func() []string { return []string{"MIOTOOL_FROMAT=json", "MIOTOOL_FROMAT=text"} }
	if code := tc.run("check"); code != 0 || strings.Count(tc.errOut.String(), "MIOTOOL_FROMAT") != 1 {
		t.Errorf("exit %d, stderr %q", code, tc.errOut)
	}
	tc = newTestCLI(t)
	tc.f.LookupEnv, tc.f.Environ = envOf(map[string]string{"MIOTOOL_FROMAT": "json"}), nil
	if code := tc.run("check"); code != 0 || tc.errOut.Len() != 0 {
		t.Errorf("exit %d, stderr %q", code, tc.errOut)
	}
}

// A config file's unknown key is an error that names the nearest known
// key or section: a mistyped section, a command's key at the top level
// (every section that has it), a key one letter off.
func TestConfigKeyTyposNameTheNearestKey(t *testing.T) {
	for _, tt := range []struct{ file, want string }{
		{"porbe:\n  level: 2\n", `line 1: unknown key "porbe" (did you mean probe?)`},
		{"probe:\n  levle: 2\n", `line 2: unknown key "probe.levle" (did you mean probe.level?)`},
		{"mode: 2\n", `line 1: unknown key "mode" (did you mean a.mode or b.mode?)`},
		{"fromat: json\n", `line 1: unknown key "fromat" (did you mean format?)`},
		{"format: json\nformat: text\n", `mapping key "format" already defined at line 1`},
	} {
		tc := newTestCLI(t)
		tc.writeFile(t, "work/miotool.yaml", tt.file)
		code := Main(tc.f, []string{"probe"}, func(f *Factory) *cobra.Command {
			root := tc.newRoot(f)
			for _, name := range []string{"a", "b"} {
				c := &cobra.Command{Use: name, RunE: func(*cobra.Command, []string) error { return nil }}
				c.Flags().String("mode", "", "a flag two commands have")
				root.AddCommand(c)
			}
			return root
		})
		if code != ExitUsage || !strings.Contains(tc.errOut.String(), tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.file, code, tc.errOut, tt.want)
		}
	}
}

// Every MIOTOOL_* name miotool's own code spells (a string literal outside
// tests) is one the check knows as read: a variable of the CUDA backend or
// of trace that runenv.Own forgot would be warned of as unread.
func TestEveryVariableMiotoolReadsIsKnown(t *testing.T) {
	root := filepath.Join("..", "..")
	name := regexp.MustCompile(`^MIOTOOL_[A-Z0-9_]+$`)
	var spelled []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "tools" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && name.MatchString(s) {
					spelled = append(spelled, s+" ("+path+")")
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(spelled) < len(runenv.Own) {
		t.Fatalf("found %d names in the code, fewer than runenv.Own's %d: the walk is broken: %v", len(spelled), len(runenv.Own), spelled)
	}
	tc := newTestCLI(t)
	read, _ := envNames(tc.newRoot(tc.f))
	for _, s := range spelled {
		if v, _, _ := strings.Cut(s, " "); !read[v] {
			t.Errorf("%s is read by miotool but would be warned of as unread: add it to runenv.Own", s)
		}
	}
}
