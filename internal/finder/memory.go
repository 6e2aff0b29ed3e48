package finder

import (
	"errors"
	"fmt"

	"miotool/internal/conv"
)

// ErrTooLarge marks a problem whose find needs more device memory than the
// device has.
var ErrTooLarge = errors.New("does not fit the device")

// MemoryNeed is the device memory a find of a problem allocates, in bytes.
type MemoryNeed struct {
	Input, Weights, Output int64
	// Workspace is the largest workspace of the applicable solvers.
	Workspace int64
	// NaiveScratch is the output-sized buffer the bounded naive evaluation
	// writes instead of the output; 0 when that evaluation cannot run.
	NaiveScratch int64
}

// Tensors is what NewTensors allocates: input, weights, output and the
// workspace.
func (m MemoryNeed) Tensors() int64 { return m.Input + m.Weights + m.Output + m.Workspace }

// Total is everything a find allocates at once.
func (m MemoryNeed) Total() int64 { return m.Tensors() + m.NaiveScratch }

func (m MemoryNeed) String() string {
	s := fmt.Sprintf("%s (input %s, weights %s, output %s, workspace %s", bytesText(m.Total()),
		bytesText(m.Input), bytesText(m.Weights), bytesText(m.Output), bytesText(m.Workspace))
	if m.NaiveScratch > 0 {
		s += ", naive scratch " + bytesText(m.NaiveScratch)
	}
	return s + ")"
}

// Fits returns an error wrapping ErrTooLarge when the find needs more
// than total bytes; nil when it fits or total is 0 (a device that does
// not say its memory size).
func (m MemoryNeed) Fits(total uint64) error {
	if total == 0 || uint64(m.Total()) <= total {
		return nil
	}
	return fmt.Errorf("the problem %w: it needs %s of device memory and the device has %s", ErrTooLarge, m, bytesText(int64(total)))
}

// Need is the device memory a find of p with opts allocates: x, w, y, the
// largest workspace of the applicable solvers of opts.Solvers (all of
// conv.Solvers when nil) and, when the bounded naive evaluation can run,
// its output-sized scratch. A command can compare it with the device's
// memory before allocating anything.
func Need(p conv.Problem, opts Options) (MemoryNeed, error) {
	if err := p.Validate(); err != nil {
		return MemoryNeed{}, err
	}
	solvers := opts.Solvers
	if solvers == nil {
		solvers = conv.Solvers()
	}
	m := MemoryNeed{
		Input:   4 * int64(p.InputElements()),
		Weights: 4 * int64(p.WeightElements()),
		Output:  4 * int64(p.OutputElements()),
	}
	naive, other := false, false
	for _, s := range solvers {
		if !s.IsApplicable(p) {
			continue
		}
		m.Workspace = max(m.Workspace, int64(s.Workspace(p)))
		if s.IsNaive() {
			naive = true
		} else {
			other = true
		}
	}
	// The bounded evaluation needs a deadline (another solver's time) and
	// a benchmark (fast mode never benchmarks).
	if naive && other && opts.NaiveTimeoutPct != 0 && opts.Mode != ModeFast {
		m.NaiveScratch = m.Output
	}
	return m, nil
}

// bytesText is n in binary units, to three significant digits.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.3g %ciB", v, "KMGTP"[i])
}
