package conv

import (
	"miotool/internal/hip"
)

// directThinTwin is the Go twin of direct_thin_fwd_nchw_f32: thread
// (bx*blockDim.x+tx, by, bz) computes output (n, k, oh, ow) with
// ow = bx*blockDim.x+tx, oh = by, n*K+k = bz when all three are in range,
// as the naive twin computes it (a sequential fp32 sum over (c, r, s) from
// zero, padding skipped, then alpha times the sum). The shape the stress
// scenario runs a thousand times per thread (one input channel per output
// channel, 2x2, stride 1, no padding) takes conv2x2Rows, which adds the same
// products in the same order, vectorized where the CPU allows.
func directThinTwin(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
	a, err := parseConvArgs(DirectThinKernel, args)
	if err != nil {
		return err
	}
	if block.Count() == 0 || block.Count() > blockThreads {
		return launchError("%s: block %dx%dx%d must have 1 to %d threads", DirectThinKernel, block.X, block.Y, block.Z, blockThreads)
	}
	x, w, y, err := a.tensors(mem)
	if err != nil {
		return err
	}
	// Threads beyond x of the block repeat the same indices; blocks past the
	// output return at once.
	owEnd := int(min(uint64(grid.X)*uint64(block.X), uint64(a.wo)))
	ohEnd := min(int(grid.Y), a.ho)
	nkEnd := min(int(grid.Z), a.n*a.k)
	if owEnd == 0 || ohEnd == 0 || nkEnd == 0 {
		return nil
	}
	if a.conv2x2() {
		conv2x2Rows(x, w, y, &a, owEnd, ohEnd, nkEnd)
		return nil
	}
	cg, kg := a.c/a.g, a.k/a.g
	for nk := 0; nk < nkEnd; nk++ {
		n, k := nk/a.k, nk%a.k
		g := k / kg
		for oh := 0; oh < ohEnd; oh++ {
			row := y[(nk*a.ho+oh)*a.wo:][:owEnd]
			for ow := range row {
				row[ow] = a.alpha * a.outputSum(x, w, n, k, g, cg, oh, ow)
			}
		}
	}
	return nil
}

// conv2x2 reports whether a is a 2x2 convolution with one input channel per
// output channel, stride 1, no dilation and no padding: every window lies
// inside the input and output row oh reads input rows oh and oh+1.
func (a *convArgs) conv2x2() bool {
	return a.c == a.g && a.r == 2 && a.s == 2 && a.padH == 0 && a.padW == 0 &&
		a.strH == 1 && a.strW == 1 && a.dilH == 1 && a.dilW == 1 &&
		a.ho == a.h-1 && a.wo == a.wd-1
}

// conv2x2Rows computes outputs ow < owEnd of rows oh < ohEnd of planes
// n*K+k < nkEnd for the conv2x2 shape: input channel k/(K/G) through
// filter k.
func conv2x2Rows(x, w, y []float32, a *convArgs, owEnd, ohEnd, nkEnd int) {
	kg := a.k / a.g
	plane, out := a.h*a.wd, a.ho*a.wo
	for nk := 0; nk < nkEnd; nk++ {
		n, k := nk/a.k, nk%a.k
		xs := x[(n*a.c+k/kg)*plane:][:plane]
		ys := y[nk*out:][:out]
		coef := [5]float32{w[4*k], w[4*k+1], w[4*k+2], w[4*k+3], a.alpha}
		for oh := 0; oh < ohEnd; oh++ {
			conv2x2Row(xs[oh*a.wd:][:owEnd+1], xs[(oh+1)*a.wd:][:owEnd+1], ys[oh*a.wo:][:owEnd], &coef)
		}
	}
}

// conv2x2RowGo is one output row of the conv2x2 shape: out[i] = alpha *
// (0 + top[i]*w0 + top[i+1]*w1 + bot[i]*w2 + bot[i+1]*w3), added left to
// right in fp32, with coef = {w0, w1, w2, w3, alpha}; top and bot hold
// len(out)+1 values.
func conv2x2RowGo(top, bot, out []float32, coef *[5]float32) {
	w0, w1, w2, w3, alpha := coef[0], coef[1], coef[2], coef[3], coef[4]
	top, bot = top[:len(out)+1], bot[:len(out)+1]
	for i := range out {
		var acc float32
		acc += top[i] * w0
		acc += top[i+1] * w1
		acc += bot[i] * w2
		acc += bot[i+1] * w3
		out[i] = alpha * acc
	}
}

// Conv2x2Row computes one output row of the conv2x2 shape exactly as the
// naive and direct thin twins do: out[i] = alpha * (0 + top[i]*w0 +
// top[i+1]*w1 + bot[i]*w2 + bot[i+1]*w3), added left to right in fp32,
// coef = {w0, w1, w2, w3, alpha}, top and bot holding len(out)+1 values.
// It is for callers that run several such launches fused on the simulator
// (hip.Fusion) and must leave the bits those launches would.
func Conv2x2Row(top, bot, out []float32, coef *[5]float32) { conv2x2Row(top, bot, out, coef) }
