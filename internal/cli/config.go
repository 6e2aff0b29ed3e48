package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"miotool/internal/runenv"
	"miotool/internal/suggest"
)

// EnvPrefix prefixes the environment variables that set flags:
// --no-progress is MIOTOOL_NO_PROGRESS, rules' --dialect is
// MIOTOOL_RULES_DIALECT.
const EnvPrefix = "MIOTOOL"

// EnvConfig names the configuration file when --config is not given.
const EnvConfig = EnvPrefix + "_CONFIG"

// ConfigFileName is the file looked for in the working directory and in
// <user config dir>/miotool/.
const ConfigFileName = "miotool.yaml"

// flags that never come from configuration. allow-programs is the user's
// own leave for a suite to run programs: no config file may give it.
// against names a program repeat runs, which comes from the command line
// as the program after -- does. allow-missing-shards is one merge's leave
// to do without a shard: set once for all, every merge would take a set
// with a shard missing unasked.
var notConfigurable = map[string]bool{"help": true, "config": true, "allow-programs": true, "against": true, "allow-missing-shards": true}

// configurable reports whether fl may come from a MIOTOOL_* variable or
// the config file. The result files (--junit, --export-*) may not: set
// there, every run would replace them unasked, the checks a suite or a
// stress run starts included.
func configurable(fl *pflag.Flag) bool {
	return !notConfigurable[fl.Name] && !isResultFileFlag(fl)
}

// envKeyReplacer maps a config key to its environment spelling.
var envKeyReplacer = strings.NewReplacer("-", "_", ".", "_")

// EnvName is the environment variable for a configuration key,
// e.g. "rules.spin" -> MIOTOOL_RULES_SPIN.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(envKeyReplacer.Replace(key))
}

// ConfigKey is the configuration key of a flag of cmd: the flag name for
// the root's persistent flags, "<command path>.<flag>" for a command's own,
// e.g. "rules.dialect".
//
// A command's own flag named like a root flag (find's --verbose, which
// gives -v up to MIOpenDriver's stride) is the root's key.
func ConfigKey(cmd *cobra.Command, flag *pflag.Flag) string {
	if cmd.Root().PersistentFlags().Lookup(flag.Name) != nil {
		return flag.Name
	}
	return commandKey(cmd) + "." + flag.Name
}

// commandKey is cmd's path below the root, joined with dots.
func commandKey(cmd *cobra.Command) string {
	var parts []string
	for c := cmd; c.HasParent(); c = c.Parent() {
		parts = append([]string{c.Name()}, parts...)
	}
	return strings.Join(parts, ".")
}

// configPath picks the configuration file: --config, else MIOTOOL_CONFIG,
// else ./miotool.yaml, else <user config dir>/miotool/miotool.yaml. An
// explicit file must exist; the default places are used only if present.
func (f *Factory) configPath() (path string, explicit bool, err error) {
	if f.Global.ConfigFile != "" {
		return f.Global.ConfigFile, true, nil
	}
	if p, ok := f.LookupEnv(EnvConfig); ok && p != "" {
		return p, true, nil
	}
	var candidates []string
	if wd, err := f.Getwd(); err == nil {
		candidates = append(candidates, filepath.Join(wd, ConfigFileName))
	}
	if dir, err := f.UserConfigDir(); err == nil {
		candidates = append(candidates, filepath.Join(dir, "miotool", ConfigFileName))
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return c, false, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", false, fmt.Errorf("config file %s: %w", c, err)
		}
	}
	return "", false, nil
}

// loadConfig fills every flag of cmd that the user did not set on the
// command line from MIOTOOL_* variables or the config file, through a viper
// instance made for this invocation. Precedence: flag > env > file > default.
func (f *Factory) loadConfig(cmd *cobra.Command) error {
	path, explicit, err := f.configPath()
	if err != nil {
		return UsageError(err)
	}
	// The file through viper; MIOTOOL_* variables through the Factory's
	// LookupEnv, so that what a command sees is what the Factory was given.
	v := viper.New()

	lines := map[string]int{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			if explicit && errors.Is(err, fs.ErrNotExist) {
				return UsageErrorf("config file %s does not exist", path)
			}
			return UsageErrorf("config file %s: %v", path, err)
		}
		lines, err = checkConfigKeys(data, newKeyTree(cmd.Root()))
		if err != nil {
			return UsageErrorf("config file %s: %v", path, err)
		}
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return UsageErrorf("config file %s: %v", path, oneLineErr(err))
		}
		f.ConfigUsed = path
	}

	var fillErr error
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if fillErr != nil || fl.Changed || !configurable(fl) {
			return
		}
		key := ConfigKey(cmd, fl)
		var value, source, origin string
		if env := EnvName(key); f.lookupSet(env) {
			value, _ = f.LookupEnv(env)
			source = "environment " + env
			origin = fmt.Sprintf("%s=%s in the environment", env, value)
		} else if v.IsSet(key) {
			value = configValueString(v.Get(key))
			source = fmt.Sprintf("config file %s", path)
			if l, ok := lines[key]; ok {
				source += fmt.Sprintf(" line %d", l)
			}
			origin = fmt.Sprintf("%s: %s in %s", key[strings.LastIndexByte(key, '.')+1:], value, strings.TrimPrefix(source, "config file "))
		} else {
			return
		}
		if err := cmd.Flags().Set(fl.Name, value); err != nil {
			fillErr = UsageErrorf("%s: %s: invalid value %q: %v", source, key, value, err)
			return
		}
		if f.valueOrigins == nil {
			f.valueOrigins = map[string]string{}
		}
		f.valueOrigins[fl.Name] = origin
	})
	if fillErr != nil {
		return fillErr
	}
	f.warnUnreadEnv(cmd.Root())
	if f.ConfigUsed != "" {
		f.Verbosef("config file: %s", f.ConfigUsed)
	} else {
		f.Verbosef("config file: none")
	}
	return nil
}

// lookupSet reports whether the environment sets name to a value; an
// empty value counts as unset, as it would for viper.
func (f *Factory) lookupSet(name string) bool {
	v, ok := f.LookupEnv(name)
	return ok && v != ""
}

// ConfigKeys lists every configuration key of the command tree under
// root, dotted (e.g. "format", "rules.spin").
func ConfigKeys(root *cobra.Command) []string { return newKeyTree(root).known("") }

// CheckConfig checks YAML configuration text against the command tree
// under root and returns the line of every key in it.
func CheckConfig(root *cobra.Command, data []byte) (map[string]int, error) {
	return checkConfigKeys(data, newKeyTree(root))
}

// configValueString turns a decoded YAML value into flag text.
func configValueString(val any) string {
	if list, ok := val.([]any); ok {
		parts := make([]string, len(list))
		for i, it := range list {
			parts[i] = fmt.Sprint(it)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(val)
}

// keyTree is the set of configuration keys: the root's flags, and a
// section per command with that command's own flags.
type keyTree struct {
	leaves   map[string]bool
	sections map[string]*keyTree
	// commandLineOnly are the flags that are no key (see configurable),
	// for a message that says why.
	commandLineOnly map[string]bool
}

func newKeyTree(cmd *cobra.Command) *keyTree {
	t := &keyTree{leaves: map[string]bool{}, sections: map[string]*keyTree{}, commandLineOnly: map[string]bool{}}
	add := func(fl *pflag.Flag) {
		if isResultFileFlag(fl) {
			t.commandLineOnly[fl.Name] = true
		}
		if !configurable(fl) {
			return
		}
		if cmd.HasParent() && cmd.Root().PersistentFlags().Lookup(fl.Name) != nil {
			return // an alias of a root flag: the root's key
		}
		t.leaves[fl.Name] = true
	}
	if cmd.HasParent() {
		cmd.LocalNonPersistentFlags().VisitAll(add)
		cmd.PersistentFlags().VisitAll(add)
	} else {
		cmd.PersistentFlags().VisitAll(add)
	}
	for _, sub := range cmd.Commands() {
		if sub.Name() == "help" {
			continue
		}
		t.sections[sub.Name()] = newKeyTree(sub)
	}
	return t
}

// known lists every key, dotted, for error messages.
func (t *keyTree) known(prefix string) []string {
	var out []string
	for k := range t.leaves {
		out = append(out, prefix+k)
	}
	for name, sec := range t.sections {
		out = append(out, sec.known(prefix+name+".")...)
	}
	sort.Strings(out)
	return out
}

// sectionNames lists every section, dotted ("capture", "report.merge").
func (t *keyTree) sectionNames(prefix string) []string {
	var out []string
	for name, sec := range t.sections {
		out = append(out, prefix+name)
		out = append(out, sec.sectionNames(prefix+name+".")...)
	}
	sort.Strings(out)
	return out
}

// checkConfigKeys parses data as YAML and rejects any key that is not a
// known flag, naming its line. It returns the line of every key it saw.
func checkConfigKeys(data []byte, tree *keyTree) (map[string]int, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, errors.New(oneLineErr(err))
	}
	lines := map[string]int{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return lines, nil // an empty file sets nothing
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return lines, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the file must be a mapping of keys to values", top.Line)
	}
	return lines, walkKeys(top, "", tree, tree, lines)
}

func walkKeys(m *yaml.Node, prefix string, t, root *keyTree, lines map[string]int) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, val := m.Content[i], m.Content[i+1]
		key := k.Value
		full := prefix + key
		lines[full] = k.Line
		switch {
		case t.leaves[key]:
			if val.Kind != yaml.ScalarNode && val.Kind != yaml.SequenceNode {
				return fmt.Errorf("line %d: %s must be a single value", k.Line, full)
			}
		case t.sections[key] != nil:
			if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
				continue
			}
			if val.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: %s must be a section of keys (one of %s)", k.Line, full, strings.Join(t.sections[key].known(full+"."), ", "))
			}
			if err := walkKeys(val, full+".", t.sections[key], root, lines); err != nil {
				return err
			}
		case t.commandLineOnly[key]:
			return fmt.Errorf("line %d: %s: the files a run writes are named on the command line only (--%s FILE), so that no run replaces them unasked", k.Line, full, key)
		default:
			return fmt.Errorf("line %d: unknown key %q%s", k.Line, full, keyHint(key, full, t, root))
		}
	}
	return nil
}

// keyHint helps with an unknown key: the same key in other sections (a
// command's flag set at the top level), or the known key or section a few
// edits away, or else the keys of its section when they are few.
func keyHint(key, full string, section, root *keyTree) string {
	known := root.known("")
	var elsewhere []string
	for _, k := range known {
		if strings.HasSuffix(k, "."+key) {
			elsewhere = append(elsewhere, k)
		}
	}
	if len(elsewhere) > 0 {
		last := len(elsewhere) - 1
		if last > 0 {
			return fmt.Sprintf(" (did you mean %s or %s?)", strings.Join(elsewhere[:last], ", "), elsewhere[last])
		}
		return fmt.Sprintf(" (did you mean %s?)", elsewhere[0])
	}
	if k, ok := suggest.Closest(full, append(known, root.sectionNames("")...)); ok {
		return fmt.Sprintf(" (did you mean %s?)", k)
	}
	here := section.known("")
	prefix := strings.TrimSuffix(full, key)
	const few = 12
	if len(here) > few {
		if prefix == "" {
			return "; the keys are the global flags' names and a section per command (see 'miotool --help')"
		}
		return fmt.Sprintf("; the keys of %s are its flags' names (see 'miotool %s --help')",
			strings.TrimSuffix(prefix, "."), strings.ReplaceAll(strings.TrimSuffix(prefix, "."), ".", " "))
	}
	for i := range here {
		here[i] = prefix + here[i]
	}
	return "; known keys here: " + strings.Join(here, ", ")
}

// oneLineErr keeps error text on one line (YAML errors can span several).
func oneLineErr(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// WithValueOrigins says, after a usage error that names a flag (--runs -4:
// want 1 or more), where the flag's value came from when it was not the
// command line: "(from runs: -4 in /home/u/miotool.yaml line 3)". Other
// errors pass through unchanged.
func (f *Factory) WithValueOrigins(err error) error {
	var ee *ExitError
	if len(f.valueOrigins) == 0 || !errors.As(err, &ee) || ee.Code != ExitUsage || ee.Err == nil {
		return err
	}
	var from []string
	for _, m := range flagMention.FindAllStringSubmatch(ee.Err.Error(), -1) {
		if o, ok := f.valueOrigins[m[1]]; ok && !slices.Contains(from, o) {
			from = append(from, o)
		}
	}
	if len(from) == 0 {
		return err
	}
	out := *ee
	out.Err = fmt.Errorf("%w (from %s)", ee.Err, strings.Join(from, "; "))
	return &out
}

// flagMention finds the flags a message names: --runs, --reclaim=lazy.
var flagMention = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)

// warnUnreadEnv warns, one line each on stderr, of every MIOTOOL_*
// variable the environment sets (to a value: an empty one is unset, as
// for the variables miotool reads) that changes nothing: one no miotool
// setting reads, named with the nearest one that is read, and one of a
// flag given on the command line only.
//
// A warning, not an error as for a config file's unknown key: a config
// file is written for miotool, but the environment is inherited by every
// process of a shell or a CI job, miotool's of other versions among them
// (a variable of a newer miotool's flag must not stop an older one), and
// the project's scripts use the prefix for their own settings. The
// warning still says, in every run, that the variable changes nothing.
// Environ lists the names; LookupEnv decides whether each is set, so
// that a Factory given another environment sees only that one.
func (f *Factory) warnUnreadEnv(root *cobra.Command) {
	if f.Environ == nil {
		return
	}
	read, commandLineOnly := envNames(root)
	seen := map[string]bool{}
	for _, kv := range f.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if seen[name] || !strings.HasPrefix(name, EnvPrefix+"_") || read[name] || !f.lookupSet(name) {
			continue
		}
		seen[name] = true
		if flag, ok := commandLineOnly[name]; ok {
			fmt.Fprintf(f.IOStreams.ErrOut, "miotool: warning: %s is set, but --%s is given on the command line only: the variable changes nothing\n", name, flag)
			continue
		}
		hint := ""
		if k, ok := suggest.Closest(name, slices.Sorted(maps.Keys(read))); ok {
			hint = fmt.Sprintf(" (did you mean %s?)", k)
		}
		fmt.Fprintf(f.IOStreams.ErrOut, "miotool: warning: %s is set, but miotool reads no such variable%s: it changes nothing\n", name, hint)
	}
}

// envNames are the MIOTOOL_* variables miotool reads: every configuration
// key's under root (MIOTOOL_FORMAT, MIOTOOL_RULES_DIALECT), MIOTOOL_CONFIG
// and those of runenv.Own; and, by variable, the flags that only the
// command line gives (MIOTOOL_CAPTURE_JUNIT: junit).
func envNames(root *cobra.Command) (read map[string]bool, commandLineOnly map[string]string) {
	read = map[string]bool{EnvConfig: true}
	for _, name := range runenv.Own {
		read[name] = true
	}
	for _, key := range ConfigKeys(root) {
		read[EnvName(key)] = true
	}
	commandLineOnly = map[string]string{}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		add := func(fl *pflag.Flag) {
			if name := EnvName(ConfigKey(cmd, fl)); !configurable(fl) && !read[name] {
				commandLineOnly[name] = fl.Name
			}
		}
		if cmd.HasParent() { // the root's own flags (--version) are no key
			cmd.LocalNonPersistentFlags().VisitAll(add)
		}
		cmd.PersistentFlags().VisitAll(add)
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return read, commandLineOnly
}
