package finder

import (
	"errors"
	"strings"
	"testing"
	"time"

	"miotool/internal/conv"
)

// What a find needs on the device, for the problem the README warns of:
// about 6 GiB with the naive scratch, more than the simulator's 4 GiB.
func TestNeedSaysWhatAProblemNeedsOnTheDevice(t *testing.T) {
	big := conv.Problem{N: 2, C: 256, H: 1024, W: 1024, K: 256, R: 3, S: 3, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	const x, w, y = 2 * 256 * 1024 * 1024 * 4, 256 * 256 * 3 * 3 * 4, 2 * 256 * 1022 * 1022 * 4
	for _, tt := range []struct {
		name    string
		opts    Options
		scratch int64
	}{
		{"naive bounded", Options{NaiveTimeoutPct: DefaultNaiveTimeoutPct}, y},
		{"naive timeout off", Options{}, 0},
		{"fast mode never benchmarks", Options{NaiveTimeoutPct: 300, Mode: ModeFast}, 0},
		{"naive alone has no deadline", Options{NaiveTimeoutPct: 300, Solvers: onlyNaive()}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Need(big, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			want := MemoryNeed{Input: x, Weights: w, Output: y, NaiveScratch: tt.scratch}
			if m != want || m.Total() != x+w+y+tt.scratch {
				t.Fatalf("need %+v, want %+v", m, want)
			}
		})
	}
	m, _ := Need(big, Options{NaiveTimeoutPct: 300})
	const simMemory = 4 << 30
	err := m.Fits(simMemory)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "5.99 GiB") || !strings.Contains(err.Error(), "naive scratch 1.99 GiB") || !strings.Contains(err.Error(), "has 4 GiB") {
		t.Fatalf("want too large, with the figures, got %v", err)
	}
	if err := m.Fits(0); err != nil {
		t.Errorf("a device that does not say its memory: %v", err)
	}
	if err := m.Fits(8 << 30); err != nil {
		t.Errorf("8 GiB: %v", err)
	}
	if _, err := Need(conv.Problem{N: 1}, Options{}); err == nil {
		t.Error("an invalid problem has a need")
	}
}

// Tensors that cannot fit are refused before anything is made or
// allocated.
func TestNewTensorsRefusesWhatCannotFit(t *testing.T) {
	d := newSim(t)
	huge := conv.Problem{N: 4, C: 256, H: 1024, W: 1024, K: 8, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	start := time.Now()
	_, err := NewTensors(d, huge, nil, 1)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("want too large, got %v", err)
	}
	if n, _ := d.MemoryInUse(); n != 0 {
		t.Fatalf("%d bytes allocated for a refused problem", n)
	}
	t.Logf("refused in %v", time.Since(start))
}
