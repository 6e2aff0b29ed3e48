// Command importgroups checks that every Go file of the module groups its
// imports as the module's style asks: the standard library first, then
// third-party modules, then the module's own packages, each kind in groups
// of its own (a blank line between groups). It names each file whose
// groups mix kinds or come out of order, one line per offence, and exits 1
// when there is any; gofmt already keeps each group sorted.
//
//	go run ./tools/importgroups [DIR]    (default: .)
//
// The module path is read from DIR/go.mod. Directories the go command
// ignores (testdata, vendor, names starting with . or _) and nested modules
// are skipped, and so are generated files ("// Code generated ... DO NOT
// EDIT."); import "C" stands apart and is not checked.
package main

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 || (len(args) == 1 && strings.HasPrefix(args[0], "-")) {
		fmt.Fprintln(stderr, "usage: importgroups [DIR]")
		return 2
	}
	root := "."
	if len(args) == 1 {
		root = args[0]
	}
	module, err := modulePath(root)
	if err != nil {
		fmt.Fprintf(stderr, "importgroups: %v\n", err)
		return 2
	}
	offences, err := checkTree(root, module)
	if err != nil {
		fmt.Fprintf(stderr, "importgroups: %v\n", err)
		return 2
	}
	for _, o := range offences {
		fmt.Fprintln(stdout, o)
	}
	if len(offences) > 0 {
		fmt.Fprintf(stderr, "importgroups: %d files group their imports out of order or mixed: standard library, then third-party, then %s/...\n", countFiles(offences), module)
		return 1
	}
	return 0
}

func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "module" {
			if mod, err := strconv.Unquote(fields[1]); err == nil {
				return mod, nil
			}
			return fields[1], nil
		}
	}
	return "", errors.New(filepath.Join(root, "go.mod") + " names no module")
}

// kind is the class of an import path, in the order groups must come.
type kind int

const (
	stdlib kind = iota
	thirdParty
	own
)

func (k kind) String() string {
	return [...]string{"standard library", "third-party", "own"}[k]
}

// classify follows the go command's rule for the standard library: a path
// whose first element has no dot.
func classify(path, module string) kind {
	if path == module || strings.HasPrefix(path, module+"/") {
		return own
	}
	first, _, _ := strings.Cut(path, "/")
	if !strings.Contains(first, ".") {
		return stdlib
	}
	return thirdParty
}

// offence is one problem in one file.
type offence struct {
	file string
	line int
	msg  string
}

func (o offence) String() string { return fmt.Sprintf("%s:%d: %s", o.file, o.line, o.msg) }

func countFiles(offences []offence) int {
	files := map[string]bool{}
	for _, o := range offences {
		files[o.file] = true
	}
	return len(files)
}

// checkTree checks every .go file under root, skipping what the go command
// skips and nested modules; the offences come sorted by file and line.
func checkTree(root, module string) ([]offence, error) {
	var out []offence
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			rel = path
		}
		found, err := checkFile(filepath.ToSlash(rel), src, module)
		if err != nil {
			return err
		}
		out = append(out, found...)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].file != out[j].file {
			return out[i].file < out[j].file
		}
		return out[i].line < out[j].line
	})
	return out, err
}

// group is a run of import specs with no blank line between them.
type group struct {
	line  int
	kinds map[kind]bool
}

// checkFile reports where the file's import groups mix kinds or come out
// of order. A file that does not parse is an error: go vet says why.
func checkFile(name string, src []byte, module string) ([]offence, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil // its generator decides; regenerating would undo a fix
	}
	var groups []*group
	prevEnd := -1
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT {
			continue
		}
		prevEnd = -1 // a new declaration starts a new group
		for _, s := range gd.Specs {
			spec := s.(*ast.ImportSpec)
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: import path %s: %v", name, spec.Path.Value, err)
			}
			if path == "C" {
				prevEnd = -1
				continue
			}
			start := spec.Pos()
			if spec.Doc != nil {
				start = spec.Doc.Pos()
			}
			startLine, endLine := fset.Position(start).Line, fset.Position(spec.End()).Line
			k := classify(path, module)
			if prevEnd < 0 || startLine > prevEnd+1 {
				groups = append(groups, &group{line: startLine, kinds: map[kind]bool{}})
			}
			groups[len(groups)-1].kinds[k] = true
			prevEnd = endLine
		}
	}
	var out []offence
	highest := stdlib
	for _, g := range groups {
		if len(g.kinds) > 1 {
			var names []string
			for k := stdlib; k <= own; k++ {
				if g.kinds[k] {
					names = append(names, k.String())
				}
			}
			out = append(out, offence{name, g.line, "one import group mixes " + strings.Join(names, " and ") + " packages"})
		}
		lowest := own
		for k := range g.kinds {
			lowest = min(lowest, k)
		}
		if lowest < highest {
			out = append(out, offence{name, g.line, fmt.Sprintf("a group of %s imports comes after %s imports", lowest, highest)})
		}
		for k := range g.kinds {
			highest = max(highest, k)
		}
	}
	return out, nil
}
