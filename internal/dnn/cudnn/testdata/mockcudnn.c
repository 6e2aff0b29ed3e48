/*
 * Stand-in for libcudnn.so.9 (and the few libcuda.so.1 calls Context
 * makes), built by the tests with gcc. It exports the cuDNN 9 symbols the
 * Go binding uses with the C signatures of cudnn_graph.h, cudnn_ops.h and
 * cudnn_cnn.h (mockcudnn_api.h lists them, and cudnn_check.c holds the
 * lists to the real headers), logs every call with its argument values,
 * and computes the convolution and the scaling on host memory so that the
 * Go side's argument order can be checked by results as well as by the
 * log.
 *
 * Beside the controls of dnnstandin.h (the log, injected failures,
 * computing on or off), mock_* let a test set the version the library
 * reports, count retained contexts, read the thread's current context and
 * read the struct layout the C compiler chose.
 */
#include "mockcudnn_api.h"

/* The enumerators of cudnn.h and cuda.h the stand-in uses. */
#define MOCK_NUMBER(name, value) MOCK_##name = value,
enum { MOCKCUDNN_NUMBERS(MOCK_NUMBER) MOCKCUDNN_DRIVER_NUMBERS(MOCK_NUMBER) };

#define STANDIN_BAD_PARAM MOCK_CUDNN_STATUS_BAD_PARAM
#include "../../dnnlib/dnntest/dnnstandin.h"

/* The headers' types as the stand-in spells them: enums as int (their C
 * ABI), handles and descriptors as pointers to dnnstandin.h's objects
 * (filters are tensors of the FILTER kind). */
typedef int cudnnStatus_t;
typedef int cudnnTensorFormat_t;
typedef int cudnnDataType_t;
typedef int cudnnConvolutionMode_t;
typedef int cudnnMathType_t;
typedef int cudnnConvolutionFwdAlgo_t;
typedef void *cudaStream_t;
typedef handle_t *cudnnHandle_t;
typedef tensor_t *cudnnTensorDescriptor_t;
typedef tensor_t *cudnnFilterDescriptor_t;
typedef conv_t *cudnnConvolutionDescriptor_t;
typedef mockcudnn_fwd_algo_perf cudnnConvolutionFwdAlgoPerf_t;
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;

#define MOCK_DECLARE(ret, name, params) ret name params;
MOCKCUDNN_API(MOCK_DECLARE)
MOCKCUDNN_DRIVER_API(MOCK_DECLARE)

static size_t version = 91400;
static __thread void *current_ctx;
static int ctx_retains;
static int device_count = 2;

/* ---- controls beyond dnnstandin.h's ---- */

void mock_set_version(size_t v) { version = v; }
int mock_ctx_retains(void) { return ctx_retains; }
void *mock_current_ctx(void) { return current_ctx; }

/* mock_perf_layout writes sizeof and the offsets of the perf struct. */
void mock_perf_layout(int *out) {
    out[0] = (int)sizeof(cudnnConvolutionFwdAlgoPerf_t);
    out[1] = (int)offsetof(cudnnConvolutionFwdAlgoPerf_t, status);
    out[2] = (int)offsetof(cudnnConvolutionFwdAlgoPerf_t, time);
    out[3] = (int)offsetof(cudnnConvolutionFwdAlgoPerf_t, memory);
    out[4] = (int)offsetof(cudnnConvolutionFwdAlgoPerf_t, determinism);
    out[5] = (int)offsetof(cudnnConvolutionFwdAlgoPerf_t, mathType);
    out[6] = (int)offsetof(cudnnConvolutionFwdAlgoPerf_t, reserved);
}

/* ---- the CUDA driver calls Context makes ---- */

CUresult cuInit(unsigned int flags) {
    logf_("cuInit flags=%u", flags);
    return 0;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
    if (ordinal < 0 || ordinal >= device_count)
        return MOCK_CUDA_ERROR_INVALID_DEVICE;
    *dev = 100 + ordinal;
    return 0;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
    *ctx = (void *)(uintptr_t)(0xC0000 + dev);
    __sync_fetch_and_add(&ctx_retains, 1);
    return 0;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    (void)dev;
    __sync_fetch_and_sub(&ctx_retains, 1);
    return 0;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    current_ctx = ctx;
    return 0;
}

/* ---- cudnn_graph.h ---- */

size_t cudnnGetVersion(void) { return version; }
size_t cudnnGetCudartVersion(void) { return 12080; }

const char *cudnnGetErrorString(cudnnStatus_t st) {
    switch (st) {
    case MOCK_CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case MOCK_CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case MOCK_CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case MOCK_CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case MOCK_CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER: return "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER";
    }
    return "CUDNN_STATUS_UNKNOWN";
}

static __thread char last_error[256];

static int fail(int st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

void cudnnGetLastErrorString(char *message, size_t max_size) {
    if (max_size == 0)
        return;
    snprintf(message, max_size, "%s", last_error);
    last_error[0] = 0;
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *out) {
    FAIL_POINT("cudnnCreate");
    if (current_ctx == NULL)
        return fail(MOCK_CUDNN_STATUS_NOT_INITIALIZED, "stand-in: no CUDA context is current on this thread");
    handle_t *h = new_object(HANDLE, sizeof *h);
    h->ctx = current_ctx;
    *out = h;
    logf_("cudnnCreate handle=%p ctx=%p", (void *)h, h->ctx);
    return 0;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h) { return destroy_handle(h, "cudnnDestroy"); }

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t stream) {
    FAIL_POINT("cudnnSetStream");
    return set_stream(h, stream, "cudnnSetStream");
}

cudnnStatus_t cudnnGetStream(cudnnHandle_t h, cudaStream_t *stream) { return get_stream(h, stream); }

/* ---- cudnn_ops.h ---- */

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) {
    return create_desc((void **)d, TENSOR, sizeof(tensor_t), "cudnnCreateTensorDescriptor");
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
    return destroy_desc(d, TENSOR, "cudnnDestroyTensorDescriptor");
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d, cudnnTensorFormat_t format, cudnnDataType_t dtype,
    int n, int c, int h, int w) {
    FAIL_POINT("cudnnSetTensor4dDescriptor");
    logf_("cudnnSetTensor4dDescriptor desc=%p format=%d dtype=%d n=%d c=%d h=%d w=%d", (void *)d, format, dtype, n, c, h, w);
    if (!live(d, TENSOR) || n < 1 || c < 1 || h < 1 || w < 1)
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: bad tensor");
    d->format = format, d->dtype = dtype, d->n = n, d->c = c, d->h = h, d->w = w;
    return 0;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) {
    return create_desc((void **)d, FILTER, sizeof(tensor_t), "cudnnCreateFilterDescriptor");
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
    return destroy_desc(d, FILTER, "cudnnDestroyFilterDescriptor");
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t dtype, cudnnTensorFormat_t format,
    int k, int c, int h, int w) {
    FAIL_POINT("cudnnSetFilter4dDescriptor");
    logf_("cudnnSetFilter4dDescriptor desc=%p dtype=%d format=%d k=%d c=%d h=%d w=%d", (void *)d, dtype, format, k, c, h, w);
    if (!live(d, FILTER) || k < 1 || c < 1 || h < 1 || w < 1)
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: bad filter");
    d->format = format, d->dtype = dtype, d->n = k, d->c = c, d->h = h, d->w = w;
    return 0;
}

/* ---- cudnn_cnn.h ---- */

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) {
    return create_desc((void **)d, CONV, sizeof(conv_t), "cudnnCreateConvolutionDescriptor");
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
    return destroy_desc(d, CONV, "cudnnDestroyConvolutionDescriptor");
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u, int v,
    int dil_h, int dil_w, cudnnConvolutionMode_t mode, cudnnDataType_t ctype) {
    FAIL_POINT("cudnnSetConvolution2dDescriptor");
    logf_("cudnnSetConvolution2dDescriptor desc=%p pad=%dx%d stride=%dx%d dilation=%dx%d mode=%d compute=%d",
          (void *)d, pad_h, pad_w, u, v, dil_h, dil_w, mode, ctype);
    if (!live(d, CONV) || pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dil_h < 1 || dil_w < 1)
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: bad convolution");
    d->pad_h = pad_h, d->pad_w = pad_w, d->u = u, d->v = v, d->dil_h = dil_h, d->dil_w = dil_w;
    d->mode = mode, d->ctype = ctype;
    return 0;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
    logf_("cudnnSetConvolutionMathType desc=%p math=%d", (void *)d, math);
    if (!live(d, CONV) || math < MOCK_CUDNN_DEFAULT_MATH || math > MOCK_CUDNN_FMA_MATH)
        return MOCK_CUDNN_STATUS_BAD_PARAM;
    d->math = math;
    return 0;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t cv,
    const cudnnTensorDescriptor_t x, const cudnnFilterDescriptor_t w, int *n, int *c, int *h, int *wd) {
    return output_dim(cv, x, w, FILTER, n, c, h, wd);
}

/* check_problem validates the four descriptors of a forward convolution. */
static int check_problem(const handle_t *h, const tensor_t *x, const tensor_t *w, const conv_t *cv, const tensor_t *y) {
    if (!live(h, HANDLE))
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: bad handle");
    if (!live(x, TENSOR) || !live(w, FILTER) || !live(cv, CONV) || !live(y, TENSOR))
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: a descriptor is not alive or of the wrong kind");
    if (x->c != w->c)
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: x has %d channels, w %d", x->c, w->c);
    int d[4];
    out_dims(cv, x, w, d);
    if (y->n != d[0] || y->c != d[1] || y->h != d[2] || y->w != d[3])
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: y is %dx%dx%dx%d, want %dx%dx%dx%d", y->n, y->c, y->h, y->w,
                    d[0], d[1], d[2], d[3]);
    if (h->ctx != current_ctx)
        return fail(MOCK_CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER,
                    "stand-in: the handle's context is not current on this thread");
    return 0;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t h, int *count) {
    (void)h;
    *count = MOCK_CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    return 0;
}

/* workspace_for is the stand-in's workspace need per algorithm. */
static size_t workspace_for(int algo) {
    return algo == MOCK_CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ? 4096 : 0;
}

static void fill_perf(cudnnConvolutionFwdAlgoPerf_t *p, int algo, int status, float time, int det, int math) {
    p->algo = algo;
    p->status = status;
    p->time = time;
    p->memory = workspace_for(algo);
    p->determinism = det;
    p->mathType = math;
    p->reserved[0] = p->reserved[1] = p->reserved[2] = -7;
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
    const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t cv, const cudnnTensorDescriptor_t y,
    const int requested, int *returned, cudnnConvolutionFwdAlgoPerf_t *perf) {
    FAIL_POINT("cudnnFindConvolutionForwardAlgorithm");
    logf_("cudnnFindConvolutionForwardAlgorithm handle=%p x=%p w=%p conv=%p y=%p requested=%d stream=%p",
          (void *)h, (void *)x, (void *)w, (void *)cv, (void *)y, requested, h ? h->stream : NULL);
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    cudnnConvolutionFwdAlgoPerf_t all[3];
    fill_perf(&all[0], MOCK_CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, MOCK_CUDNN_STATUS_SUCCESS, 0.25f,
              MOCK_CUDNN_DETERMINISTIC, cv->math);
    fill_perf(&all[1], MOCK_CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, MOCK_CUDNN_STATUS_SUCCESS, 0.5f,
              MOCK_CUDNN_NON_DETERMINISTIC, cv->math);
    fill_perf(&all[2], MOCK_CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, MOCK_CUDNN_STATUS_NOT_SUPPORTED, -1.0f,
              MOCK_CUDNN_DETERMINISTIC, MOCK_CUDNN_DEFAULT_MATH);
    int n = requested < 3 ? requested : 3;
    memcpy(perf, all, (size_t)n * sizeof *perf);
    *returned = n;
    return 0;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
    const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t cv, const cudnnTensorDescriptor_t y,
    const int requested, int *returned, cudnnConvolutionFwdAlgoPerf_t *perf) {
    FAIL_POINT("cudnnGetConvolutionForwardAlgorithm_v7");
    logf_("cudnnGetConvolutionForwardAlgorithm_v7 handle=%p requested=%d h=%d", (void *)h, requested, x ? x->h : -1);
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    if (requested < 2)
        return MOCK_CUDNN_STATUS_BAD_PARAM;
    fill_perf(&perf[0], MOCK_CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, MOCK_CUDNN_STATUS_SUCCESS, -1.0f,
              MOCK_CUDNN_DETERMINISTIC, cv->math);
    fill_perf(&perf[1], MOCK_CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, MOCK_CUDNN_STATUS_SUCCESS, -1.0f,
              MOCK_CUDNN_DETERMINISTIC, cv->math);
    *returned = 2;
    return 0;
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t h, const cudnnTensorDescriptor_t x,
    const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t cv, const cudnnTensorDescriptor_t y,
    cudnnConvolutionFwdAlgo_t algo, size_t *size) {
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    *size = workspace_for(algo);
    logf_("cudnnGetConvolutionForwardWorkspaceSize algo=%d size=%zu", algo, *size);
    return 0;
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t h, const void *alpha, const cudnnTensorDescriptor_t xd,
    const void *x, const cudnnFilterDescriptor_t wd, const void *w, const cudnnConvolutionDescriptor_t cv,
    cudnnConvolutionFwdAlgo_t algo, void *ws, size_t ws_size, const void *beta, const cudnnTensorDescriptor_t yd,
    void *y) {
    FAIL_POINT("cudnnConvolutionForward");
    float a = alpha ? *(const float *)alpha : -99, b = beta ? *(const float *)beta : -99;
    logf_("cudnnConvolutionForward handle=%p alpha=%g x=%p xdata=%p w=%p wdata=%p conv=%p algo=%d ws=%p ws_size=%zu "
          "beta=%g y=%p ydata=%p stream=%p",
          (void *)h, a, (void *)xd, x, (void *)wd, w, (void *)cv, algo, ws, ws_size, b, (void *)yd, y,
          h ? h->stream : NULL);
    int st = check_problem(h, xd, wd, cv, yd);
    if (st)
        return st;
    if (!alpha || !beta || !x || !w || !y)
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "stand-in: a pointer is NULL");
    if (algo < 0 || algo >= MOCK_CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: algo %d", algo);
    if (ws_size < workspace_for(algo) || (workspace_for(algo) && !ws))
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: algo %d needs %zu workspace bytes, got %zu", algo,
                    workspace_for(algo), ws_size);
    if (cv->ctype != MOCK_CUDNN_DATA_FLOAT || xd->dtype != MOCK_CUDNN_DATA_FLOAT ||
        xd->format != MOCK_CUDNN_TENSOR_NCHW || wd->format != MOCK_CUDNN_TENSOR_NCHW)
        return fail(MOCK_CUDNN_STATUS_NOT_SUPPORTED, "stand-in: only NCHW fp32");
    /* CUDNN_CONVOLUTION flips the filter; CUDNN_CROSS_CORRELATION does not. */
    conv_host(cv, cv->mode == MOCK_CUDNN_CONVOLUTION, xd, x, wd, w, yd, y, a, b);
    return 0;
}

cudnnStatus_t cudnnScaleTensor(cudnnHandle_t h, const cudnnTensorDescriptor_t yd, void *y, const void *alpha) {
    FAIL_POINT("cudnnScaleTensor");
    float a = alpha ? *(const float *)alpha : -99;
    logf_("cudnnScaleTensor handle=%p y=%p ydata=%p alpha=%g stream=%p", (void *)h, (void *)yd, y, a, h ? h->stream : NULL);
    if (!live(h, HANDLE) || !live(yd, TENSOR) || !y || !alpha)
        return fail(MOCK_CUDNN_STATUS_BAD_PARAM, "stand-in: bad scale arguments");
    if (h->ctx != current_ctx)
        return fail(MOCK_CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER,
                    "stand-in: the handle's context is not current on this thread");
    scale_host(yd, y, a);
    return 0;
}
