package conv

import (
	"runtime"
	"sync"
	"sync/atomic"

	"miotool/internal/hip"
)

// panelDepth is how many GEMM k terms the tiled twin gathers at a time: a
// 128-column panel of 256 terms is 128 KiB and stays in the L2 cache.
const panelDepth = 256

// tiledTwin is the Go twin of one instantiation of igemm_fwd_tile. Block
// (bx, by, bz) of the grid computes the same tile as on the GPU: output
// channels by*bm .. +bm of group bz, pixels bx*bn .. +bn, each a sequential
// fp32 sum over k = (c, r, s) in increasing order. Blocks run in parallel
// across the CPU cores; within a block the im2col slice is gathered into a
// column-major panel and a 4x2 register-blocked loop forms the dot products.
func tiledTwin(t tileShape) hip.GoKernel {
	name := t.kernel()
	return func(mem hip.Memory, grid, block hip.Dim3, args []hip.KernelArg) error {
		a, err := parseConvArgs(name, args)
		if err != nil {
			return err
		}
		if block != (hip.Dim3{X: blockThreads, Y: 1, Z: 1}) {
			return launchError("%s: block must be %dx1x1, got %dx%dx%d", name, blockThreads, block.X, block.Y, block.Z)
		}
		if t.pointwise && (a.r != 1 || a.s != 1 || a.strH != 1 || a.strW != 1 || a.padH != 0 || a.padW != 0 || a.ho != a.h || a.wo != a.wd) {
			return launchError("%s: needs a 1x1 filter, stride 1, no padding and Ho = H, Wo = W", name)
		}
		x, w, y, err := a.tensors(mem)
		if err != nil {
			return err
		}
		job := tiledJob{shape: t, a: &a, x: x, w: w, y: y,
			cg: a.c / a.g, mg: a.k / a.g, kdim: a.c / a.g * a.r * a.s,
			hw: a.h * a.wd, howo: a.ho * a.wo}
		job.npix = a.n * job.howo
		// Only blocks that own part of the output do anything on the GPU.
		nbx := min(int(grid.X), ceilDiv(job.npix, t.bn))
		nby := min(int(grid.Y), ceilDiv(job.mg, t.bm))
		nbz := min(int(grid.Z), a.g)
		job.run(nbx, nby, nbz)
		return nil
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// tiledJob is one launch of a tiled kernel.
type tiledJob struct {
	shape   tileShape
	a       *convArgs
	x, w, y []float32
	cg, mg  int // channels per group in x and y
	kdim    int // GEMM depth: cg*R*S
	hw      int
	howo    int
	npix    int // GEMM columns: N*Ho*Wo
}

// run computes blocks [0,nbx) x [0,nby) x [0,nbz), spread over the cores.
func (j *tiledJob) run(nbx, nby, nbz int) {
	blocks := nbx * nby * nbz
	if blocks <= 0 {
		return
	}
	workers := min(runtime.NumCPU(), blocks)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := newTileScratch(j.shape)
			for {
				b := int(next.Add(1) - 1)
				if b >= blocks {
					return
				}
				j.block(sc, b%nbx, b/nbx%nby, b/(nbx*nby))
			}
		}()
	}
	wg.Wait()
}

// tileScratch is one worker's reusable buffers.
type tileScratch struct {
	panel []float32 // [column][term], panelDepth terms per column
	acc   []float32 // [row][column] running sums
	xoff  []int     // per column: x offset of (n, first channel of the group) [+ pixel if pointwise]
	ih0   []int     // per column: top input row of the window
	iw0   []int     // per column: left input column of the window
	yoff  []int     // per column: y offset without the channel term
}

func newTileScratch(t tileShape) *tileScratch {
	return &tileScratch{
		panel: make([]float32, t.bn*panelDepth),
		acc:   make([]float32, t.bm*t.bn),
		xoff:  make([]int, t.bn), ih0: make([]int, t.bn), iw0: make([]int, t.bn), yoff: make([]int, t.bn),
	}
}

// block computes the tile of grid block (bx, by, bz).
func (j *tiledJob) block(sc *tileScratch, bx, by, bz int) {
	a := j.a
	m0, p0, g := by*j.shape.bm, bx*j.shape.bn, bz
	rows := min(j.shape.bm, j.mg-m0)
	cols := min(j.shape.bn, j.npix-p0)
	for col := 0; col < cols; col++ {
		p := p0 + col
		n := p / j.howo
		q := p - n*j.howo
		oh, ow := q/a.wo, q%a.wo
		sc.xoff[col] = (n*a.c + g*j.cg) * j.hw
		if j.shape.pointwise {
			sc.xoff[col] += q
		}
		sc.ih0[col] = oh*a.strH - a.padH
		sc.iw0[col] = ow*a.strW - a.padW
		sc.yoff[col] = n*a.k*j.howo + q
	}
	acc := sc.acc[:rows*cols]
	clear(acc)
	// (c, r, s) of the first term of the current panel.
	c, r, s := 0, 0, 0
	for k0 := 0; k0 < j.kdim; k0 += panelDepth {
		depth := min(panelDepth, j.kdim-k0)
		panel := sc.panel[:cols*depth]
		for kk := 0; kk < depth; kk++ {
			j.gather(sc, panel[kk:], depth, cols, c, r, s)
			if s++; s == a.s {
				s = 0
				if r++; r == a.r {
					r = 0
					c++
				}
			}
		}
		wrow := (g*j.mg+m0)*j.kdim + k0
		dotTile(acc, j.w[wrow:], j.kdim, panel, depth, rows, cols)
	}
	for row := 0; row < rows; row++ {
		yrow := (g*j.mg + m0 + row) * j.howo
		for col, v := range acc[row*cols : (row+1)*cols] {
			j.y[sc.yoff[col]+yrow] = a.alpha * v
		}
	}
}

// gather writes term (c, r, s) of every column into dst[col*stride].
func (j *tiledJob) gather(sc *tileScratch, dst []float32, stride, cols, c, r, s int) {
	a := j.a
	coff := c * j.hw
	if j.shape.pointwise {
		for col, off := range sc.xoff[:cols] {
			dst[col*stride] = j.x[off+coff]
		}
		return
	}
	dr, ds := r*a.dilH, s*a.dilW
	for col := 0; col < cols; col++ {
		ih := sc.ih0[col] + dr
		iw := sc.iw0[col] + ds
		var v float32
		if uint(ih) < uint(a.h) && uint(iw) < uint(a.wd) {
			v = j.x[sc.xoff[col]+coff+ih*a.wd+iw]
		}
		dst[col*stride] = v
	}
}

// dotTile adds, for every row i < rows and column c < cols,
// sum over t < depth of w[i*wstride+t] * panel[c*depth+t] to acc[i*cols+c],
// term by term in increasing t.
func dotTile(acc, w []float32, wstride int, panel []float32, depth, rows, cols int) {
	i := 0
	for ; i+4 <= rows; i += 4 {
		a0 := w[i*wstride:][:depth]
		a1 := w[(i+1)*wstride:][:depth]
		a2 := w[(i+2)*wstride:][:depth]
		a3 := w[(i+3)*wstride:][:depth]
		c := 0
		for ; c+2 <= cols; c += 2 {
			b0 := panel[c*depth:][:depth]
			b1 := panel[(c+1)*depth:][:depth]
			dot4x2(acc[i*cols+c:], cols, a0, a1, a2, a3, b0, b1)
		}
		for ; c < cols; c++ {
			b := panel[c*depth:][:depth]
			for di, ai := range [][]float32{a0, a1, a2, a3} {
				acc[(i+di)*cols+c] = dot1(acc[(i+di)*cols+c], ai, b)
			}
		}
	}
	for ; i < rows; i++ {
		ai := w[i*wstride:][:depth]
		for c := 0; c < cols; c++ {
			acc[i*cols+c] = dot1(acc[i*cols+c], ai, panel[c*depth:][:depth])
		}
	}
}

// dot4x2 continues the 8 running sums acc[r*stride+c], r < 4, c < 2, with
// the products of rows a0..a3 and columns b0, b1.
func dot4x2(acc []float32, stride int, a0, a1, a2, a3, b0, b1 []float32) {
	n := len(b0)
	a0, a1, a2, a3, b1 = a0[:n], a1[:n], a2[:n], a3[:n], b1[:n]
	_ = acc[3*stride+1]
	s00, s01 := acc[0], acc[1]
	s10, s11 := acc[stride], acc[stride+1]
	s20, s21 := acc[2*stride], acc[2*stride+1]
	s30, s31 := acc[3*stride], acc[3*stride+1]
	for t, x0 := range b0 {
		x1 := b1[t]
		v := a0[t]
		s00 += v * x0
		s01 += v * x1
		v = a1[t]
		s10 += v * x0
		s11 += v * x1
		v = a2[t]
		s20 += v * x0
		s21 += v * x1
		v = a3[t]
		s30 += v * x0
		s31 += v * x1
	}
	acc[0], acc[1] = s00, s01
	acc[stride], acc[stride+1] = s10, s11
	acc[2*stride], acc[2*stride+1] = s20, s21
	acc[3*stride], acc[3*stride+1] = s30, s31
}

// dot1 continues one running sum with the products of a and b.
func dot1(sum float32, a, b []float32) float32 {
	a = a[:len(b)]
	for t, v := range b {
		sum += a[t] * v
	}
	return sum
}
