// Command tunanet-fit fits miotool's own TunaNet to a CSV that
// tools/tunanet-collect wrote, and writes the model and its metadata
// (miotool.tn.model, miotool_metadata.tn.model) in MIOpen's formats.
//
//	go run ./tools/tunanet-fit --data internal/aiheur/builtin/testdata/sim-find.csv --out internal/aiheur/builtin/models
//
// The fit is deterministic: the same data and flags give the same bytes,
// which internal/aiheur/builtin's tests check for the committed model.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"miotool/internal/aiheur/fit"
)

func main() {
	c := fit.DefaultConfig()
	var data, out, hidden string
	fl := flag.NewFlagSet("tunanet-fit", flag.ContinueOnError)
	fl.StringVar(&data, "data", "", "training data CSV from tunanet-collect (required)")
	fl.StringVar(&out, "out", "", "directory to write "+fit.ModelFile+" and "+fit.MetadataFile+" into (required)")
	fl.StringVar(&hidden, "hidden", joinInts(c.Hidden), "hidden layer widths, comma-separated")
	fl.IntVar(&c.Epochs, "epochs", c.Epochs, "epochs of full-batch gradient descent")
	fl.Float64Var(&c.LearningRate, "lr", c.LearningRate, "learning rate")
	fl.Float64Var(&c.L2, "l2", c.L2, "weight decay")
	fl.Uint64Var(&c.Seed, "seed", c.Seed, "seed of the initial weights")
	fl.IntVar(&c.Tests, "tests", c.Tests, "samples embedded in the model as its self-tests")
	if err := fl.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	var err error
	if c.Hidden, err = parseInts(hidden); err != nil {
		fail(2, fmt.Errorf("--hidden %q: %v", hidden, err))
	}
	if data == "" || out == "" {
		fail(2, errors.New("--data and --out are required"))
	}
	if err := c.Validate(); err != nil {
		fail(2, err)
	}
	raw, err := os.ReadFile(data)
	if err != nil {
		fail(1, err)
	}
	ds, err := fit.ReadCSV(raw)
	if err != nil {
		fail(1, fmt.Errorf("%s: %w", data, err))
	}
	res, err := fit.Fit(ds, c, fit.Source{File: filepath.Base(data)})
	if err != nil {
		fail(1, err)
	}
	for name, body := range map[string][]byte{fit.ModelFile: res.Model, fit.MetadataFile: res.Metadata} {
		if err := os.WriteFile(filepath.Join(out, name), body, 0o644); err != nil {
			fail(1, err)
		}
	}
	fmt.Printf("fitted %d samples (%s): features %s; dropped constant %s; train accuracy %.1f%%, loss %.4g\n",
		len(ds.Samples), ds.Lookup("device"), strings.Join(res.Features, ","), strings.Join(res.Redundant, ","),
		100*res.Accuracy, res.Loss)
}

func fail(code int, err error) {
	fmt.Fprintln(os.Stderr, "tunanet-fit:", err)
	os.Exit(code)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}
