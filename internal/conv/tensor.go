package conv

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// RandomTensor returns n values in [-1, 1), a pure function of (n, seed):
// element i depends only on seed and i, so large tensors fill in parallel
// and a prefix of a longer tensor equals the shorter one.
func RandomTensor(n int, seed uint64) []float32 {
	if n <= 0 {
		return nil
	}
	out := make([]float32, n)
	parallelRange(n, 1<<16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = randomValue(seed, uint64(i))
		}
	})
	return out
}

// randomValue hashes (seed, i) with the splitmix64 finalizer and maps the
// top 24 bits onto a multiple of 2^-23 in [-1, 1); every value is exact in fp32.
func randomValue(seed, i uint64) float32 {
	z := seed + (i+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return float32(int32(z>>40)-(1<<23)) / (1 << 23)
}

// Float32Bytes encodes v as little-endian bytes (4 per value).
func Float32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	PutFloat32s(b, v)
	return b
}

// PutFloat32s writes v into b as little-endian float32s and returns the
// number of values written: min(len(v), len(b)/4).
func PutFloat32s(b []byte, v []float32) int {
	n := min(len(v), len(b)/4)
	b, v = b[:4*n], v[:n]
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return n
}

// BytesFloat32 decodes little-endian float32s; len(b) must be a multiple of 4.
func BytesFloat32(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("float32 data has %d bytes, not a multiple of 4", len(b))
	}
	v := make([]float32, len(b)/4)
	ReadFloat32s(v, b)
	return v, nil
}

// ReadFloat32s decodes little-endian float32s from b into v and returns the
// number of values read: min(len(v), len(b)/4).
func ReadFloat32s(v []float32, b []byte) int {
	n := min(len(v), len(b)/4)
	b, v = b[:4*n], v[:n]
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return n
}

// parallelRange splits [0, n) into contiguous chunks over the CPU cores and
// waits for all of them; ranges shorter than minChunk stay on one goroutine.
func parallelRange(n, minChunk int, fn func(lo, hi int)) {
	workers := runtime.NumCPU()
	if minChunk < 1 {
		minChunk = 1
	}
	if max := (n + minChunk - 1) / minChunk; workers > max {
		workers = max
	}
	if workers <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}
