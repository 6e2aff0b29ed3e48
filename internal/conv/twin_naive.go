package conv

import (
	"miotool/internal/hip"
)

// naiveTwin is the Go twin of naive_conv_fwd_nchw_f32: thread idx =
// blockIdx.x*blockDim.x + threadIdx.x computes output element idx when it is
// below N*K*Ho*Wo. Like the GPU kernel it does one element at a time with a
// sequential fp32 sum over (c, r, s), on one goroutine: on the simulated
// device it is as slow, relative to the tiled kernels, as naive is on a GPU.
func naiveTwin(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
	a, err := parseConvArgs(NaiveKernel, args)
	if err != nil {
		return err
	}
	if block.Count() == 0 || block.Count() > blockThreads {
		return launchError("%s: block %dx%dx%d must have 1 to %d threads", NaiveKernel, block.X, block.Y, block.Z, blockThreads)
	}
	x, w, y, err := a.tensors(mem)
	if err != nil {
		return err
	}
	total := len(y)
	// Threads beyond x of the grid or block repeat the same indices.
	if threads := uint64(grid.X) * uint64(block.X); threads < uint64(total) {
		total = int(threads)
	}
	cg, kg := a.c/a.g, a.k/a.g
	for idx := 0; idx < total; idx++ {
		ow := idx % a.wo
		rest := idx / a.wo
		oh := rest % a.ho
		rest /= a.ho
		k := rest % a.k
		n := rest / a.k
		y[idx] = a.alpha * a.outputSum(x, w, n, k, k/kg, cg, oh, ow)
	}
	return nil
}

// outputSum is the naive kernel's sum for output (n, k, oh, ow) of group
// g: a sequential fp32 sum over (c, r, s) from zero, padding skipped. The
// naive and the direct thin twins both use it, so they add the same
// products in the same order.
func (a *convArgs) outputSum(x, w []float32, n, k, g, cg, oh, ow int) float32 {
	ih0 := oh*a.strH - a.padH
	iw0 := ow*a.strW - a.padW
	var acc float32
	for c := 0; c < cg; c++ {
		xc := x[(n*a.c+g*cg+c)*a.h*a.wd:]
		wc := w[(k*cg+c)*a.r*a.s:]
		for r := 0; r < a.r; r++ {
			ih := ih0 + r*a.dilH
			if ih < 0 || ih >= a.h {
				continue
			}
			for s := 0; s < a.s; s++ {
				iw := iw0 + s*a.dilW
				if iw < 0 || iw >= a.wd {
					continue
				}
				acc += xc[ih*a.wd+iw] * wc[r*a.s+s]
			}
		}
	}
	return acc
}
