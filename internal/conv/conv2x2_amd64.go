package conv

// hasAVX2 reports whether the CPU and the OS support AVX2 (CPUID leaf 7
// EBX bit 5, with the YMM state enabled in XCR0).
func hasAVX2() bool

// hasAVX512 reports whether the CPU and the OS support AVX-512 Foundation
// (CPUID leaf 7 EBX bit 16, with the opmask and ZMM state enabled in XCR0).
func hasAVX512() bool

// conv2x2RowAVX2 computes conv2x2RowGo's first n outputs, n a multiple of
// 8, eight at a time with the same fp32 multiplies and adds in the same
// order (no fused multiply-add), so the results are identical bit for bit.
//
//go:noescape
func conv2x2RowAVX2(top, bot, out *float32, n int, coef *[5]float32)

// conv2x2RowAVX512 is conv2x2RowAVX2 sixteen at a time, n a multiple of 16.
//
//go:noescape
func conv2x2RowAVX512(top, bot, out *float32, n int, coef *[5]float32)

// The vector widths conv2x2Row uses; tests turn them off to check each.
var (
	useAVX2   = hasAVX2()
	useAVX512 = useAVX2 && hasAVX512()
)

// conv2x2Row is conv2x2RowGo, sixteen outputs at a time with AVX-512 and
// eight with AVX2 where the CPU has them, the rest one at a time. The
// simulator's stress run spends most of its time here: on a CPU with
// AVX-512 the wider loop halves the instructions per output.
func conv2x2Row(top, bot, out []float32, coef *[5]float32) {
	n := len(out)
	// The vector loops read top and bot up to the index they stop at,
	// inside their len(out)+1 values.
	top, bot = top[:n+1], bot[:n+1]
	done := 0
	if useAVX512 && n >= 16 {
		done = n &^ 15
		conv2x2RowAVX512(&top[0], &bot[0], &out[0], done, coef)
	}
	if useAVX2 && n-done >= 8 {
		m := (n - done) &^ 7
		conv2x2RowAVX2(&top[done], &bot[done], &out[done], m, coef)
		done += m
	}
	conv2x2RowGo(top[done:], bot[done:], out[done:], coef)
}
