package conv

// hasAVX2 reports whether the CPU and the OS support AVX2 (CPUID leaf 7
// EBX bit 5, with the YMM state enabled in XCR0).
func hasAVX2() bool

// conv2x2RowAVX2 computes conv2x2RowGo's first n outputs, n a multiple of
// 8, eight at a time with the same fp32 multiplies and adds in the same
// order (no fused multiply-add), so the results are identical bit for bit.
//
//go:noescape
func conv2x2RowAVX2(top, bot, out *float32, n int, coef *[5]float32)

var useAVX2 = hasAVX2()

// conv2x2Row is conv2x2RowGo, eight outputs at a time with AVX2 where the
// CPU has it.
func conv2x2Row(top, bot, out []float32, coef *[5]float32) {
	n := len(out) &^ 7
	if !useAVX2 || n == 0 {
		conv2x2RowGo(top, bot, out, coef)
		return
	}
	// The vector loop reads top and bot up to index n, inside their
	// len(out)+1 values.
	top, bot = top[:len(out)+1], bot[:len(out)+1]
	conv2x2RowAVX2(&top[0], &bot[0], &out[0], n, coef)
	conv2x2RowGo(top[n:], bot[n:], out[n:], coef)
}
