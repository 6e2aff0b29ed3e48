/*
 * Stand-in for libMIOpen.so.1 (and hipSetDevice from libamdhip64), built
 * by the tests with gcc. It exports the MIOpen symbols the Go binding uses
 * with the C signatures of miopen.h (mockmiopen_api.h lists them, and
 * miopen_check.cpp holds the lists to the real header), logs every call
 * with its arguments, computes convolutions and scaling on host memory,
 * and writes its perf and solution structs with the layout the C compiler
 * gives them, so that the Go side's argument order and struct decoding
 * are checked.
 *
 * At load it records the MIOpen variables of the environment, so a test
 * can tell whether the binding set them before the library initialised.
 */
#include "mockmiopen_api.h"

/* The enumerators of miopen.h (and hip_runtime_api.h) the stand-in uses. */
#define MOCK_NUMBER(name, value) MOCK_##name = value,
enum { MOCKMIOPEN_NUMBERS(MOCK_NUMBER) };

#define STANDIN_BAD_PARAM MOCK_miopenStatusBadParm
#include "../../dnnlib/dnntest/dnnstandin.h"

/* miopen.h's types as the stand-in spells them: enums as int (their C
 * ABI), handles and descriptors as pointers to dnnstandin.h's objects. */
typedef int miopenStatus_t;
typedef int miopenDataType_t;
typedef int miopenConvolutionMode_t;
typedef int miopenConvFwdAlgorithm_t;
typedef int hipError_t;
typedef void *miopenAcceleratorQueue_t;
typedef handle_t *miopenHandle_t;
typedef tensor_t *miopenTensorDescriptor_t;
typedef conv_t *miopenConvolutionDescriptor_t;
typedef mockmiopen_conv_algo_perf miopenConvAlgoPerf_t;
typedef mockmiopen_conv_solution miopenConvSolution_t;

#define MOCK_DECLARE(ret, name, params) ret name params;
MOCKMIOPEN_API(MOCK_DECLARE)
MOCKMIOPEN_HIP_API(MOCK_DECLARE)

static __thread int thread_device;
static char env_at_load[1024];

__attribute__((constructor)) static void record_env(void) {
    const char *db = getenv("MIOPEN_USER_DB_PATH");
    const char *off = getenv("MIOPEN_DEBUG_DISABLE_FIND_DB");
    snprintf(env_at_load, sizeof env_at_load, "MIOPEN_USER_DB_PATH=%s MIOPEN_DEBUG_DISABLE_FIND_DB=%s",
             db ? db : "(unset)", off ? off : "(unset)");
}

/* ---- controls beyond dnnstandin.h's ---- */

const char *mock_env_at_load(void) { return env_at_load; }
int mock_thread_device(void) { return thread_device; }

void mock_layout(int *out) {
    out[0] = (int)sizeof(miopenConvAlgoPerf_t);
    out[1] = (int)offsetof(miopenConvAlgoPerf_t, time);
    out[2] = (int)offsetof(miopenConvAlgoPerf_t, memory);
    out[3] = (int)sizeof(miopenConvSolution_t);
    out[4] = (int)offsetof(miopenConvSolution_t, workspace_size);
    out[5] = (int)offsetof(miopenConvSolution_t, solution_id);
    out[6] = (int)offsetof(miopenConvSolution_t, algorithm);
}

/* ---- the HIP call DeviceSelector makes ---- */

hipError_t hipSetDevice(int ordinal) {
    if (ordinal < 0 || ordinal >= 2)
        return MOCK_hipErrorInvalidDevice;
    thread_device = ordinal;
    return 0;
}

/* ---- miopen.h ----
 * MIOpen describes filters with tensor descriptors: the FILTER kind of
 * dnnstandin.h is not used here. */

miopenStatus_t miopenGetVersion(size_t *major, size_t *minor, size_t *patch) {
    *major = 3, *minor = 5, *patch = 1;
    return 0;
}

const char *miopenGetErrorString(miopenStatus_t st) {
    switch (st) {
    case MOCK_miopenStatusSuccess: return "miopenStatusSuccess";
    case MOCK_miopenStatusBadParm: return "miopenStatusBadParm";
    case MOCK_miopenStatusInternalError: return "stand-in: the kernel failed to launch";
    case MOCK_miopenStatusUnknownError: return "miopenStatusUnknownError";
    }
    return "miopenStatusUnknown";
}

miopenStatus_t miopenCreateWithStream(miopenHandle_t *out, miopenAcceleratorQueue_t stream) {
    FAIL_POINT("miopenCreateWithStream");
    handle_t *h = new_object(HANDLE, sizeof *h);
    h->stream = stream;
    h->device = thread_device;
    *out = h;
    logf_("miopenCreateWithStream handle=%p stream=%p device=%d", (void *)h, stream, h->device);
    return 0;
}

miopenStatus_t miopenSetStream(miopenHandle_t h, miopenAcceleratorQueue_t stream) {
    return set_stream(h, stream, "miopenSetStream");
}

miopenStatus_t miopenGetStream(miopenHandle_t h, miopenAcceleratorQueue_t *stream) { return get_stream(h, stream); }

miopenStatus_t miopenDestroy(miopenHandle_t h) { return destroy_handle(h, "miopenDestroy"); }

miopenStatus_t miopenCreateTensorDescriptor(miopenTensorDescriptor_t *d) {
    return create_desc((void **)d, TENSOR, sizeof(tensor_t), "miopenCreateTensorDescriptor");
}

miopenStatus_t miopenDestroyTensorDescriptor(miopenTensorDescriptor_t d) {
    return destroy_desc(d, TENSOR, "miopenDestroyTensorDescriptor");
}

miopenStatus_t miopenSet4dTensorDescriptor(miopenTensorDescriptor_t d, miopenDataType_t dtype, int n, int c, int h,
    int w) {
    FAIL_POINT("miopenSet4dTensorDescriptor");
    logf_("miopenSet4dTensorDescriptor desc=%p dtype=%d n=%d c=%d h=%d w=%d", (void *)d, dtype, n, c, h, w);
    if (!live(d, TENSOR) || n < 1 || c < 1 || h < 1 || w < 1)
        return MOCK_miopenStatusBadParm;
    d->dtype = dtype, d->n = n, d->c = c, d->h = h, d->w = w;
    return 0;
}

miopenStatus_t miopenCreateConvolutionDescriptor(miopenConvolutionDescriptor_t *d) {
    return create_desc((void **)d, CONV, sizeof(conv_t), "miopenCreateConvolutionDescriptor");
}

miopenStatus_t miopenDestroyConvolutionDescriptor(miopenConvolutionDescriptor_t d) {
    return destroy_desc(d, CONV, "miopenDestroyConvolutionDescriptor");
}

miopenStatus_t miopenInitConvolutionDescriptor(miopenConvolutionDescriptor_t d, miopenConvolutionMode_t mode, int pad_h,
    int pad_w, int u, int v, int dil_h, int dil_w) {
    FAIL_POINT("miopenInitConvolutionDescriptor");
    logf_("miopenInitConvolutionDescriptor desc=%p mode=%d pad=%dx%d stride=%dx%d dilation=%dx%d", (void *)d, mode, pad_h,
          pad_w, u, v, dil_h, dil_w);
    if (!live(d, CONV) || pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dil_h < 1 || dil_w < 1)
        return MOCK_miopenStatusBadParm;
    d->mode = mode, d->pad_h = pad_h, d->pad_w = pad_w, d->u = u, d->v = v, d->dil_h = dil_h, d->dil_w = dil_w;
    return 0;
}

miopenStatus_t miopenGetConvolutionForwardOutputDim(miopenConvolutionDescriptor_t cv, const miopenTensorDescriptor_t x,
    const miopenTensorDescriptor_t w, int *n, int *c, int *h, int *wd) {
    return output_dim(cv, x, w, TENSOR, n, c, h, wd);
}

/* check_problem validates a forward problem; it returns BadParm, or
 * UnknownError when called from a thread with another device selected. */
static int check_problem(const handle_t *h, const tensor_t *x, const tensor_t *w, const conv_t *cv, const tensor_t *y) {
    if (!live(h, HANDLE) || !live(x, TENSOR) || !live(w, TENSOR) || !live(cv, CONV) || !live(y, TENSOR))
        return MOCK_miopenStatusBadParm;
    if (x->c != w->c)
        return MOCK_miopenStatusBadParm;
    int d[4];
    out_dims(cv, x, w, d);
    if (y->n != d[0] || y->c != d[1] || y->h != d[2] || y->w != d[3]) {
        logf_("stand-in: y is %dx%dx%dx%d, want %dx%dx%dx%d", y->n, y->c, y->h, y->w, d[0], d[1], d[2], d[3]);
        return MOCK_miopenStatusBadParm;
    }
    if (h->device != thread_device) {
        logf_("stand-in: handle on device %d used from a thread on device %d", h->device, thread_device);
        return MOCK_miopenStatusUnknownError;
    }
    return 0;
}

/* The stand-in's algorithms: Direct needs no workspace, GEMM 2048 bytes. */
static size_t workspace_for(int algo) { return algo == MOCK_miopenConvolutionFwdAlgoGEMM ? 2048 : 0; }

miopenStatus_t miopenConvolutionForwardGetWorkSpaceSize(miopenHandle_t h, const miopenTensorDescriptor_t w,
    const miopenTensorDescriptor_t x, const miopenConvolutionDescriptor_t cv, const miopenTensorDescriptor_t y,
    size_t *size) {
    logf_("miopenConvolutionForwardGetWorkSpaceSize w=%p x=%p conv=%p y=%p", (void *)w, (void *)x, (void *)cv, (void *)y);
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    *size = 2048;
    return 0;
}

/* compute_ok: the stand-in computes miopenConvolution (which does not flip
 * the filter) on fp32 (miopenFloat) only. */
static int compute_ok(const conv_t *cv, const tensor_t *x) {
    return cv->mode == MOCK_miopenConvolution && x->dtype == MOCK_miopenFloat;
}

miopenStatus_t miopenFindConvolutionForwardAlgorithm(miopenHandle_t h, const miopenTensorDescriptor_t xd, const void *x,
    const miopenTensorDescriptor_t wd, const void *w, const miopenConvolutionDescriptor_t cv,
    const miopenTensorDescriptor_t yd, void *y, const int requested, int *returned, miopenConvAlgoPerf_t *perf,
    void *ws, size_t ws_size, bool exhaustive) {
    FAIL_POINT("miopenFindConvolutionForwardAlgorithm");
    logf_("miopenFindConvolutionForwardAlgorithm handle=%p x=%p xdata=%p w=%p wdata=%p conv=%p y=%p ydata=%p "
          "requested=%d ws=%p ws_size=%zu exhaustive=%d stream=%p",
          (void *)h, (void *)xd, x, (void *)wd, w, (void *)cv, (void *)yd, y, requested, ws, ws_size, (int)exhaustive,
          h ? h->stream : NULL);
    int st = check_problem(h, xd, wd, cv, yd);
    if (st)
        return st;
    if (!x || !w || !y || requested < 1 || !compute_ok(cv, xd))
        return MOCK_miopenStatusBadParm;
    miopenConvAlgoPerf_t all[2];
    memset(all, 0x5a, sizeof all); /* padding bytes the Go side must not read as data */
    all[0].fwd_algo = MOCK_miopenConvolutionFwdAlgoDirect, all[0].time = 0.125f, all[0].memory = 0;
    all[1].fwd_algo = MOCK_miopenConvolutionFwdAlgoGEMM, all[1].time = 0.5f;
    all[1].memory = workspace_for(MOCK_miopenConvolutionFwdAlgoGEMM);
    int n = ws_size >= all[1].memory ? 2 : 1;
    if (n > requested)
        n = requested;
    memcpy(perf, all, (size_t)n * sizeof *perf);
    *returned = n;
    conv_host(cv, 0, xd, x, wd, w, yd, y, 1, 0);
    const char *dir = getenv("MIOPEN_USER_DB_PATH");
    const char *off = getenv("MIOPEN_DEBUG_DISABLE_FIND_DB");
    if (dir && !(off && strcmp(off, "1") == 0)) {
        char path[1024];
        snprintf(path, sizeof path, "%s/stand-in.ufdb.txt", dir);
        FILE *f = fopen(path, "a");
        if (f) {
            fprintf(f, "%d-%d-%d-%dx%d=miopenConvolutionFwdAlgoDirect:StandIn,0.125,0\n", xd->c, xd->h, xd->w, wd->h, wd->w);
            fclose(f);
        }
    }
    return 0;
}

miopenStatus_t miopenConvolutionForward(miopenHandle_t h, const void *alpha, const miopenTensorDescriptor_t xd,
    const void *x, const miopenTensorDescriptor_t wd, const void *w, const miopenConvolutionDescriptor_t cv,
    miopenConvFwdAlgorithm_t algo, const void *beta, const miopenTensorDescriptor_t yd, void *y, void *ws,
    size_t ws_size) {
    FAIL_POINT("miopenConvolutionForward");
    float a = alpha ? *(const float *)alpha : -99, b = beta ? *(const float *)beta : -99;
    logf_("miopenConvolutionForward handle=%p alpha=%g x=%p xdata=%p w=%p wdata=%p conv=%p algo=%d beta=%g y=%p ydata=%p "
          "ws=%p ws_size=%zu stream=%p",
          (void *)h, a, (void *)xd, x, (void *)wd, w, (void *)cv, algo, b, (void *)yd, y, ws, ws_size,
          h ? h->stream : NULL);
    int st = check_problem(h, xd, wd, cv, yd);
    if (st)
        return st;
    int known = algo == MOCK_miopenConvolutionFwdAlgoGEMM || algo == MOCK_miopenConvolutionFwdAlgoDirect;
    if (!alpha || !beta || !x || !w || !y || !known || !compute_ok(cv, xd))
        return MOCK_miopenStatusBadParm;
    if (ws_size < workspace_for(algo) || (workspace_for(algo) && !ws))
        return MOCK_miopenStatusBadParm;
    conv_host(cv, 0, xd, x, wd, w, yd, y, a, b);
    return 0;
}

static const miopenConvSolution_t solutions[2] = {
    {10.0f, 0, 85, MOCK_miopenConvolutionAlgoDirect},  /* synthetic TunaNet time of rank 1 */
    {20.0f, 2048, 91, MOCK_miopenConvolutionAlgoGEMM}, /* rank 2 */
};

static const miopenConvSolution_t *solution_by_id(uint64_t id) {
    for (int i = 0; i < 2; i++)
        if (solutions[i].solution_id == id)
            return &solutions[i];
    return NULL;
}

miopenStatus_t miopenConvolutionForwardGetSolutionCount(miopenHandle_t h, const miopenTensorDescriptor_t w,
    const miopenTensorDescriptor_t x, const miopenConvolutionDescriptor_t cv, const miopenTensorDescriptor_t y,
    size_t *count) {
    FAIL_POINT("miopenConvolutionForwardGetSolutionCount");
    logf_("miopenConvolutionForwardGetSolutionCount w=%p x=%p conv=%p y=%p", (void *)w, (void *)x, (void *)cv, (void *)y);
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    *count = 2;
    return 0;
}

miopenStatus_t miopenConvolutionForwardGetSolution(miopenHandle_t h, const miopenTensorDescriptor_t w,
    const miopenTensorDescriptor_t x, const miopenConvolutionDescriptor_t cv, const miopenTensorDescriptor_t y,
    const size_t max, size_t *count, miopenConvSolution_t *out) {
    FAIL_POINT("miopenConvolutionForwardGetSolution");
    logf_("miopenConvolutionForwardGetSolution w=%p x=%p conv=%p y=%p max=%zu h=%d", (void *)w, (void *)x, (void *)cv,
          (void *)y, max, x ? x->h : -1);
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    size_t n = max < 2 ? max : 2;
    memset(out, 0x5a, n * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        out[i].time = solutions[i].time;
        out[i].workspace_size = solutions[i].workspace_size;
        out[i].solution_id = solutions[i].solution_id;
        out[i].algorithm = solutions[i].algorithm;
    }
    *count = n;
    return 0;
}

miopenStatus_t miopenConvolutionForwardGetSolutionWorkspaceSize(miopenHandle_t h, const miopenTensorDescriptor_t w,
    const miopenTensorDescriptor_t x, const miopenConvolutionDescriptor_t cv, const miopenTensorDescriptor_t y,
    const uint64_t id, size_t *size) {
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    const miopenConvSolution_t *s = solution_by_id(id);
    if (!s)
        return MOCK_miopenStatusBadParm;
    *size = s->workspace_size;
    logf_("miopenConvolutionForwardGetSolutionWorkspaceSize id=%llu size=%zu", (unsigned long long)id, *size);
    return 0;
}

miopenStatus_t miopenConvolutionForwardCompileSolution(miopenHandle_t h, const miopenTensorDescriptor_t w,
    const miopenTensorDescriptor_t x, const miopenConvolutionDescriptor_t cv, const miopenTensorDescriptor_t y,
    const uint64_t id) {
    logf_("miopenConvolutionForwardCompileSolution id=%llu", (unsigned long long)id);
    int st = check_problem(h, x, w, cv, y);
    if (st)
        return st;
    return solution_by_id(id) ? MOCK_miopenStatusSuccess : MOCK_miopenStatusBadParm;
}

miopenStatus_t miopenConvolutionForwardImmediate(miopenHandle_t h, const miopenTensorDescriptor_t wd, const void *w,
    const miopenTensorDescriptor_t xd, const void *x, const miopenConvolutionDescriptor_t cv,
    const miopenTensorDescriptor_t yd, void *y, void *ws, size_t ws_size, const uint64_t id) {
    FAIL_POINT("miopenConvolutionForwardImmediate");
    logf_("miopenConvolutionForwardImmediate handle=%p w=%p wdata=%p x=%p xdata=%p conv=%p y=%p ydata=%p ws=%p "
          "ws_size=%zu id=%llu stream=%p",
          (void *)h, (void *)wd, w, (void *)xd, x, (void *)cv, (void *)yd, y, ws, ws_size, (unsigned long long)id,
          h ? h->stream : NULL);
    int st = check_problem(h, xd, wd, cv, yd);
    if (st)
        return st;
    const miopenConvSolution_t *s = solution_by_id(id);
    if (!s || !x || !w || !y || ws_size < s->workspace_size || !compute_ok(cv, xd))
        return MOCK_miopenStatusBadParm;
    conv_host(cv, 0, xd, x, wd, w, yd, y, 1, 0);
    return 0;
}

miopenStatus_t miopenScaleTensor(miopenHandle_t h, const miopenTensorDescriptor_t yd, void *y, const void *alpha) {
    FAIL_POINT("miopenScaleTensor");
    float a = alpha ? *(const float *)alpha : -99;
    logf_("miopenScaleTensor handle=%p y=%p ydata=%p alpha=%g stream=%p", (void *)h, (void *)yd, y, a,
          h ? h->stream : NULL);
    if (!live(h, HANDLE) || !live(yd, TENSOR) || !y || !alpha)
        return MOCK_miopenStatusBadParm;
    scale_host(yd, y, a);
    return 0;
}
