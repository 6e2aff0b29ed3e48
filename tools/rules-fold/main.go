// Command rules-fold folds the cells of a capture-rules measurement into a
// committed expectation file (configs/rules/*.yaml): the cells the file
// lacks are added, the ones it holds must agree (or, with --replace, the
// measurement's values win), and the file is written back in the matrix
// order `miotool rules --write-expect` uses, so the diff is the new cells
// and the source line.
//
//	miotool rules --backend cuda --action host-alloc,module-unload --write-expect /tmp/h200-added.yaml
//	go run ./tools/rules-fold --into configs/rules/h200-cuda.yaml /tmp/h200-added.yaml
//
// Exit status: 0 folded, 1 the files disagree or cannot be written, 2 bad
// usage or an unreadable input.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"miotool/internal/rules"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	var into, basis, note, source string
	var replace bool
	fl := flag.NewFlagSet("rules-fold", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&into, "into", "", "the expectation file to fold the cells into, rewritten in place (required)")
	fl.StringVar(&basis, "basis", "", "the basis of every added cell (default: as the measurement says, measured)")
	fl.StringVar(&note, "note", "", "a note for every added cell")
	fl.StringVar(&source, "source", "", `what the file's source line gains (default: "cells of ACTIONS from" the measurement's source)`)
	fl.BoolVar(&replace, "replace", false, "let the measurement's values replace cells the file holds with other codes")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: rules-fold --into FILE [--basis B] [--note TEXT] [--source TEXT] [--replace] MEASURED.yaml")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if into == "" || fl.NArg() != 1 {
		fmt.Fprintln(stderr, "rules-fold: --into and one measured expectation file are required")
		return 2
	}
	base, err := rules.ReadExpectation(into)
	if err != nil {
		fmt.Fprintln(stderr, "rules-fold:", err)
		return 2
	}
	add, err := rules.ReadExpectation(fl.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "rules-fold:", err)
		return 2
	}
	out, done, err := rules.Fold(base, add, rules.FoldOptions{Basis: rules.Basis(basis), Note: note, Source: source, Replace: replace})
	if err != nil {
		fmt.Fprintln(stderr, "rules-fold:", err)
		return 1
	}
	var buf bytes.Buffer
	if err := rules.WriteExpectation(&buf, out); err != nil {
		fmt.Fprintln(stderr, "rules-fold:", err)
		return 1
	}
	if err := writeInPlace(into, buf.Bytes()); err != nil {
		fmt.Fprintln(stderr, "rules-fold:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: added %d cells, replaced %d, kept %d that agreed", into, len(done.Added), len(done.Replaced), done.Kept)
	if len(done.Actions) > 0 {
		fmt.Fprintf(stdout, " (actions %v)", done.Actions)
	}
	fmt.Fprintln(stdout)
	for _, d := range done.Replaced {
		fmt.Fprintf(stdout, "replaced: %s\n", d.Describe(out.Dialect))
	}
	if add.Device != base.Device {
		fmt.Fprintf(stdout, "note: the measurement names its device %q, the file %q\n", add.Device, base.Device)
	}
	return 0
}

// writeInPlace replaces path by data through a file beside it, keeping the
// mode, so that a failed write leaves the old file whole.
func writeInPlace(path string, data []byte) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".fold-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone after the rename; left only by a failure
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(info.Mode().Perm())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
