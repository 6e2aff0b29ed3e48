/*
 * A stand-in for libcuda.so.1 for miotool's tests on machines without a
 * GPU. Built by the tests with gcc when one is present. Device memory is
 * host memory; kernels "vadd" and "inc" run on the host; host functions run
 * on a thread of their own (as the driver's callback thread does); captures
 * record kernels and host functions, and a small part of the capture rules
 * (global mode, with the guard of standin.h) is modelled. The legacy
 * stream (handle 1) is the null stream: work on it runs at once. Only the
 * versioned symbol names a correct binding uses are exported.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void (*CUhostFn)(void *);

static int g_device_count = 1;
static int g_init_result = 0;
static int g_context_token;
static int g_retains;
static long g_set_current_calls;
static unsigned long long g_next_capture_id = 1;
static __thread void *t_current;

/* Controls for the tests. */
void mock_set_device_count(int n) { g_device_count = n; }
void mock_set_init_result(int r) { g_init_result = r; }
int mock_retains(void) { return g_retains; }
long mock_set_current_calls(void) { return g_set_current_calls; }
void mock_clear_current(void) { t_current = NULL; }

#define NEED_CONTEXT() do { if (t_current != &g_context_token) return 201; } while (0)

/* Graph nodes: a kernel with its arguments copied, or a host function. */
enum { NODE_KERNEL, NODE_HOST };
struct node {
    int kind;
    int kernel; /* 1 vadd, 2 inc */
    uint64_t args[4];
    CUhostFn fn;
    void *data;
};
struct graph {
    int n;
    struct node nodes[64];
};
struct stream {
    int status, mode, listed; /* the capture fields standin.h reads */
    unsigned long long id;
    pthread_t owner;
    int flags;
    struct graph *g;
};

#include "standin.h"

CUresult cuInit(unsigned flags) { (void)flags; return g_init_result; }
CUresult cuDriverGetVersion(int *v) { *v = 12080; return 0; }
CUresult cuGetErrorName(CUresult code, const char **s) {
    switch (code) {
    case 0: *s = "CUDA_SUCCESS"; return 0;
    case 34: *s = "CUDA_ERROR_STUB_LIBRARY"; return 0;
    case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
    case 900: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return 0;
    case 901: *s = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; return 0;
    }
    *s = NULL;
    return 1;
}
CUresult cuDeviceGetCount(int *n) { *n = g_device_count; return 0; }
CUresult cuDeviceGet(int *d, int ordinal) {
    if (ordinal < 0 || ordinal >= g_device_count) return 101;
    *d = ordinal;
    return 0;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
    (void)dev;
    strncpy(name, "Mock GPU", (size_t)len);
    return 0;
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    (void)dev;
    switch (attr) {
    case 10: *v = 32; break;
    case 13: *v = 1980000; break;
    case 16: *v = 132; break;
    case 75: *v = 9; break;
    case 76: *v = 0; break;
    default: *v = 0; return 1;
    }
    return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) { (void)dev; *bytes = (size_t)150000000000ULL; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
    (void)dev;
    __atomic_add_fetch(&g_retains, 1, __ATOMIC_SEQ_CST);
    *ctx = &g_context_token;
    return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    (void)dev;
    __atomic_sub_fetch(&g_retains, 1, __ATOMIC_SEQ_CST);
    return 0;
}
CUresult cuCtxSetCurrent(void *ctx) {
    __atomic_add_fetch(&g_set_current_calls, 1, __ATOMIC_SEQ_CST);
    t_current = ctx;
    return 0;
}
CUresult cuCtxGetCurrent(void **ctx) { *ctx = t_current; return 0; }
CUresult cuCtxSynchronize(void) {
    NEED_CONTEXT();
    pthread_mutex_lock(&g_mu);
    int capturing = 0;
    for (int i = 0; i < MAX_STREAMS; i++)
        if (g_streams[i] && g_streams[i]->status != ST_NONE) { g_streams[i]->status = ST_INVALIDATED; capturing = 1; }
    pthread_mutex_unlock(&g_mu);
    return capturing ? 900 : 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    NEED_CONTEXT();
    if (n == 0) return 1;
    CUresult r = capture_guard();
    if (r) return r;
    void *m = calloc(1, n);
    if (!m) return 2;
    *p = (CUdeviceptr)(uintptr_t)m;
    return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED_CONTEXT();
    CUresult r = capture_guard();
    if (r) return r;
    free((void *)(uintptr_t)p);
    return 0;
}
/* Pinned host memory: host memory all the same, under the allocation guard. */
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    (void)flags;
    NEED_CONTEXT();
    CUresult r = capture_guard();
    if (r) return r;
    if (n == 0) return 1;
    *p = calloc(1, n);
    return *p ? 0 : 2;
}
CUresult cuMemFreeHost(void *p) {
    NEED_CONTEXT();
    CUresult r = capture_guard();
    if (r) return r;
    free(p);
    return 0;
}
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
    (void)flags;
    NEED_CONTEXT();
    CUresult r = capture_guard();
    if (r) return r;
    return p && n ? 0 : 1;
}
CUresult cuMemHostUnregister(void *p) {
    NEED_CONTEXT();
    CUresult r = capture_guard();
    if (r) return r;
    return p ? 0 : 1;
}
CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) { NEED_CONTEXT(); memset((void *)(uintptr_t)p, v, n); return 0; }
CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, struct stream *s) { (void)s; NEED_CONTEXT(); memset((void *)(uintptr_t)p, v, n); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { NEED_CONTEXT(); memcpy((void *)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { NEED_CONTEXT(); memcpy(d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, struct stream *st) { (void)st; NEED_CONTEXT(); memcpy((void *)(uintptr_t)d, s, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, struct stream *st) { (void)st; NEED_CONTEXT(); memcpy(d, (void *)(uintptr_t)s, n); return 0; }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, struct stream *st) { (void)st; NEED_CONTEXT(); memmove((void *)(uintptr_t)d, (void *)(uintptr_t)s, n); return 0; }

CUresult cuStreamCreate(struct stream **out, unsigned flags) {
    NEED_CONTEXT();
    struct stream *s = calloc(1, sizeof *s);
    s->flags = (int)flags;
    track(s);
    *out = s;
    return 0;
}
CUresult cuStreamDestroy_v2(struct stream *s) {
    NEED_CONTEXT();
    if (!s) return 400;
    untrack(s);
    free(s->g);
    free(s);
    return 0;
}
static CUresult query_stream(struct stream *s) {
    NEED_CONTEXT();
    if (s && s->status != ST_NONE) { s->status = ST_INVALIDATED; return 900; }
    return capture_guard();
}
CUresult cuStreamQuery(struct stream *s) { return query_stream(plain(s)); }
CUresult cuStreamSynchronize(struct stream *s) { return query_stream(plain(s)); }
CUresult cuStreamWaitEvent(struct stream *s, void *e, unsigned flags) { (void)s; (void)e; (void)flags; NEED_CONTEXT(); return 0; }
CUresult cuStreamIsCapturing(struct stream *s, int *status) { NEED_CONTEXT(); s = plain(s); *status = s ? s->status : ST_NONE; return 0; }
CUresult cuStreamGetCaptureInfo_v3(struct stream *s, int *status, unsigned long long *id, void *g, void *deps, void *edges, void *n) {
    (void)g; (void)deps; (void)edges; (void)n;
    NEED_CONTEXT();
    s = plain(s);
    *status = s ? s->status : ST_NONE;
    if (id) *id = s ? s->id : 0;
    return 0;
}

struct event { int recorded; };
CUresult cuEventCreate(struct event **e, unsigned flags) { (void)flags; NEED_CONTEXT(); *e = calloc(1, sizeof **e); return 0; }
CUresult cuEventRecord(struct event *e, struct stream *s) { (void)s; NEED_CONTEXT(); e->recorded = 1; return 0; }
CUresult cuEventQuery(struct event *e) { (void)e; NEED_CONTEXT(); return capture_guard(); }
CUresult cuEventSynchronize(struct event *e) { (void)e; NEED_CONTEXT(); return capture_guard(); }
CUresult cuEventElapsedTime_v2(float *ms, struct event *a, struct event *b) {
    NEED_CONTEXT();
    if (!a->recorded || !b->recorded) return 600;
    *ms = 1.5f;
    return 0;
}
CUresult cuEventDestroy_v2(struct event *e) { NEED_CONTEXT(); free(e); return 0; }

struct module { char *text; };
struct function { int kernel; };
static struct function k_vadd = {1}, k_inc = {2};

CUresult cuModuleLoadData(struct module **m, const void *image) {
    NEED_CONTEXT();
    const char *t = image;
    if (strncmp(t, "MOCKCUBIN", 9) != 0 && strncmp(t, "//MOCKPTX", 9) != 0) return 200;
    *m = calloc(1, sizeof **m);
    (*m)->text = strdup(t);
    return 0;
}
CUresult cuModuleGetFunction(struct function **f, struct module *m, const char *name) {
    NEED_CONTEXT();
    if (!strstr(m->text, name)) return 500;
    if (strcmp(name, "vadd") == 0) { *f = &k_vadd; return 0; }
    if (strcmp(name, "inc") == 0) { *f = &k_inc; return 0; }
    return 500;
}
CUresult cuModuleUnload(struct module *m) { NEED_CONTEXT(); free(m->text); free(m); return 0; }

static void *host_thread(void *arg) {
    struct node *h = arg;
    h->fn(h->data);
    return NULL;
}
/* run_host calls fn on a thread the Go runtime did not create. */
static void run_host(struct node *h) {
    pthread_t t;
    pthread_create(&t, NULL, host_thread, h);
    pthread_join(t, NULL);
}

static CUresult record(struct stream *s, struct node *n) {
    if (s->status == ST_INVALIDATED) return 901;
    if (!s->g) s->g = calloc(1, sizeof *s->g);
    if (s->g->n == 64) return 2;
    s->g->nodes[s->g->n++] = *n;
    return 0;
}

CUresult cuLaunchKernel(struct function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, struct stream *s, void **params, void **extra) {
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared; (void)extra;
    NEED_CONTEXT();
    s = plain(s);
    if (!f || !params) return 1;
    struct node k = {.kind = NODE_KERNEL, .kernel = f->kernel};
    if (f->kernel == 1) {
        for (int i = 0; i < 3; i++) k.args[i] = *(uint64_t *)params[i];
        k.args[3] = (uint64_t)(uint32_t)*(int32_t *)params[3];
    } else {
        k.args[0] = *(uint64_t *)params[0];
        k.args[1] = (uint64_t)(uint32_t)*(int32_t *)params[1];
    }
    if (s && s->status != ST_NONE) return record(s, &k);
    host_kernel(k.kernel, k.args);
    return 0;
}

CUresult cuLaunchHostFunc(struct stream *s, CUhostFn fn, void *data) {
    NEED_CONTEXT();
    s = plain(s);
    struct node h = {.kind = NODE_HOST, .fn = fn, .data = data};
    if (s && s->status != ST_NONE) return record(s, &h);
    run_host(&h);
    return 0;
}

CUresult cuStreamBeginCapture_v2(struct stream *s, int mode) {
    NEED_CONTEXT();
    s = plain(s);
    if (!s) return 900;
    if (mode < 0 || mode > 2) return 1;
    if (s->status != ST_NONE) return 401;
    pthread_mutex_lock(&g_mu);
    s->id = g_next_capture_id++;
    pthread_mutex_unlock(&g_mu);
    s->status = ST_ACTIVE;
    s->listed = 1;
    s->mode = mode;
    s->owner = pthread_self();
    free(s->g);
    s->g = calloc(1, sizeof *s->g);
    return 0;
}
CUresult cuStreamEndCapture(struct stream *s, struct graph **out) {
    NEED_CONTEXT();
    s = plain(s);
    *out = NULL;
    if (!s || s->status == ST_NONE) return 401;
    int wrong_thread = s->mode != MODE_RELAXED && !pthread_equal(s->owner, pthread_self());
    int invalid = s->status == ST_INVALIDATED;
    struct graph *g = s->g;
    s->g = NULL;
    s->status = ST_NONE;
    s->listed = 0;
    s->id = 0;
    if (wrong_thread || invalid) {
        free(g);
        return wrong_thread ? 908 : 901;
    }
    *out = g;
    return 0;
}
CUresult cuThreadExchangeStreamCaptureMode(int *mode) { return exchange_mode(mode); }
CUresult cuGraphInstantiateWithFlags(struct graph **exec, struct graph *g, unsigned long long flags) {
    (void)flags;
    NEED_CONTEXT();
    if (!g) return 1;
    *exec = malloc(sizeof **exec);
    **exec = *g;
    return 0;
}
CUresult cuGraphLaunch(struct graph *exec, struct stream *s) {
    (void)s;
    NEED_CONTEXT();
    for (int i = 0; i < exec->n; i++) {
        if (exec->nodes[i].kind == NODE_KERNEL) host_kernel(exec->nodes[i].kernel, exec->nodes[i].args);
        else run_host(&exec->nodes[i]);
    }
    return 0;
}
CUresult cuGraphExecDestroy(struct graph *exec) { NEED_CONTEXT(); free(exec); return 0; }
CUresult cuGraphDestroy(struct graph *g) { NEED_CONTEXT(); free(g); return 0; }
