package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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
// results), or as a program and its arguments (trace's), which may read
// any file they name: no output may be the file an argument names, the
// existing file after the "=" of one (--in=FILE, if=FILE) or after the
// letter of a short option (-oFILE), the first argument as a shell finds
// it in $PATH when it has no slash (the program itself), or the regular
// file that is the command's standard input (which the program reads).
func MarkInputArgs(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[inputArgsAnnotation] = "true"
}

// namedFile is a file and what names it: "--junit", "the config file".
// An input may say what it is itself (is), and be known by what it is
// (info) rather than by a path.
type namedFile struct {
	what, path string
	is         string
	info       os.FileInfo
}

// describe is the input as a refusal says it: "the file a.yaml --read
// names".
func (n namedFile) describe() string {
	if n.is != "" {
		return n.is
	}
	return "the file " + n.path + " " + n.what + " names"
}

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
				outputs = append(outputs, namedFile{what: "--" + fl.Name, path: v})
			}
		}
		if _, ok := fl.Annotations[inputFileAnnotation]; ok {
			values := []string{fl.Value.String()}
			if sv, ok := fl.Value.(pflag.SliceValue); ok {
				values = sv.GetSlice()
			}
			for _, v := range values {
				if v != "" {
					inputs = append(inputs, namedFile{what: "--" + fl.Name, path: v})
				}
			}
		}
	})
	if len(outputs) == 0 {
		return nil
	}
	if cmd.Annotations[inputArgsAnnotation] != "" {
		inputs = append(inputs, f.argInputs(args)...)
	}
	if f.ConfigUsed != "" {
		inputs = append(inputs, namedFile{what: "the config file", path: f.ConfigUsed})
	}
	for i, out := range outputs {
		for _, in := range inputs {
			if in.info != nil && sameFileAs(out.path, in.info) || in.info == nil && sameFile(out.path, in.path) {
				return UsageErrorf("%s %s: is %s, which %s reads; write the result to another file",
					out.what, out.path, in.describe(), cmd.CommandPath())
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

// argInputs are the files that args, a command's arguments marked with
// MarkInputArgs, may read (see there).
func (f *Factory) argInputs(args []string) []namedFile {
	var inputs []namedFile
	for _, a := range args {
		inputs = append(inputs, namedFile{what: "the argument", path: a})
		// A file inside an argument counts only where it exists: these
		// forms are too loose to claim a name nothing has yet.
		var inside []string
		if _, v, ok := strings.Cut(a, "="); ok && v != "" {
			inside = append(inside, v)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			inside = append(inside, a[2:])
		}
		for _, p := range inside {
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				inputs = append(inputs, namedFile{path: p, is: fmt.Sprintf("the file %s the argument %s names", p, a)})
			}
		}
	}
	if len(args) > 0 && !strings.Contains(args[0], "/") {
		path, _ := f.LookupEnv("PATH")
		if found := lookPath(args[0], path); found != "" {
			inputs = append(inputs, namedFile{path: found, is: fmt.Sprintf("the program %s as $PATH finds it (%s)", args[0], found)})
		}
	}
	if in := f.IOStreams.InFile(); in != nil {
		if st, err := in.Stat(); err == nil && st.Mode().IsRegular() {
			inputs = append(inputs, namedFile{info: st, is: "the file open as standard input"})
		}
	}
	return inputs
}

// lookPath is the executable regular file a shell runs for name, which has
// no slash, with path as $PATH (an empty entry is the current folder);
// "" when there is none.
func lookPath(name, path string) string {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// sameFileAs reports whether path names the file info describes.
func sameFileAs(path string, info os.FileInfo) bool {
	st, err := os.Stat(path)
	return err == nil && os.SameFile(st, info)
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
