package conv

import (
	"math"
	"testing"
)

func TestRandomTensor(t *testing.T) {
	a := RandomTensor(300000, 42)
	b := RandomTensor(1000, 42)
	c := RandomTensor(1000, 43)
	var sum float64
	distinct := map[float32]bool{}
	for i, v := range a {
		if v < -1 || v >= 1 || math.IsNaN(float64(v)) {
			t.Fatalf("a[%d] = %v outside [-1, 1)", i, v)
		}
		sum += float64(v)
		if i < 1000 {
			distinct[v] = true
			if v != b[i] {
				t.Fatalf("not a pure function of (seed, index): a[%d]=%v b[%d]=%v", i, v, i, b[i])
			}
		}
	}
	if mean := sum / float64(len(a)); math.Abs(mean) > 0.01 {
		t.Errorf("mean %v, want about 0", mean)
	}
	if len(distinct) < 990 {
		t.Errorf("only %d distinct values in 1000", len(distinct))
	}
	same := 0
	for i := range b {
		if b[i] == c[i] {
			same++
		}
	}
	if same > 5 {
		t.Errorf("seeds 42 and 43 agree on %d of 1000 values", same)
	}
	if RandomTensor(0, 1) != nil || RandomTensor(-3, 1) != nil {
		t.Error("non-positive length should give nil")
	}
}

func TestFloat32Bytes(t *testing.T) {
	v := []float32{0, 1, -2.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32, 3.4e38}
	b := Float32Bytes(v)
	if len(b) != 24 || b[4] != 0x00 || b[7] != 0x3f { // 1.0 is 0x3f800000, little-endian
		t.Fatalf("bytes % x", b)
	}
	back, err := BytesFloat32(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v {
		if back[i] != v[i] {
			t.Errorf("value %d: %v -> %v", i, v[i], back[i])
		}
	}
	if _, err := BytesFloat32(b[:5]); err == nil {
		t.Error("5 bytes decoded without error")
	}
	short := make([]float32, 2)
	if n := ReadFloat32s(short, b); n != 2 || short[1] != 1 {
		t.Errorf("ReadFloat32s into 2 values: n=%d %v", n, short)
	}
	if n := PutFloat32s(make([]byte, 7), v); n != 1 {
		t.Errorf("PutFloat32s into 7 bytes wrote %d values", n)
	}
}
