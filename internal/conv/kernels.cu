// miotool forward convolution kernels: NCHW tensors, fp32, groups.
//
// One source for NVRTC (CUDA 12/13) and hiprtc (HIP 6/7). It includes no
// headers and uses only extern "C" entry points, __shared__, __syncthreads,
// the built-in thread indices, __restrict__, plain int/float arithmetic and
// #pragma unroll. Every entry point has a Go twin in this package (twin_*.go)
// that computes the same output elements for the simulated device: change
// both together.
//
// Every entry point takes the same parameters, in this order (the Go side
// passes them as []hip.KernelArg in the same order):
//   x, w, y, N, C, H, W, K, R, S, Ho, Wo, pad_h, pad_w, stride_h, stride_w,
//   dil_h, dil_w, G, alpha
// x is N x C x H x W, w is K x (C/G) x R x S, y is N x K x Ho x Wo. All
// element counts fit in int (the host checks), so indices are 32-bit.
// alpha scales every output once, after its sum (y = alpha * conv(x, w), the
// alpha of cuDNN's and MIOpen's forward call). Multiplying by the reciprocal
// of a power of two rounds exactly as dividing by it does, so a division that
// follows the convolution can be fused here bit for bit.

#define MIO_CONV_PARAMS                                                              \
    const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, \
    int N, int C, int H, int W, int K, int R, int S, int Ho, int Wo,                 \
    int pad_h, int pad_w, int stride_h, int stride_w, int dil_h, int dil_w, int G,   \
    float alpha

#define MIO_CONV_ARGS \
    x, w, y, N, C, H, W, K, R, S, Ho, Wo, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, G, alpha

// ---------------------------------------------------------------------------
// Naive direct convolution: one thread per output element, launched as a 1-D
// grid of 256-thread blocks covering N*K*Ho*Wo. The universal fallback, and
// deliberately slow on large problems.
// ---------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(256)
naive_conv_fwd_nchw_f32(MIO_CONV_PARAMS)
{
    const unsigned total = (unsigned)N * (unsigned)K * (unsigned)Ho * (unsigned)Wo;
    const unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total)
        return;
    const int ow = (int)(idx % (unsigned)Wo);
    unsigned rest = idx / (unsigned)Wo;
    const int oh = (int)(rest % (unsigned)Ho);
    rest /= (unsigned)Ho;
    const int k = (int)(rest % (unsigned)K);
    const int n = (int)(rest / (unsigned)K);

    const int cg = C / G;
    const int kg = K / G;
    const int g = k / kg;
    const int ih0 = oh * stride_h - pad_h;
    const int iw0 = ow * stride_w - pad_w;

    float acc = 0.0f;
    for (int c = 0; c < cg; ++c) {
        const float* xc = x + (n * C + g * cg + c) * H * W;
        const float* wc = w + (k * cg + c) * R * S;
        for (int r = 0; r < R; ++r) {
            const int ih = ih0 + r * dil_h;
            if (ih < 0 || ih >= H)
                continue;
            for (int s = 0; s < S; ++s) {
                const int iw = iw0 + s * dil_w;
                if (iw < 0 || iw >= W)
                    continue;
                acc += xc[ih * W + iw] * wc[r * S + s];
            }
        }
    }
    y[idx] = alpha * acc;
}

// ---------------------------------------------------------------------------
// Direct convolution for thin problems, which the tiled solver plans instead
// of a GEMM tile: few output channels per group and a short reduction, where
// a tile would be mostly empty rows and the GPU would move data at a small
// fraction of its bandwidth. Grid (ceil(Wo/256), Ho, N*K) of 256-thread
// blocks: thread (bx*256+tx, oh, n*K+k) computes output (n, k, oh, ow), the
// same sequential fp32 sum over (c, r, s) as the naive kernel, without its
// index divisions; neighbouring threads read neighbouring inputs.
// ---------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(256)
direct_thin_fwd_nchw_f32(MIO_CONV_PARAMS)
{
    const int ow = blockIdx.x * blockDim.x + threadIdx.x;
    const int oh = blockIdx.y;
    const int nk = blockIdx.z;
    if (ow >= Wo || oh >= Ho || nk >= N * K)
        return;
    const int n = nk / K;
    const int k = nk - n * K;
    const int cg = C / G;
    const int g = k / (K / G);
    const int ih0 = oh * stride_h - pad_h;
    const int iw0 = ow * stride_w - pad_w;

    float acc = 0.0f;
    for (int c = 0; c < cg; ++c) {
        const float* xc = x + (n * C + g * cg + c) * H * W;
        const float* wc = w + (k * cg + c) * R * S;
        for (int r = 0; r < R; ++r) {
            const int ih = ih0 + r * dil_h;
            if (ih < 0 || ih >= H)
                continue;
            for (int s = 0; s < S; ++s) {
                const int iw = iw0 + s * dil_w;
                if (iw < 0 || iw >= W)
                    continue;
                acc += xc[ih * W + iw] * wc[r * S + s];
            }
        }
    }
    y[(nk * Ho + oh) * Wo + ow] = alpha * acc;
}

// ---------------------------------------------------------------------------
// Tiled implicit GEMM. Per group g the convolution is the matrix product
//   Y_g[m][p] = sum_k A_g[m][k] * B_g[k][p]
// with m an output channel of the group (M = K/G rows), p = (n, oh, ow) an
// output pixel (N*Ho*Wo columns) and k = (c, r, s) in the weights' own order
// (C/G*R*S terms); A_g is the group's weights read in place and B_g is the
// im2col view of x, gathered on the fly with zero padding.
//
// Block: 256 threads computing a BM x BN tile of Y_g; grid = (ceil(pixels/BN),
// ceil(M/BM), G). Each k-step stages a BK-deep slice of A and B in shared
// memory (double buffered: one barrier per step, and the next slice's global
// loads are in flight during the current slice's arithmetic). Thread (tx, ty)
// of a 16 x 16 arrangement owns a (BM/16) x (BN/16) register tile made of
// 4-wide runs at rows ty*4 + 64*h and columns tx*4 + 64*h, so its shared
// reads are aligned 4-float runs. Each output is a sequential fp32 sum over k
// in increasing order, whatever BK is.
//
// POINTWISE is the 1x1 GEMM case (R = S = 1, stride 1, no padding): then
// B_g[c][p] is x itself and the gather needs no bounds or index arithmetic.
// ---------------------------------------------------------------------------
#define MIO_THREADS 256

template <int BM, int BN, int BK, bool POINTWISE>
__device__ void igemm_fwd_tile(MIO_CONV_PARAMS)
{
    // A rows are padded by 4 floats: the transposing stores then spread over
    // the banks and the 4-float reads stay 16-byte aligned.
    __shared__ float As[2][BK][BM + 4];
    __shared__ float Bs[2][BK][BN];

    const int TM = BM / 16;               // rows per thread
    const int TN = BN / 16;               // columns per thread
    const int A_ROWS = MIO_THREADS / BK;  // A rows staged per pass
    const int A_LOADS = BM / A_ROWS;      // A elements each thread stages per k-step
    const int B_PASSES = BK / 8;          // B rows each thread stages per k-step
    const int B_COLS = BN / 32;           // B columns each thread stages per row

    const int g = blockIdx.z;
    const int cg = C / G;
    const int mg = K / G;
    const int rs = R * S;
    const int kdim = cg * rs;
    const int hw = H * W;
    const int howo = Ho * Wo;
    const int npix = N * howo;
    const int m0 = blockIdx.y * BM;
    const int p0 = blockIdx.x * BN;
    if (g >= G || m0 >= mg || p0 >= npix)
        return; // uniform across the block, before any barrier

    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;

    // A staging: column ka of the k-slice, rows ma + A_ROWS*j of the tile.
    const int ka = tid % BK;
    const int ma = tid / BK;
    const int a_rows_left = mg - m0 - ma; // row j is inside when A_ROWS*j < a_rows_left
    const int a_base = (g * mg + m0 + ma) * kdim + ka;
    const int a_step = A_ROWS * kdim;

    // B staging: rows warp + 8*i of the k-slice, columns lane + 32*j.
    int b_off[B_COLS]; // x offset of (n, first channel of g) [+ pixel when POINTWISE]; -1: no pixel
    int b_ih[B_COLS];  // top input row of the pixel's window; far negative: no pixel
    int b_iw[B_COLS];  // left input column of the pixel's window
#pragma unroll
    for (int j = 0; j < B_COLS; ++j) {
        const int p = p0 + lane + 32 * j;
        if (p < npix) {
            const int n = p / howo;
            const int q = p - n * howo;
            const int oh = q / Wo;
            const int ow = q - oh * Wo;
            b_off[j] = (n * C + g * cg) * hw + (POINTWISE ? q : 0);
            b_ih[j] = oh * stride_h - pad_h;
            b_iw[j] = ow * stride_w - pad_w;
        } else {
            b_off[j] = POINTWISE ? -1 : 0;
            b_ih[j] = -(1 << 30);
            b_iw[j] = 0;
        }
    }

    // (c, r, s) of each B row, advanced by BK terms per k-step without
    // division: the step's own (c, r, s) is added with carries.
    int bc[B_PASSES], br[B_PASSES], bs[B_PASSES];
#pragma unroll
    for (int i = 0; i < B_PASSES; ++i) {
        const int k = warp + 8 * i;
        bc[i] = k / rs;
        br[i] = (k - bc[i] * rs) / S;
        bs[i] = k - bc[i] * rs - br[i] * S;
    }
    const int step_c = BK / rs;
    const int step_r = (BK - step_c * rs) / S;
    const int step_s = BK - step_c * rs - step_r * S;

    float ra[A_LOADS];
    float rb[B_PASSES][B_COLS];
    // Loads the k-slice starting at k0 into ra/rb; the B row state must match k0.
    auto load_slice = [&](int k0) {
        const bool k_ok = k0 + ka < kdim;
#pragma unroll
        for (int j = 0; j < A_LOADS; ++j)
            ra[j] = (k_ok && A_ROWS * j < a_rows_left) ? w[a_base + a_step * j + k0] : 0.0f;
#pragma unroll
        for (int i = 0; i < B_PASSES; ++i) {
            if (POINTWISE) {
                const int c = k0 + warp + 8 * i;
                const int coff = c * hw;
#pragma unroll
                for (int j = 0; j < B_COLS; ++j)
                    rb[i][j] = (c < cg && b_off[j] >= 0) ? x[b_off[j] + coff] : 0.0f;
            } else {
                const int coff = bc[i] * hw;
                const int dr = br[i] * dil_h;
                const int ds = bs[i] * dil_w;
#pragma unroll
                for (int j = 0; j < B_COLS; ++j) {
                    const int ih = b_ih[j] + dr;
                    const int iw = b_iw[j] + ds;
                    const bool ok = bc[i] < cg && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
                    rb[i][j] = ok ? x[b_off[j] + coff + ih * W + iw] : 0.0f;
                }
            }
        }
    };

    const int tx = (lane & 7) + ((warp & 1) << 3);
    const int ty = (lane >> 3) + ((warp >> 1) << 2);

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = 0.0f;

    const int ksteps = (kdim + BK - 1) / BK;
    load_slice(0);
    for (int step = 0; step < ksteps; ++step) {
        const int buf = step & 1;
        // Stage the slice loaded during the previous step. The other buffer
        // may still be read by slower threads; this one is free because every
        // thread passed the previous barrier after its last read of it.
#pragma unroll
        for (int j = 0; j < A_LOADS; ++j)
            As[buf][ka][ma + A_ROWS * j] = ra[j];
#pragma unroll
        for (int i = 0; i < B_PASSES; ++i)
#pragma unroll
            for (int j = 0; j < B_COLS; ++j)
                Bs[buf][warp + 8 * i][lane + 32 * j] = rb[i][j];
        __syncthreads();

        if (step + 1 < ksteps) {
            if (!POINTWISE) {
#pragma unroll
                for (int i = 0; i < B_PASSES; ++i) {
                    bs[i] += step_s;
                    br[i] += step_r;
                    bc[i] += step_c;
                    if (bs[i] >= S) {
                        bs[i] -= S;
                        ++br[i];
                    }
                    if (br[i] >= R) {
                        br[i] -= R;
                        ++bc[i];
                    }
                }
            }
            load_slice((step + 1) * BK);
        }

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM];
            float b[TN];
#pragma unroll
            for (int h = 0; h < TM / 4; ++h)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    a[h * 4 + i] = As[buf][kk][ty * 4 + h * 64 + i];
#pragma unroll
            for (int h = 0; h < TN / 4; ++h)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    b[h * 4 + i] = Bs[buf][kk][tx * 4 + h * 64 + i];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += a[i] * b[j];
        }
    }

    // Write back. Column offsets into y (without the channel term), -1 where
    // the column is past the last pixel.
    int y_col[TN];
#pragma unroll
    for (int h = 0; h < TN / 4; ++h)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int p = p0 + tx * 4 + h * 64 + i;
            int off = -1;
            if (p < npix) {
                const int n = p / howo;
                off = n * K * howo + (p - n * howo);
            }
            y_col[h * 4 + i] = off;
        }
#pragma unroll
    for (int h = 0; h < TM / 4; ++h)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + ty * 4 + h * 64 + i;
            if (m < mg) {
                const int row = (g * mg + m) * howo;
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    if (y_col[j] >= 0)
                        y[y_col[j] + row] = alpha * acc[h * 4 + i][j];
            }
        }
}

// Entry points: tile shape in the name; the Go side picks one per problem.
// BK (k-slice depth) and the blocks-per-SM hint are performance choices only.
#define MIO_IGEMM_ENTRY(NAME, BM, BN, BK, POINTWISE, MIN_BLOCKS)          \
    extern "C" __global__ void __launch_bounds__(MIO_THREADS, MIN_BLOCKS) \
    NAME(MIO_CONV_PARAMS)                                                 \
    {                                                                     \
        igemm_fwd_tile<BM, BN, BK, POINTWISE>(MIO_CONV_ARGS);             \
    }

// BK and MIN_BLOCKS per shape were chosen by timing on an H200 (sm_90).
MIO_IGEMM_ENTRY(igemm_fwd_nchw_f32_128x128, 128, 128, 8, false, 2)
MIO_IGEMM_ENTRY(igemm_fwd_nchw_f32_64x128, 64, 128, 16, false, 2)
MIO_IGEMM_ENTRY(igemm_fwd_nchw_f32_64x64, 64, 64, 16, false, 2)
MIO_IGEMM_ENTRY(gemm1x1_fwd_nchw_f32_128x128, 128, 128, 8, true, 2)
MIO_IGEMM_ENTRY(gemm1x1_fwd_nchw_f32_64x128, 64, 128, 16, true, 2)
MIO_IGEMM_ENTRY(gemm1x1_fwd_nchw_f32_64x64, 64, 64, 16, true, 2)
