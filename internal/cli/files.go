package cli

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Annotations that name what a command reads and writes, so that an
// output can be refused before anything runs when it would replace an
// input (see checkFiles).
const (
	outputFileAnnotation = "miotool_output_file"
	resultFileAnnotation = "miotool_result_file" // the output flags' files
	inputFileAnnotation  = "miotool_input_file"
	inputArgsAnnotation  = "miotool_input_args"
)

// MarkOutputFile marks cmd's flag name as naming a file the command
// writes: before the command runs, the file must be writable, and neither
// another output nor one of the command's inputs (MarkInputFile,
// MarkInputArgs, the config file). The output flags are marked already.
func MarkOutputFile(cmd *cobra.Command, name string) {
	_ = cmd.Flags().SetAnnotation(name, outputFileAnnotation, []string{"true"})
}

// isResultFileFlag reports whether fl is one of the output flags that
// AddOutputFlags adds.
func isResultFileFlag(fl *pflag.Flag) bool {
	_, ok := fl.Annotations[resultFileAnnotation]
	return ok
}

// MarkInputFile marks cmd's flag name (a string, or a list of them) as
// naming files the command reads.
func MarkInputFile(cmd *cobra.Command, name string) {
	_ = cmd.Flags().SetAnnotation(name, inputFileAnnotation, []string{"true"})
}

// MarkInputArgs marks cmd's arguments as files it reads (report merge's
// results).
func MarkInputArgs(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[inputArgsAnnotation] = "true"
}

// namedFile is a file and what names it: "--junit", "the config file".
type namedFile struct{ what, path string }

// checkFiles refuses, before cmd runs, an output file that cannot be
// written, that two outputs name, or that is one of cmd's inputs: `report
// --suite S.yaml --junit S.yaml` would replace the suite with its result.
// Files are compared as the system sees them (the same device and inode,
// through symlinks), and by cleaned absolute path with the folder's
// symlinks followed where the output does not exist yet.
func (f *Factory) checkFiles(cmd *cobra.Command, args []string) error {
	var outputs, inputs []namedFile
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if _, ok := fl.Annotations[outputFileAnnotation]; ok {
			if v := fl.Value.String(); v != "" {
				outputs = append(outputs, namedFile{"--" + fl.Name, v})
			}
		}
		if _, ok := fl.Annotations[inputFileAnnotation]; ok {
			values := []string{fl.Value.String()}
			if sv, ok := fl.Value.(pflag.SliceValue); ok {
				values = sv.GetSlice()
			}
			for _, v := range values {
				if v != "" {
					inputs = append(inputs, namedFile{"--" + fl.Name, v})
				}
			}
		}
	})
	if len(outputs) == 0 {
		return nil
	}
	if cmd.Annotations[inputArgsAnnotation] != "" {
		for _, a := range args {
			inputs = append(inputs, namedFile{"the argument", a})
		}
	}
	if f.ConfigUsed != "" {
		inputs = append(inputs, namedFile{"the config file", f.ConfigUsed})
	}
	for i, out := range outputs {
		for _, in := range inputs {
			if sameFile(out.path, in.path) {
				return UsageErrorf("%s %s: is the file %s %s names, which %s reads; write the result to another file",
					out.what, out.path, in.path, in.what, cmd.CommandPath())
			}
		}
		for _, other := range outputs[:i] {
			if sameFile(out.path, other.path) {
				return UsageErrorf("%s %s and %s %s name the same file; give each its own", other.what, other.path, out.what, out.path)
			}
		}
	}
	for _, out := range outputs {
		if err := CheckOutputFile(out.what, out.path); err != nil {
			return err
		}
	}
	return nil
}

// sameFile reports whether paths a and b name one file.
func sameFile(a, b string) bool {
	ai, aerr := os.Stat(a)
	bi, berr := os.Stat(b)
	if aerr == nil && berr == nil {
		return os.SameFile(ai, bi)
	}
	return resolvedPath(a) == resolvedPath(b)
}

// resolvedPath is p absolute and cleaned, with its symlinks followed as
// far as they lead: the whole path where it exists, else its folder.
func resolvedPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = filepath.Clean(p)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	dir, base := filepath.Split(abs)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(r, base)
	}
	return abs
}

// WrittenFileFlags are the flags of root's tree, spelled "--name", that
// name a file a command writes other than its result (rules
// --write-expect), each once.
func WrittenFileFlags(root *cobra.Command) []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(fl *pflag.Flag) {
			if _, ok := fl.Annotations[outputFileAnnotation]; ok && !isResultFileFlag(fl) && !slices.Contains(out, "--"+fl.Name) {
				out = append(out, "--"+fl.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// ValueFlags are the flags of fs that take a value, spelled as a command
// line gives them ("--backend", and "-b" where one has a short form): the
// word after each is its value.
func ValueFlags(fs *pflag.FlagSet) []string {
	var out []string
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.NoOptDefVal != "" {
			return // a bool, or a flag whose value is optional
		}
		out = append(out, "--"+fl.Name)
		if fl.Shorthand != "" {
			out = append(out, "-"+fl.Shorthand)
		}
	})
	return out
}
