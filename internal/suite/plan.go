package suite

import (
	"math/rand/v2"
	"strings"
)

// Variant is an environment a whole suite runs in once more, e.g.
// GPU_MAX_HW_QUEUES=3.
type Variant struct {
	Label string   // "GPU_MAX_HW_QUEUES=3"; empty for the baseline
	Env   []string // KEY=VALUE
}

// ParseVariant reads one environment variant: KEY=VALUE, or several
// separated by commas (A=1,B=2) for a variant that sets more than one
// variable.
func ParseVariant(s string) (Variant, error) {
	var v Variant
	for part := range strings.SplitSeq(s, ",") {
		kv, err := ParseEnvAssignment(strings.TrimSpace(part))
		if err != nil {
			return Variant{}, err
		}
		v.Env = append(v.Env, kv)
	}
	v.Label = strings.Join(v.Env, " ")
	return v, nil
}

// ParseVariants reads the variants of a list of --env values, each by
// ParseVariant; an empty value (an empty list from a config file) is none.
func ParseVariants(values []string) ([]Variant, error) {
	var vs []Variant
	for _, e := range values {
		if e == "" {
			continue
		}
		v, err := ParseVariant(e)
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// Step is one run in a suite's plan.
type Step struct {
	Variant   int // index into the variants, 0 being the baseline
	Iteration int // from 1
	Check     int // index into the file's checks
}

// Plan orders the runs: for each variant, Repeat passes over the checks,
// each pass in file order or, with shuffle, in an order drawn from seed
// (and the variant and pass), so the same seed gives the same order.
// Checks the file skips are left out.
func Plan(f *File, variants, repeat int, shuffle bool, seed uint64) []Step {
	var runnable []int
	for i, c := range f.Checks {
		if c.Skip == "" {
			runnable = append(runnable, i)
		}
	}
	steps := make([]Step, 0, variants*repeat*len(runnable))
	for v := range variants {
		for it := 1; it <= repeat; it++ {
			order := append([]int(nil), runnable...)
			if shuffle {
				rng := rand.New(rand.NewPCG(seed, uint64(v)<<32|uint64(it)))
				rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			}
			for _, c := range order {
				steps = append(steps, Step{Variant: v, Iteration: it, Check: c})
			}
		}
	}
	return steps
}

// ExclusiveFirst reorders each pass of steps (the runs of one variant and
// iteration) so that its exclusive checks come first, the others after
// them, each group in the order it had. With runs side by side, an
// exclusive check in the middle of a pass would make every later run wait
// for the runs before it to end; first, it only delays the pass's start.
func ExclusiveFirst(f *File, steps []Step) []Step {
	out := make([]Step, 0, len(steps))
	for start := 0; start < len(steps); {
		end := start
		for end < len(steps) && steps[end].Variant == steps[start].Variant && steps[end].Iteration == steps[start].Iteration {
			end++
		}
		for _, exclusive := range []bool{true, false} {
			for _, st := range steps[start:end] {
				if f.Checks[st.Check].Exclusive == exclusive {
					out = append(out, st)
				}
			}
		}
		start = end
	}
	return out
}
