/*
 * Stand-in for libcudnn.so.9 (and the few libcuda.so.1 calls Context
 * makes), built by the tests with gcc. It exports the cuDNN 9 symbols the
 * Go binding uses with the C signatures of cudnn_graph.h, cudnn_ops.h and
 * cudnn_cnn.h, logs every call with its argument values, and computes the
 * convolution and the scaling on host memory so that the Go side's
 * argument order can be checked by results as well as by the log.
 *
 * Beside the controls of dnnstandin.h (the log, injected failures,
 * computing on or off), mock_* let a test set the version the library
 * reports, count retained contexts, read the thread's current context and
 * read the struct layout the C compiler chose.
 */
#define STANDIN_BAD_PARAM 2000 /* CUDNN_STATUS_BAD_PARAM */
#include "../../dnnlib/dnntest/dnnstandin.h"

typedef int cudnnStatus_t;

typedef struct {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    int determinism;
    int mathType;
    int reserved[3];
} cudnnConvolutionFwdAlgoPerf_t;

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

int cuInit(unsigned flags) {
    logf_("cuInit flags=%u", flags);
    return 0;
}

int cuDeviceGet(int *dev, int ordinal) {
    if (ordinal < 0 || ordinal >= device_count)
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = 100 + ordinal;
    return 0;
}

int cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    *ctx = (void *)(uintptr_t)(0xC0000 + dev);
    __sync_fetch_and_add(&ctx_retains, 1);
    return 0;
}

int cuDevicePrimaryCtxRelease_v2(int dev) {
    (void)dev;
    __sync_fetch_and_sub(&ctx_retains, 1);
    return 0;
}

int cuCtxSetCurrent(void *ctx) {
    current_ctx = ctx;
    return 0;
}

/* ---- cudnn_graph.h ---- */

size_t cudnnGetVersion(void) { return version; }
size_t cudnnGetCudartVersion(void) { return 12080; }

const char *cudnnGetErrorString(cudnnStatus_t st) {
    switch (st) {
    case 0: return "CUDNN_STATUS_SUCCESS";
    case 1001: return "CUDNN_STATUS_NOT_INITIALIZED";
    case 2000: return "CUDNN_STATUS_BAD_PARAM";
    case 3000: return "CUDNN_STATUS_NOT_SUPPORTED";
    case 5001: return "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER";
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

int cudnnCreate(handle_t **out) {
    FAIL_POINT("cudnnCreate");
    if (current_ctx == NULL)
        return fail(1001, "stand-in: no CUDA context is current on this thread");
    handle_t *h = new_object(HANDLE, sizeof *h);
    h->ctx = current_ctx;
    *out = h;
    logf_("cudnnCreate handle=%p ctx=%p", (void *)h, h->ctx);
    return 0;
}

int cudnnDestroy(handle_t *h) { return destroy_handle(h, "cudnnDestroy"); }

int cudnnSetStream(handle_t *h, void *stream) {
    FAIL_POINT("cudnnSetStream");
    return set_stream(h, stream, "cudnnSetStream");
}

int cudnnGetStream(handle_t *h, void **stream) { return get_stream(h, stream); }

/* ---- cudnn_ops.h ---- */

int cudnnCreateTensorDescriptor(tensor_t **d) {
    return create_desc((void **)d, TENSOR, sizeof(tensor_t), "cudnnCreateTensorDescriptor");
}

int cudnnDestroyTensorDescriptor(tensor_t *d) { return destroy_desc(d, TENSOR, "cudnnDestroyTensorDescriptor"); }

int cudnnSetTensor4dDescriptor(tensor_t *d, int format, int dtype, int n, int c, int h, int w) {
    FAIL_POINT("cudnnSetTensor4dDescriptor");
    logf_("cudnnSetTensor4dDescriptor desc=%p format=%d dtype=%d n=%d c=%d h=%d w=%d", (void *)d, format, dtype, n, c, h, w);
    if (!live(d, TENSOR) || n < 1 || c < 1 || h < 1 || w < 1)
        return fail(2000, "stand-in: bad tensor");
    d->format = format, d->dtype = dtype, d->n = n, d->c = c, d->h = h, d->w = w;
    return 0;
}

int cudnnCreateFilterDescriptor(tensor_t **d) {
    return create_desc((void **)d, FILTER, sizeof(tensor_t), "cudnnCreateFilterDescriptor");
}

int cudnnDestroyFilterDescriptor(tensor_t *d) { return destroy_desc(d, FILTER, "cudnnDestroyFilterDescriptor"); }

int cudnnSetFilter4dDescriptor(tensor_t *d, int dtype, int format, int k, int c, int h, int w) {
    FAIL_POINT("cudnnSetFilter4dDescriptor");
    logf_("cudnnSetFilter4dDescriptor desc=%p dtype=%d format=%d k=%d c=%d h=%d w=%d", (void *)d, dtype, format, k, c, h, w);
    if (!live(d, FILTER) || k < 1 || c < 1 || h < 1 || w < 1)
        return fail(2000, "stand-in: bad filter");
    d->format = format, d->dtype = dtype, d->n = k, d->c = c, d->h = h, d->w = w;
    return 0;
}

/* ---- cudnn_cnn.h ---- */

int cudnnCreateConvolutionDescriptor(conv_t **d) {
    return create_desc((void **)d, CONV, sizeof(conv_t), "cudnnCreateConvolutionDescriptor");
}

int cudnnDestroyConvolutionDescriptor(conv_t *d) { return destroy_desc(d, CONV, "cudnnDestroyConvolutionDescriptor"); }

int cudnnSetConvolution2dDescriptor(conv_t *d, int pad_h, int pad_w, int u, int v, int dil_h, int dil_w, int mode, int ctype) {
    FAIL_POINT("cudnnSetConvolution2dDescriptor");
    logf_("cudnnSetConvolution2dDescriptor desc=%p pad=%dx%d stride=%dx%d dilation=%dx%d mode=%d compute=%d",
          (void *)d, pad_h, pad_w, u, v, dil_h, dil_w, mode, ctype);
    if (!live(d, CONV) || pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dil_h < 1 || dil_w < 1)
        return fail(2000, "stand-in: bad convolution");
    d->pad_h = pad_h, d->pad_w = pad_w, d->u = u, d->v = v, d->dil_h = dil_h, d->dil_w = dil_w;
    d->mode = mode, d->ctype = ctype;
    return 0;
}

int cudnnSetConvolutionMathType(conv_t *d, int math) {
    logf_("cudnnSetConvolutionMathType desc=%p math=%d", (void *)d, math);
    if (!live(d, CONV) || math < 0 || math > 3)
        return 2000;
    d->math = math;
    return 0;
}

int cudnnGetConvolution2dForwardOutputDim(const conv_t *cv, const tensor_t *x, const tensor_t *w, int *n, int *c, int *h, int *wd) {
    return output_dim(cv, x, w, FILTER, n, c, h, wd);
}

/* check_problem validates the four descriptors of a forward convolution. */
static int check_problem(const handle_t *h, const tensor_t *x, const tensor_t *w, const conv_t *cv, const tensor_t *y) {
    if (!live(h, HANDLE))
        return fail(2000, "stand-in: bad handle");
    if (!live(x, TENSOR) || !live(w, FILTER) || !live(cv, CONV) || !live(y, TENSOR))
        return fail(2000, "stand-in: a descriptor is not alive or of the wrong kind");
    if (x->c != w->c)
        return fail(2000, "stand-in: x has %d channels, w %d", x->c, w->c);
    int d[4];
    out_dims(cv, x, w, d);
    if (y->n != d[0] || y->c != d[1] || y->h != d[2] || y->w != d[3])
        return fail(2000, "stand-in: y is %dx%dx%dx%d, want %dx%dx%dx%d", y->n, y->c, y->h, y->w, d[0], d[1], d[2], d[3]);
    if (h->ctx != current_ctx)
        return fail(5001, "stand-in: the handle's context is not current on this thread");
    return 0;
}

int cudnnGetConvolutionForwardAlgorithmMaxCount(handle_t *h, int *count) {
    (void)h;
    *count = 8;
    return 0;
}

/* workspace_for is the stand-in's workspace need per algorithm. */
static size_t workspace_for(int algo) { return algo == 1 ? 4096 : 0; }

static void fill_perf(cudnnConvolutionFwdAlgoPerf_t *p, int algo, int status, float time, int det, int math) {
    p->algo = algo;
    p->status = status;
    p->time = time;
    p->memory = workspace_for(algo);
    p->determinism = det;
    p->mathType = math;
    p->reserved[0] = p->reserved[1] = p->reserved[2] = -7;
}

int cudnnFindConvolutionForwardAlgorithm(handle_t *h, const tensor_t *x, const tensor_t *w, const conv_t *cv,
                                         const tensor_t *y, const int requested, int *returned,
                                         cudnnConvolutionFwdAlgoPerf_t *perf) {
    FAIL_POINT("cudnnFindConvolutionForwardAlgorithm");
    logf_("cudnnFindConvolutionForwardAlgorithm handle=%p x=%p w=%p conv=%p y=%p requested=%d stream=%p",
          (void *)h, (void *)x, (void *)w, (void *)cv, (void *)y, requested, h ? h->stream : NULL);
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    cudnnConvolutionFwdAlgoPerf_t all[3];
    fill_perf(&all[0], 1, 0, 0.25f, 1, cv->math);
    fill_perf(&all[1], 0, 0, 0.5f, 0, cv->math);
    fill_perf(&all[2], 6, 3000, -1.0f, 1, 0);
    int n = requested < 3 ? requested : 3;
    memcpy(perf, all, (size_t)n * sizeof *perf);
    *returned = n;
    return 0;
}

int cudnnGetConvolutionForwardAlgorithm_v7(handle_t *h, const tensor_t *x, const tensor_t *w, const conv_t *cv,
                                           const tensor_t *y, const int requested, int *returned,
                                           cudnnConvolutionFwdAlgoPerf_t *perf) {
    FAIL_POINT("cudnnGetConvolutionForwardAlgorithm_v7");
    logf_("cudnnGetConvolutionForwardAlgorithm_v7 handle=%p requested=%d h=%d", (void *)h, requested, x ? x->h : -1);
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    if (requested < 2)
        return 2000;
    fill_perf(&perf[0], 0, 0, -1.0f, 1, cv->math);
    fill_perf(&perf[1], 1, 0, -1.0f, 1, cv->math);
    *returned = 2;
    return 0;
}

int cudnnGetConvolutionForwardWorkspaceSize(handle_t *h, const tensor_t *x, const tensor_t *w, const conv_t *cv,
                                            const tensor_t *y, int algo, size_t *size) {
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    *size = workspace_for(algo);
    logf_("cudnnGetConvolutionForwardWorkspaceSize algo=%d size=%zu", algo, *size);
    return 0;
}

int cudnnConvolutionForward(handle_t *h, const void *alpha, const tensor_t *xd, const void *x, const tensor_t *wd,
                            const void *w, const conv_t *cv, int algo, void *ws, size_t ws_size, const void *beta,
                            const tensor_t *yd, void *y) {
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
        return fail(2002, "stand-in: a pointer is NULL");
    if (algo < 0 || algo > 7)
        return fail(2000, "stand-in: algo %d", algo);
    if (ws_size < workspace_for(algo) || (workspace_for(algo) && !ws))
        return fail(2000, "stand-in: algo %d needs %zu workspace bytes, got %zu", algo, workspace_for(algo), ws_size);
    if (cv->ctype != 0 || xd->dtype != 0 || xd->format != 0 || wd->format != 0)
        return fail(3000, "stand-in: only NCHW fp32");
    conv_host(cv, cv->mode == 0 /* CUDNN_CONVOLUTION flips the filter */, xd, x, wd, w, yd, y, a, b);
    return 0;
}

int cudnnScaleTensor(handle_t *h, const tensor_t *yd, void *y, const void *alpha) {
    FAIL_POINT("cudnnScaleTensor");
    float a = alpha ? *(const float *)alpha : -99;
    logf_("cudnnScaleTensor handle=%p y=%p ydata=%p alpha=%g stream=%p", (void *)h, (void *)yd, y, a, h ? h->stream : NULL);
    if (!live(h, HANDLE) || !live(yd, TENSOR) || !y || !alpha)
        return fail(2000, "stand-in: bad scale arguments");
    if (h->ctx != current_ctx)
        return fail(5001, "stand-in: the handle's context is not current on this thread");
    scale_host(yd, y, a);
    return 0;
}
