// Command tunanet-collect measures the data miotool's own TunaNet is fitted
// on: it runs find (finder.Find, every solver of conv.Solvers timed, naive
// bounded as in MIOpen) over a sweep of forward convolutions on the selected
// backend and writes one CSV row per problem: the geometry, each solver's
// time in milliseconds (empty where it did not apply, failed or timed out)
// and the winner. tools/tunanet-fit turns the CSV into the model.
//
//	go run ./tools/tunanet-collect --backend sim --out internal/aiheur/builtin/testdata/sim-find.csv
//	./bin/tunanet-collect --backend cuda --out h200-find.csv
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"time"

	"miotool/internal/aiheur/fit"
	"miotool/internal/buildinfo"
	"miotool/internal/conv"
	"miotool/internal/finder"
	"miotool/internal/handle"
	"miotool/internal/hip"

	_ "miotool/internal/hip/amd"
	_ "miotool/internal/hip/cuda"
	_ "miotool/internal/hip/sim"
)

type options struct {
	backend      string
	device       int
	out          string
	samples      int
	naiveTimeout int
	random       int
	seed         uint64
	maxMACs      int64
	date         string
	verify       bool
	quiet        bool
}

func main() {
	var o options
	fl := flag.NewFlagSet("tunanet-collect", flag.ContinueOnError)
	fl.StringVar(&o.backend, "backend", "auto", "runtime: auto, sim, cuda or hip")
	fl.IntVar(&o.device, "device", 0, "device ordinal")
	fl.StringVar(&o.out, "out", "", "CSV file to write (required; - for standard output)")
	fl.IntVar(&o.samples, "samples", 3, "timed runs per solver after the warm-up")
	fl.IntVar(&o.naiveTimeout, "naive-timeout", finder.DefaultNaiveTimeoutPct, "naive deadline in percent of the best time so far (MIOPEN_NAIVE_TIMEOUT); 0 times naive in full")
	fl.IntVar(&o.random, "random", 160, "problems drawn at random in addition to the fixed families")
	fl.Uint64Var(&o.seed, "seed", 1, "seed of the random problems and of the tensors")
	fl.Int64Var(&o.maxMACs, "max-macs", 40_000_000, "skip random problems with more multiply-accumulates than this")
	fl.StringVar(&o.date, "date", "", "collection date to record (default: today, UTC)")
	fl.BoolVar(&o.verify, "verify", true, "check every timed solver's output against the CPU reference")
	fl.BoolVar(&o.quiet, "quiet", false, "do not print one line per problem on stderr")
	if err := fl.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "tunanet-collect:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "tunanet-collect:", err)
		os.Exit(1)
	}
}

func (o *options) validate() error {
	switch {
	case o.out == "":
		return errors.New("--out is required")
	case o.samples < 1:
		return fmt.Errorf("--samples %d: want 1 or more", o.samples)
	case o.naiveTimeout < 0:
		return fmt.Errorf("--naive-timeout %d: want 0 or more", o.naiveTimeout)
	case o.random < 0:
		return fmt.Errorf("--random %d: want 0 or more", o.random)
	case o.maxMACs < 1:
		return fmt.Errorf("--max-macs %d: want 1 or more", o.maxMACs)
	}
	if o.date != "" {
		if _, err := time.Parse(time.DateOnly, o.date); err != nil {
			return fmt.Errorf("--date %q: want YYYY-MM-DD", o.date)
		}
	}
	return nil
}

func run(ctx context.Context, o options) error {
	dev, sel, err := hip.Select(o.backend, hip.OpenOptions{Ordinal: o.device})
	if err != nil {
		return err
	}
	defer dev.Close()
	props := dev.Props()
	if !o.quiet {
		fmt.Fprintf(os.Stderr, "backend %s (%s) on %s\n", sel.Chosen, sel.Reason, props)
	}
	date := o.date
	if date == "" {
		date = time.Now().UTC().Format(time.DateOnly)
	}
	build := buildinfo.Resolve("", "")
	ds := &fit.Dataset{Info: []fit.Info{
		{Key: "data", Value: "find results of miotool's solvers (tools/tunanet-collect)"},
		{Key: "device", Value: props.Name},
		{Key: "arch", Value: props.Arch},
		{Key: "backend", Value: props.Backend},
		{Key: "compute_units", Value: strconv.Itoa(props.ComputeUnits)},
		{Key: "collected", Value: date},
		{Key: "tool", Value: fmt.Sprintf("miotool %s (%s, %s)", build.Version, shortCommit(build.Commit), build.GoVersion)},
		{Key: "samples", Value: strconv.Itoa(o.samples)},
		{Key: "naive_timeout_percent", Value: strconv.Itoa(o.naiveTimeout)},
	}}
	solvers := conv.Solvers()
	for _, s := range solvers {
		ds.Solvers = append(ds.Solvers, s.Name)
	}
	// The file is rewritten after every problem, so an interrupted
	// collection still leaves the rows measured so far.
	save := func() error {
		if o.out == "-" {
			return nil
		}
		return writeFile(o.out, ds)
	}
	problems := Sweep(o.random, o.seed, o.maxMACs)
	start := time.Now()
	for i, p := range problems {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := measure(ctx, dev, p, solvers, o)
		if err != nil {
			return fmt.Errorf("problem %d (%s): %w", i+1, p, err)
		}
		if s == nil {
			continue
		}
		ds.Samples = append(ds.Samples, *s)
		if err := save(); err != nil {
			return err
		}
		if !o.quiet {
			fmt.Fprintf(os.Stderr, "[%d/%d %s] %s -> %s\n", i+1, len(problems), time.Since(start).Round(time.Second), p, s.Winner)
		}
	}
	if o.out == "-" {
		return fit.WriteCSV(os.Stdout, ds)
	}
	return writeFile(o.out, ds)
}

// writeFile replaces file with the dataset through a temporary file, so a
// reader never sees half of it.
func writeFile(file string, ds *fit.Dataset) error {
	var b bytes.Buffer
	if err := fit.WriteCSV(&b, ds); err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// measure runs find for p on a fresh handle. Closing the handle waits for
// an abandoned naive evaluation, so it cannot slow the next problem's
// timings. A problem no solver could run yields nil.
func measure(ctx context.Context, dev hip.Device, p conv.Problem, solvers []*conv.Solver, o options) (*fit.Sample, error) {
	h, err := handle.New(dev, handle.Options{})
	if err != nil {
		return nil, err
	}
	ts, err := finder.NewTensors(dev, p, solvers, o.seed)
	if err != nil {
		h.Close()
		return nil, err
	}
	res, ferr := finder.Find(ctx, h, ts, finder.Options{
		NaiveTimeoutPct: o.naiveTimeout, Samples: o.samples, Mode: finder.ModeNormal,
		Solvers: solvers, Verify: o.verify,
	})
	cerr := h.Close()
	terr := ts.Free()
	if err := errors.Join(ferr, cerr, terr); err != nil {
		return nil, err
	}
	if res.Chosen == "" {
		return nil, nil
	}
	if bad := res.FailedVerification(); len(bad) > 0 {
		return nil, fmt.Errorf("%v failed verification", bad)
	}
	s := &fit.Sample{Geometry: geometry(p), Winner: res.Chosen,
		TimesMs: make([]float64, len(solvers)), Has: make([]bool, len(solvers))}
	for _, e := range res.Entries {
		if e.Status != finder.StatusOK {
			continue
		}
		for j, sol := range solvers {
			if sol.Name == e.Solver {
				s.TimesMs[j], s.Has[j] = e.TimeMs, true
			}
		}
	}
	return s, nil
}

func geometry(p conv.Problem) fit.Geometry {
	return fit.Geometry{N: p.N, C: p.C, H: p.H, W: p.W, K: p.K, R: p.R, S: p.S, PadH: p.PadH, PadW: p.PadW,
		StrideH: p.StrideH, StrideW: p.StrideW, DilationH: p.DilH, DilationW: p.DilW, Groups: p.Groups}
}

// Sweep is the list of problems measured: fixed families that cover the
// stress-threads shape (one channel, 2x2 filter, sizes up to 2048), 1x1
// and 3x3 layers, then random problems below a MAC budget.
func Sweep(random int, seed uint64, maxMACs int64) []conv.Problem {
	base := conv.Problem{N: 1, C: 1, K: 1, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	var out []conv.Problem
	add := func(p conv.Problem) {
		if p.Validate() == nil {
			out = append(out, p)
		}
	}
	// The stress-threads shape: 1x1xHxW input, 1x1x2x2 weights.
	for _, hw := range []int{8, 32, 64, 128, 256, 512, 768, 1024, 1049, 1280, 1536, 1792, 2048} {
		p := base
		p.H, p.W, p.R, p.S = hw, hw, 2, 2
		add(p)
	}
	// Pointwise layers.
	for _, n := range []int{1, 8} {
		for _, c := range []int{8, 64} {
			for _, k := range []int{8, 64} {
				for _, hw := range []int{7, 28, 56} {
					p := base
					p.N, p.C, p.K, p.H, p.W = n, c, k, hw, hw
					add(p)
				}
			}
		}
	}
	// 3x3 layers with padding 1.
	for _, n := range []int{1, 4} {
		for _, c := range []int{3, 16, 64} {
			for _, k := range []int{16, 64} {
				for _, hw := range []int{14, 28, 56} {
					p := base
					p.N, p.C, p.K, p.H, p.W, p.R, p.S, p.PadH, p.PadW = n, c, k, hw, hw, 3, 3, 1, 1
					add(p)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x7475_6e61_6e65_74))
	pick := func(vs ...int) int { return vs[rng.IntN(len(vs))] }
	for drawn := 0; drawn < random; {
		p := base
		p.N = pick(1, 1, 2, 4, 8)
		p.C = pick(1, 2, 3, 4, 8, 16, 32, 64)
		p.K = pick(1, 2, 4, 8, 16, 32, 64)
		p.H = 4 + rng.IntN(125)
		p.W = p.H
		if rng.IntN(4) == 0 {
			p.W = 4 + rng.IntN(125)
		}
		p.R = pick(1, 1, 2, 3, 3, 5, 7)
		p.S = p.R
		if rng.IntN(6) == 0 {
			p.S = pick(1, 3, 5)
		}
		if rng.IntN(2) == 0 {
			p.PadH, p.PadW = p.R/2, p.S/2
		}
		p.StrideH = pick(1, 1, 1, 2)
		p.StrideW = p.StrideH
		p.DilH = pick(1, 1, 1, 1, 2)
		p.DilW = p.DilH
		p.Groups = pick(1, 1, 1, 2, 4)
		if p.C%p.Groups != 0 || p.K%p.Groups != 0 {
			p.Groups = 1
		}
		if p.Validate() != nil || macs(p) > maxMACs {
			continue
		}
		out = append(out, p)
		drawn++
	}
	return out
}

func macs(p conv.Problem) int64 { return p.Flops() / 2 }
