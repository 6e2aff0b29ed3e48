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
	// FindDB is the find-db the checks run on: a scratch one of each
	// suite run's own unless the file asks for the user's.
	FindDB FindDB
	// EnvLine is the line of the suite's env, for what it sets.
	EnvLine int
	// Loads are the KEY=VALUE of Env that make a process load or run
	// other code.
	Loads  []string
	Checks []Check
}

// FindDB names the find-db a suite's checks run on.
type FindDB string

const (
	// FindDBScratch is a folder of the suite run's own, removed after
	// it: what a suite's find checks write never reaches the user's db.
	FindDBScratch FindDB = "scratch"
	// FindDBUser is the user's own (MIOPEN_USER_DB_PATH, or its default).
	FindDBUser FindDB = "user"
)

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
	// Exclusive checks run with no other check beside them, whatever
	// --jobs says: those whose verdict rests on timing or on a race that
	// a neighbour's load would change. Set by the file's exclusive key,
	// else by the command (ExclusiveCommands).
	Exclusive bool
	// Command is the miotool command the check runs, e.g. "capture".
	Command string
	// Program is what a trace or repeat check runs: the program and its
	// arguments, after "--". Nil for miotool's own checks.
	Program []string
	// Others are the command lines of further programs the check runs
	// (repeat's unfixed build, --against); nil for most.
	Others []string
	// Library is a library the check loads into its program (trace's
	// observer flag); "" when none.
	Library string
	// Loads are the KEY=VALUE of the check's own env that make a process
	// load or run other code (LD_PRELOAD and the like).
	Loads []string
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
	suiteKeys = []string{"checks", "env", "find-db", "suite", "timeout", "title", "workdir"}
	checkKeys = []string{"command", "env", "exclusive", "expect", "name", "skip", "timeout"}
)

// CheckCommands are the miotool commands a suite check may run: those
// that check something and print its result. version, help, completion
// and report print none.
var CheckCommands = []string{"capture", "doctor", "find", "heuristic", "repeat", "replay", "rules", "stress-threads", "trace"}

// ProgramCommands are the checks that run a program given after "--",
// which only a user who allows programs lets a suite run.
var ProgramCommands = []string{"repeat", "trace"}

// ExclusiveCommands are the commands whose checks run alone unless the
// suite file says otherwise: find's verdict rests on the naive
// evaluation overrunning a multiple of the best solver's time, which a
// neighbour's load shifts; stress-threads measures a race, and starts
// processes of its own on every core; trace runs a program miotool knows
// nothing about; repeat runs a program many times and counts how often it
// fails, which a neighbour's load changes.
var ExclusiveCommands = []string{"find", "repeat", "stress-threads", "trace"}

// Spellings are the words of miotool's command line that a suite file's
// commands are read and refused by. The command layer spells them from
// its command tree; this package only compares words against them.
type Spellings struct {
	// Reserved are flags a check may not set, because whoever runs the
	// suite sets them on every check (how a check writes its result).
	Reserved []string
	// GlobalValue are the global flags that take a value, so that the
	// command word after them is found.
	GlobalValue []string
	// NoResult are flags with which a command prints help or its
	// version, not a result.
	NoResult []string
	// Writes are flags with which a command writes a file of its own,
	// which a check, that compares, does not.
	Writes []string
	// AllowPrograms is the flag a user lets a suite run programs with,
	// as refusals name it.
	AllowPrograms string
	// Library are flags with which a check loads a library into the
	// program it runs.
	Library []string
	// Programs are flags whose value is the command line of another
	// program a check runs (repeat's --against).
	Programs []string
	// LoadingEnv are miotool's own variables that make a check load
	// code (the environment's forms of the Library flags, and the like).
	LoadingEnv []string
}

// LoadOptions say what a suite file may ask for.
type LoadOptions struct {
	Flags Spellings
	// AllowPrograms lets checks run programs other than miotool
	// (`miotool trace -- PROGRAM`) and set variables that make a process
	// load other code (LD_PRELOAD): the user allowed it on the command
	// line. Without it such a suite is refused.
	AllowPrograms bool
}

// LoadWith reads and checks the suite file at path.
func LoadWith(path string, opts LoadOptions) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return ParseWith(path, data, opts)
}

// ParseWith checks data as the suite file at path. Every problem is an
// *Error naming the file and line: a check that sets a reserved flag, a
// command that is not a miotool check, a program or a code-loading
// variable the options do not allow.
func ParseWith(path string, data []byte, opts LoadOptions) (*File, error) {
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
	f := &File{Path: path, Name: strings.TrimSuffix(base, filepath.Ext(base)), Timeout: DefaultTimeout, FindDB: FindDBScratch}
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
			f.EnvLine = k.Line
			if f.Env, err = envList(v, "env", fail); err == nil {
				f.Loads, err = checkEnv(f.Env, v, "env", opts, fail)
			}
		case "find-db":
			var db string
			if db, err = scalar(v, "find-db", fail); err == nil {
				switch FindDB(strings.TrimSpace(db)) {
				case FindDBScratch, FindDBUser:
					f.FindDB = FindDB(strings.TrimSpace(db))
				default:
					err = fail(v.Line, "find-db: %q: want scratch (the default: a folder of the suite run's own, removed after) or user (MIOPEN_USER_DB_PATH, or its default)", db)
				}
			}
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
		c, err := parseCheck(node, opts, fail)
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

func parseCheck(node *yaml.Node, opts LoadOptions, fail func(int, string, ...any) error) (Check, error) {
	c := Check{Line: node.Line}
	if node.Kind != yaml.MappingNode {
		return c, fail(node.Line, "a check must be a mapping with name, command and expect")
	}
	// The name first, so that every later message can name the check.
	name, err := checkName(node, fail)
	if err != nil {
		return c, err
	}
	c.Name = name
	what := fmt.Sprintf("check %q: ", c.Name)
	hasCommand, hasExpect := false, false
	var exclusive *bool
	err = eachKey(node, checkKeys, what, fail, func(k, v *yaml.Node) error {
		var err error
		switch k.Value {
		case "command":
			hasCommand = true
			err = c.parseCommand(v, what, opts, fail)
		case "exclusive":
			var b bool
			if v.Kind != yaml.ScalarNode || v.Decode(&b) != nil {
				return fail(v.Line, "%sexclusive: %q: want true (the check runs with no other beside it) or false", what, v.Value)
			}
			exclusive = &b
		case "expect":
			hasExpect = true
			var s string
			if s, err = scalar(v, what+"expect", fail); err == nil {
				c.Expect, err = expectation(s, v.Line, what, fail)
			}
		case "env":
			if c.Env, err = envList(v, what+"env", fail); err == nil {
				c.Loads, err = checkEnv(c.Env, v, what+"env", opts, fail)
			}
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
	c.Exclusive = slices.Contains(ExclusiveCommands, c.Command)
	if exclusive != nil {
		c.Exclusive = *exclusive
	}
	return c, nil
}

// checkName is the name a check's mapping gives it; a check without one
// is refused.
func checkName(node *yaml.Node, fail func(int, string, ...any) error) (string, error) {
	name := ""
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == "name" {
			v, err := scalar(node.Content[i+1], "name", fail)
			if err != nil {
				return "", err
			}
			name = strings.TrimSpace(v)
		}
	}
	if name == "" {
		return "", fail(node.Line, "a check has no name")
	}
	return name, nil
}

// parseCommand reads a check's command: its words, and for one that runs
// another program that program, the library it loads and the other
// program it names.
func (c *Check) parseCommand(v *yaml.Node, what string, opts LoadOptions, fail func(int, string, ...any) error) error {
	var err error
	if c.Args, c.Command, err = commandArgs(v, what, opts.Flags, fail); err != nil {
		return err
	}
	if c.Program, err = programOf(c.Args, c.Command, v.Line, what, opts, fail); err != nil || c.Program == nil {
		return err
	}
	c.Library = flagValue(ownWords(c.Args), opts.Flags.Library)
	if other := flagValue(ownWords(c.Args), opts.Flags.Programs); other != "" {
		c.Others = []string{other}
	}
	return nil
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
func commandArgs(v *yaml.Node, what string, flags Spellings, fail func(int, string, ...any) error) ([]string, string, error) {
	var words []string
	switch v.Kind {
	case yaml.ScalarNode:
		w, err := report.SplitCommandLine(v.Value)
		if err != nil {
			return nil, "", fail(v.Line, "%scommand: %v", what, err)
		}
		words = w
	case yaml.SequenceNode:
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return nil, "", fail(item.Line, "%scommand: want a list of words", what)
			}
			words = append(words, item.Value)
		}
	default:
		return nil, "", fail(v.Line, "%scommand: want a command line or a list of words", what)
	}
	if len(words) > 0 && strings.Contains(words[0], "/") {
		// Another binary's path would silently run this one.
		rest := append([]string{"miotool"}, words[1:]...)
		return nil, "", fail(v.Line, "%scommand: %s: suites run this miotool; write `%s`", what, words[0], report.JoinCommandLine(rest))
	}
	if len(words) > 0 && words[0] == "miotool" {
		words = words[1:]
	}
	if len(words) == 0 {
		return nil, "", fail(v.Line, "%scommand is empty: give the miotool command the check runs, one of %s", what, strings.Join(CheckCommands, ", "))
	}
	own := ownWords(words)
	for _, w := range own {
		name, _, _ := strings.Cut(w, "=")
		if slices.Contains(flags.Reserved, name) {
			return nil, "", fail(v.Line, "%scommand sets %s: the suite chooses how checks write their results; remove it", what, name)
		}
		switch {
		case slices.Contains(flags.NoResult, name):
			return nil, "", fail(v.Line, "%scommand: %s prints help, not a result: remove it", what, name)
		case slices.Contains(flags.Writes, name):
			return nil, "", fail(v.Line, "%scommand sets %s: a check compares, it does not write files; run that command yourself", what, name)
		}
	}
	cmd, at := commandWord(own, flags.GlobalValue)
	line := report.JoinCommandLine(append([]string{"miotool"}, words...))
	switch {
	case at < 0:
		return nil, "", fail(v.Line, "%scommand `%s` names no miotool command; a check is one of %s", what, line, strings.Join(CheckCommands, ", "))
	case cmd == "report":
		return nil, "", fail(v.Line, "%scommand: a suite cannot run `miotool report`", what)
	case !slices.Contains(CheckCommands, cmd):
		why := "is not a miotool command" + didYouMean(cmd, CheckCommands)
		if slices.Contains(resultlessCommands, cmd) {
			why = "prints no result to check"
		}
		return nil, "", fail(v.Line, "%scommand `%s`: %s %s; a check is one of %s", what, line, cmd, why, strings.Join(CheckCommands, ", "))
	}
	return words, cmd, nil
}

// resultlessCommands are miotool commands that print no result a suite
// could check.
var resultlessCommands = []string{"completion", "gen-man", "help", "version"}

// ownWords are miotool's own words of a command line: those before a
// "--", after which a trace check's program and its arguments follow.
func ownWords(words []string) []string {
	if i := slices.Index(words, "--"); i >= 0 {
		return words[:i]
	}
	return words
}

// commandWord is the miotool command a command line runs and its index,
// past any global flags before it (globalValue: those that take a value);
// -1 when it names none.
func commandWord(words, globalValue []string) (string, int) {
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			return w, i
		}
		if slices.Contains(globalValue, w) {
			i++ // its value
		}
	}
	return "", -1
}

// programOf is the program a `miotool trace [flags] -- PROGRAM [ARGS...]`
// or `miotool repeat ...` check runs, which only a user who allows
// programs lets it; nil for every other check.
func programOf(args []string, command string, line int, what string, opts LoadOptions, fail func(int, string, ...any) error) ([]string, error) {
	if !slices.Contains(ProgramCommands, command) {
		return nil, nil
	}
	i := slices.Index(args, "--")
	if i < 0 || i+1 == len(args) {
		return nil, fail(line, "%scommand: %s runs the program given after --: write `miotool %s [flags] -- PROGRAM [ARGS...]`", what, command, command)
	}
	program := slices.Clone(args[i+1:])
	if !opts.AllowPrograms {
		return nil, fail(line, "%sruns the program %s (`%s`): a suite runs programs other than miotool only when you allow it with %s",
			what, program[0], report.JoinCommandLine(program), opts.Flags.AllowPrograms)
	}
	return program, nil
}

// loaderVariables make a process load or run code of their naming: the
// dynamic loader's (every LD_*), the program search path and compiler
// trace builds its observer with, the runtimes' tool and injection hooks,
// and the folders GPU libraries are loaded from; miotool's own are the
// Spellings' LoadingEnv.
var loaderVariables = []string{"PATH", "CC", "CUDA_INJECTION64_PATH", "HSA_TOOLS_LIB", "ROCP_TOOL_LIBRARIES",
	"ROCM_PATH", "HIP_PATH", "CUDA_HOME", "CUDA_PATH"}

// loads reports whether setting name makes a process load or run code
// the value names.
func (f Spellings) loads(name string) bool {
	return strings.HasPrefix(name, "LD_") || slices.Contains(loaderVariables, name) || slices.Contains(f.LoadingEnv, name)
}

// checkEnv checks a suite's or a check's env: it may not choose where
// find writes (find-db says that), and may set code-loading variables
// only where programs are allowed. It returns those it sets.
func checkEnv(env []string, v *yaml.Node, what string, opts LoadOptions, fail func(int, string, ...any) error) ([]string, error) {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		line := envLine(v, name)
		switch {
		case name == "MIOPEN_USER_DB_PATH":
			return nil, fail(line, "%s: MIOPEN_USER_DB_PATH: a suite does not choose where find writes: its checks run on a scratch find-db, or with `find-db: user` on yours", what)
		case opts.Flags.loads(name) && !opts.AllowPrograms:
			return nil, fail(line, "%s: %s makes every check's process load or run what it names (%s): a suite sets it only when you allow programs with %s", what, name, kv, opts.Flags.AllowPrograms)
		case opts.Flags.loads(name):
			out = append(out, kv)
		}
	}
	return out, nil
}

// envLine is the line where an env mapping or list sets name.
func envLine(v *yaml.Node, name string) int {
	for i, n := range v.Content {
		if v.Kind == yaml.MappingNode && i%2 == 0 && n.Value == name {
			return n.Line
		}
		if v.Kind == yaml.SequenceNode && strings.HasPrefix(n.Value, name+"=") {
			return n.Line
		}
	}
	return v.Line
}

// flagValue is the value words give one of flags ("--flag V" or
// "--flag=V"); "" when they give none.
func flagValue(words []string, flags []string) string {
	for i, w := range words {
		for _, flag := range flags {
			if v, ok := strings.CutPrefix(w, flag+"="); ok {
				return v
			}
			if w == flag && i+1 < len(words) {
				return words[i+1]
			}
		}
	}
	return ""
}

// Programs say, one line each, what of a suite runs other code than
// miotool's: each trace check's program and each code-loading variable,
// with the line of the file that asks for it. Empty for a suite of
// miotool's own checks.
func (f *File) Programs() []string {
	var out []string
	for _, kv := range f.Loads {
		out = append(out, fmt.Sprintf("%s:%d: every check's environment sets %s", f.Path, f.EnvLine, kv))
	}
	for _, c := range f.Checks {
		if c.Program != nil {
			out = append(out, fmt.Sprintf("%s:%d: check %q runs %s", f.Path, c.Line, c.Name, report.JoinCommandLine(c.Program)))
			if c.Library != "" {
				out = append(out, fmt.Sprintf("%s:%d: check %q loads the library %s into it", f.Path, c.Line, c.Name, c.Library))
			}
			for _, o := range c.Others {
				out = append(out, fmt.Sprintf("%s:%d: check %q also runs %s", f.Path, c.Line, c.Name, o))
			}
		}
		for _, kv := range c.Loads {
			out = append(out, fmt.Sprintf("%s:%d: check %q's environment sets %s", f.Path, c.Line, c.Name, kv))
		}
	}
	return out
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
