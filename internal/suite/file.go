// Package suite reads suite files (named miotool checks, each a command
// line with its expected verdict) and runs them, each check in its own
// miotool process, into a report.SuiteResult.
package suite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"miotool/internal/report"
	"miotool/internal/suggest"
)

// DefaultTimeout bounds one run of a check when the suite sets no timeout.
const DefaultTimeout = 10 * time.Minute

// File is a parsed suite file.
type File struct {
	Path  string // the file as given
	Name  string // "suite:", else the file's base name without extension
	Title string
	// Workdir is the directory checks run in: "workdir:" resolved against
	// the suite file's directory; empty means the current directory.
	Workdir string
	Timeout time.Duration // per run; DefaultTimeout when the file sets none
	Env     []string      // KEY=VALUE set for every check
	Checks  []Check
}

// Check is one named check of a suite.
type Check struct {
	Name string
	// Args are miotool's arguments, without the program name, e.g.
	// ["capture", "--mode=global", "--reclaim=lazy"].
	Args    []string
	Expect  report.Verdict
	Env     []string      // KEY=VALUE set for this check
	Timeout time.Duration // 0: the suite's
	Skip    string        // when set, the check is listed but not run
	Line    int           // where the check starts in the file
}

// Error is a problem in a suite file, with the line it is on.
type Error struct {
	File string
	Line int // 0 when the problem has no line
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return e.File + ": " + e.Msg
}

var (
	suiteKeys = []string{"checks", "env", "suite", "timeout", "title", "workdir"}
	checkKeys = []string{"command", "env", "expect", "name", "skip", "timeout"}
)

// Load reads and checks the suite file at path.
//
// reserved are flags a check may not set, because whoever runs the
// suite sets them on every check (how a check writes its result).
func Load(path string, reserved ...string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return Parse(path, data, reserved...)
}

// Parse checks data as the suite file at path. Every problem is an *Error
// naming the file and line; a check that sets a reserved flag is one.
func Parse(path string, data []byte, reserved ...string) (*File, error) {
	fail := func(line int, format string, args ...any) error {
		return &Error{File: path, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fail(yamlErrorLine(err), "%s", yamlErrorText(err))
	}
	if len(doc.Content) == 0 {
		return nil, fail(0, "the file is empty; want a mapping with suite, title and checks")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fail(root.Line, "want a mapping with suite, title and checks")
	}
	base := filepath.Base(path)
	f := &File{Path: path, Name: strings.TrimSuffix(base, filepath.Ext(base)), Timeout: DefaultTimeout}
	var checks *yaml.Node
	checksLine := 0
	err := eachKey(root, suiteKeys, "", fail, func(k, v *yaml.Node) error {
		var err error
		switch k.Value {
		case "suite":
			f.Name, err = scalar(v, "suite", fail)
			if err == nil && strings.TrimSpace(f.Name) == "" {
				err = fail(v.Line, "suite: want a name")
			}
		case "title":
			f.Title, err = scalar(v, "title", fail)
		case "workdir":
			var dir string
			if dir, err = scalar(v, "workdir", fail); err == nil {
				f.Workdir, err = resolveWorkdir(path, dir, v.Line, fail)
			}
		case "timeout":
			f.Timeout, err = duration(v, "timeout", fail)
		case "env":
			f.Env, err = envList(v, "env", fail)
		case "checks":
			checks, checksLine = v, k.Line
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if checks == nil {
		return nil, fail(root.Line, "no checks: add a checks: list")
	}
	if checks.Kind != yaml.SequenceNode || len(checks.Content) == 0 {
		return nil, fail(checksLine, "checks: want a list of checks, each with name, command and expect")
	}
	seen := map[string]int{}
	for _, node := range checks.Content {
		c, err := parseCheck(node, reserved, fail)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[c.Name]; dup {
			return nil, fail(c.Line, "check %q: the name is used already on line %d", c.Name, first)
		}
		seen[c.Name] = c.Line
		f.Checks = append(f.Checks, c)
	}
	return f, nil
}

func parseCheck(node *yaml.Node, reserved []string, fail func(int, string, ...any) error) (Check, error) {
	c := Check{Line: node.Line}
	if node.Kind != yaml.MappingNode {
		return c, fail(node.Line, "a check must be a mapping with name, command and expect")
	}
	// The name first, so that every later message can name the check.
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == "name" {
			name, err := scalar(node.Content[i+1], "name", fail)
			if err != nil {
				return c, err
			}
			c.Name = strings.TrimSpace(name)
		}
	}
	if c.Name == "" {
		return c, fail(node.Line, "a check has no name")
	}
	what := fmt.Sprintf("check %q: ", c.Name)
	hasCommand, hasExpect := false, false
	err := eachKey(node, checkKeys, what, fail, func(k, v *yaml.Node) error {
		var err error
		switch k.Value {
		case "command":
			hasCommand = true
			c.Args, err = commandArgs(v, what, reserved, fail)
		case "expect":
			hasExpect = true
			var s string
			if s, err = scalar(v, what+"expect", fail); err == nil {
				c.Expect, err = expectation(s, v.Line, what, fail)
			}
		case "env":
			c.Env, err = envList(v, what+"env", fail)
		case "timeout":
			c.Timeout, err = duration(v, what+"timeout", fail)
		case "skip":
			c.Skip, err = scalar(v, what+"skip", fail)
			if err == nil && strings.TrimSpace(c.Skip) == "" {
				err = fail(v.Line, "%sskip: give the reason the check is not run", what)
			}
		}
		return err
	})
	switch {
	case err != nil:
		return c, err
	case !hasCommand:
		return c, fail(node.Line, "%sno command: add command: the miotool command line to run", what)
	case !hasExpect:
		return c, fail(node.Line, "%sno expect: add expect: PASS, FAIL or SKIP", what)
	}
	return c, nil
}

// eachKey calls fn for each key of mapping m, rejecting keys outside known
// and keys given twice.
func eachKey(m *yaml.Node, known []string, what string, fail func(int, string, ...any) error, fn func(k, v *yaml.Node) error) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if !slices.Contains(known, k.Value) {
			return fail(k.Line, "%sunknown key %q%s (known keys: %s)", what, k.Value, didYouMean(k.Value, known), strings.Join(known, ", "))
		}
		if first, dup := seen[k.Value]; dup {
			return fail(k.Line, "%s%s is given twice (first on line %d)", what, k.Value, first)
		}
		seen[k.Value] = k.Line
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// didYouMean is " (did you mean X?)" for a key a few edits from a known one.
func didYouMean(key string, known []string) string {
	if k, ok := suggest.Closest(key, known); ok {
		return fmt.Sprintf(" (did you mean %s?)", k)
	}
	return ""
}

func scalar(v *yaml.Node, what string, fail func(int, string, ...any) error) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", fail(v.Line, "%s: want a single value", what)
	}
	return v.Value, nil
}

func duration(v *yaml.Node, what string, fail func(int, string, ...any) error) (time.Duration, error) {
	s, err := scalar(v, what, fail)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0, fail(v.Line, "%s: %q is not a positive duration such as 90s or 10m", what, s)
	}
	return d, nil
}

// expectation accepts the verdicts a check may be expected to give.
func expectation(s string, line int, what string, fail func(int, string, ...any) error) (report.Verdict, error) {
	v, err := report.ParseVerdict(s)
	if err != nil || v == report.Error {
		return "", fail(line, "%sexpect: %q is not a verdict a check can be expected to give (want PASS, FAIL or SKIP)", what, s)
	}
	return v, nil
}

// commandArgs reads a command given as one line ("miotool capture
// --mode=global") or as a list of words; a leading "miotool" is dropped.
func commandArgs(v *yaml.Node, what string, reserved []string, fail func(int, string, ...any) error) ([]string, error) {
	var words []string
	switch v.Kind {
	case yaml.ScalarNode:
		w, err := report.SplitCommandLine(v.Value)
		if err != nil {
			return nil, fail(v.Line, "%scommand: %v", what, err)
		}
		words = w
	case yaml.SequenceNode:
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return nil, fail(item.Line, "%scommand: want a list of words", what)
			}
			words = append(words, item.Value)
		}
	default:
		return nil, fail(v.Line, "%scommand: want a command line or a list of words", what)
	}
	if len(words) > 0 && (words[0] == "miotool" || strings.HasSuffix(words[0], "/miotool")) {
		words = words[1:]
	}
	if len(words) == 0 {
		return nil, fail(v.Line, "%scommand is empty: give a miotool command such as capture --mode=global", what)
	}
	if words[0] == "report" {
		return nil, fail(v.Line, "%scommand: a suite cannot run `miotool report`", what)
	}
	for _, w := range words {
		name, _, _ := strings.Cut(w, "=")
		if slices.Contains(reserved, name) {
			return nil, fail(v.Line, "%scommand sets %s: the suite chooses how checks write their results; remove it", what, name)
		}
	}
	return words, nil
}

// envList reads a mapping of variable names to values (or a list of
// KEY=VALUE) as KEY=VALUE strings in file order.
func envList(v *yaml.Node, what string, fail func(int, string, ...any) error) ([]string, error) {
	var out []string
	switch v.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			k, val := v.Content[i], v.Content[i+1]
			if err := checkEnvName(k.Value); err != nil {
				return nil, fail(k.Line, "%s: %v", what, err)
			}
			if val.Kind != yaml.ScalarNode {
				return nil, fail(val.Line, "%s: %s: want a single value", what, k.Value)
			}
			out = append(out, k.Value+"="+val.Value)
		}
	case yaml.SequenceNode:
		for _, item := range v.Content {
			kv, err := ParseEnvAssignment(item.Value)
			if item.Kind != yaml.ScalarNode || err != nil {
				return nil, fail(item.Line, "%s: %q: want KEY=VALUE", what, item.Value)
			}
			out = append(out, kv)
		}
	default:
		return nil, fail(v.Line, "%s: want a mapping of variable names to values", what)
	}
	return out, nil
}

// ParseEnvAssignment checks one KEY=VALUE and returns it unchanged.
func ParseEnvAssignment(s string) (string, error) {
	k, _, ok := strings.Cut(s, "=")
	if !ok {
		return "", fmt.Errorf("%q: want KEY=VALUE", s)
	}
	if err := checkEnvName(k); err != nil {
		return "", fmt.Errorf("%q: %v", s, err)
	}
	return s, nil
}

func checkEnvName(k string) error {
	if k == "" {
		return errors.New("empty variable name")
	}
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return fmt.Errorf("%q is not a variable name (letters, digits and _, not starting with a digit)", k)
		}
	}
	return nil
}

// resolveWorkdir resolves dir against the suite file's directory and
// checks that it is a directory.
func resolveWorkdir(path, dir string, line int, fail func(int, string, ...any) error) (string, error) {
	if strings.TrimSpace(dir) == "" {
		return "", fail(line, "workdir: want a directory")
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(filepath.Dir(path), dir)
	}
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return "", fail(line, "workdir %s: %v", dir, errors.Unwrap(err))
	case !st.IsDir():
		return "", fail(line, "workdir %s is not a directory", dir)
	}
	return dir, nil
}

// yamlErrorLine digs the line out of a YAML syntax error ("yaml: line 7: ...").
func yamlErrorLine(err error) int {
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); scanErr == nil {
		return line
	}
	return 0
}

func yamlErrorText(err error) string {
	s := strings.Join(strings.Fields(strings.TrimPrefix(err.Error(), "yaml: ")), " ")
	if i := strings.Index(s, ": "); i > 0 && strings.HasPrefix(s, "line ") {
		s = s[i+2:]
	}
	return s
}
