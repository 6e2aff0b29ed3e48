package conv

// vectorWidth is one choice of the vector loops conv2x2Row may use.
type vectorWidth struct {
	name string
	use  func() (restore func())
}

// vectorWidths are the choices this CPU can run: none, AVX2 alone, AVX2
// with AVX-512.
func vectorWidths() []vectorWidth {
	set := func(avx2, avx512 bool) func() func() {
		return func() func() {
			old2, old512 := useAVX2, useAVX512
			useAVX2, useAVX512 = avx2, avx512
			return func() { useAVX2, useAVX512 = old2, old512 }
		}
	}
	out := []vectorWidth{{"scalar", set(false, false)}}
	if hasAVX2() {
		out = append(out, vectorWidth{"avx2", set(true, false)})
		if hasAVX512() {
			out = append(out, vectorWidth{"avx512", set(true, true)})
		}
	}
	return out
}
