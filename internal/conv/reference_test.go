package conv

import (
	"math"
	"strings"
	"testing"
)

// one9 is the 3x3 image 1..9.
var one9 = []float32{1, 2, 3, 4, 5, 6, 7, 8, 9}

func TestReferenceHandComputed(t *testing.T) {
	unit := Problem{N: 1, C: 1, H: 3, W: 3, K: 1, R: 2, S: 2, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	cases := []struct {
		name string
		p    Problem
		x, w []float32
		want []float32
	}{
		{"2x2 difference filter", unit, one9, []float32{1, 0, 0, -1},
			// y[i][j] = x[i][j] - x[i+1][j+1] = -4
			[]float32{-4, -4, -4, -4}},
		{"3x3 ones, pad 1, stride 2", func() Problem {
			p := unit
			p.R, p.S, p.PadH, p.PadW, p.StrideH, p.StrideW = 3, 3, 1, 1, 2, 2
			return p
		}(), one9, []float32{1, 1, 1, 1, 1, 1, 1, 1, 1},
			// windows centred on (0,0), (0,2), (2,0), (2,2)
			[]float32{1 + 2 + 4 + 5, 2 + 3 + 5 + 6, 4 + 5 + 7 + 8, 5 + 6 + 8 + 9}},
		{"2x2 ones, dilation 2", func() Problem {
			p := unit
			p.DilH, p.DilW = 2, 2
			return p
		}(), one9, []float32{1, 1, 1, 1}, []float32{1 + 3 + 7 + 9}},
		{"two groups, two images, 1x1", Problem{N: 2, C: 2, H: 1, W: 2, K: 4, R: 1, S: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 2},
			// x[n][c][0][w]
			[]float32{1, 2, 3, 4 /* n=1 */, 5, 6, 7, 8},
			// k0, k1 read c0; k2, k3 read c1
			[]float32{2, -1, 10, 0.5},
			[]float32{2, 4, -1, -2, 30, 40, 1.5, 2, 10, 12, -5, -6, 70, 80, 3.5, 4}},
		{"two input channels summed", Problem{N: 1, C: 2, H: 1, W: 3, K: 1, R: 1, S: 2, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1},
			[]float32{1, 2, 3, 10, 20, 30}, []float32{1, 2, 3, 4},
			// y[w] = sum_c x[c][w-1]*w[c][0] + x[c][w]*w[c][1]
			[]float32{2 + 40, 1 + 4 + 30 + 80, 2 + 6 + 60 + 120, 3 + 90}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Reference(tc.p, tc.x, tc.w)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d outputs %v, want %v", len(got), got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("y[%d] = %v, want %v (all: %v)", i, got[i], tc.want[i], got)
				}
			}
		})
	}
}

func TestReferenceRejectsBadInput(t *testing.T) {
	p := base()
	x := RandomTensor(p.InputElements(), 1)
	w := RandomTensor(p.WeightElements(), 2)
	if Reference(p, x[:len(x)-1], w) != nil || Reference(p, x, w[:1]) != nil {
		t.Error("Reference accepted short tensors")
	}
	p.StrideH = 0
	if Reference(p, x, w) != nil {
		t.Error("Reference accepted an invalid problem")
	}
}

func TestCheck(t *testing.T) {
	p := Problem{N: 2, C: 4, H: 5, W: 5, K: 3, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}
	want := Reference(p, RandomTensor(p.InputElements(), 3), RandomTensor(p.WeightElements(), 4))
	atol := 1e-5 * math.Sqrt(4*9)

	same := Check(p, append([]float32(nil), want...), want)
	if !same.OK || same.MaxAbs != 0 || same.RMS != 0 || same.ATol != atol || same.RTol != 1e-4 {
		t.Errorf("identical tensors: %+v", same)
	}
	if s := same.String(); !strings.HasPrefix(s, "verifies OK") || !strings.Contains(s, "atol + rtol*|want|") {
		t.Errorf("String = %q", s)
	}

	// A small error within tolerance passes; a large one fails and is named.
	got := append([]float32(nil), want...)
	got[7] += float32(atol / 2)
	if r := Check(p, got, want); !r.OK {
		t.Errorf("error of atol/2 failed: %v", r)
	}
	flat := 1*3*25 + 2*25 + 3*5 + 4 // (n=1, k=2, h=3, w=4)
	got[flat] += 0.5
	r := Check(p, got, want)
	if r.OK || r.Bad != 1 || r.Worst != (Index4{1, 2, 3, 4}) || r.WorstFlat != flat {
		t.Errorf("perturbed element: %+v", r)
	}
	if s := r.String(); !strings.Contains(s, "FAILED") || !strings.Contains(s, "(n=1, k=2, h=3, w=4)") {
		t.Errorf("String = %q", s)
	}

	// RMS as MIOpenDriver computes it.
	var sumSq, mag float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		sumSq += d * d
		mag = max(mag, math.Abs(float64(got[i])), math.Abs(float64(want[i])))
	}
	if wantRMS := math.Sqrt(sumSq) / (math.Sqrt(float64(len(got))) * mag); math.Abs(r.RMS-wantRMS) > 1e-12*wantRMS {
		t.Errorf("RMS = %g, want %g", r.RMS, wantRMS)
	}

	got[3] = float32(math.NaN())
	if r := Check(p, got, want); r.OK || r.NonFinite != 1 || r.WorstFlat != 3 || !math.IsInf(r.RMS, 1) {
		t.Errorf("NaN: %+v", r)
	}
	if r := Check(p, got[:5], want); r.OK || !strings.Contains(r.String(), "length mismatch") {
		t.Errorf("short: %v", r)
	}
}

func TestReferenceAtAndCheckSampled(t *testing.T) {
	p := Problem{N: 2, C: 6, H: 11, W: 9, K: 4, R: 3, S: 2, PadH: 1, PadW: 2, StrideH: 2, StrideW: 1, DilH: 2, DilW: 1, Groups: 2}
	x, w := RandomTensor(p.InputElements(), 5), RandomTensor(p.WeightElements(), 6)
	full := Reference(p, x, w)
	flat := []int{0, 3, 17, len(full) - 1, len(full) / 2}
	at := ReferenceAt(p, x, w, flat)
	got := make([]float32, len(flat))
	for i, f := range flat {
		got[i] = full[f]
		if d := at[i] - full[f]; d > 1e-6 || d < -1e-6 {
			t.Errorf("ReferenceAt[%d] = %v, Reference = %v", f, at[i], full[f])
		}
	}
	if c := CheckSampled(p, got, at, flat); !c.OK || c.Elements != len(flat) {
		t.Fatalf("sampled check of exact values: %+v", c)
	}
	got[2] += 1
	c := CheckSampled(p, got, at, flat)
	if c.OK || c.WorstFlat != 17 || c.Worst != p.outputIndex(17) {
		t.Fatalf("a wrong element must fail and be named: %+v", c)
	}
}
