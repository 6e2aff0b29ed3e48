/*
 * A stand-in for libamdhip64.so.7 for miotool's tests on machines without an
 * AMD GPU, built by the tests with gcc when one is present. It exports the
 * symbols the backend binds, with HIP's signatures, and records how it was
 * called. Device memory is host memory; the kernels vadd, inc and probe run
 * on the host (probe only records its arguments); host functions run on one
 * long-lived thread of the library's own, one at a time, as ROCr's
 * async-events thread runs them; captures record work into graphs; and a
 * part of HIP's capture rules is modelled (the 2026 runtime's, or with
 * mock_set_legacy_invalidated the older one's sticky invalidated state).
 * The legacy stream (handle 1) is the null stream.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mockhip_api.h"
MOCKHIP_RUNTIME_API(MOCKHIP_DECLARE)

/* Graph nodes. */
enum { NODE_KERNEL, NODE_HOST, NODE_MEMSET, NODE_COPY };
struct node {
    int kind;
    int kernel;
    uint64_t args[8];
    hipHostFn_t fn;
    void *data;
    void *dst;
    const void *src;
    int value;
    size_t n;
};
struct graph {
    int n;
    struct node nodes[64];
};
struct stream {
    int status, mode, listed; /* the capture fields standin.h reads */
    unsigned long long id;
    pthread_t owner;
    unsigned flags;
    struct graph *g;
    int pending; /* host functions queued and not yet returned */
};

#include "standin.h"

/* hipDeviceProp_tR0600, field for field as the HIP 6.x and 7.x headers
 * declare it, so that the compiler computes the offsets the backend uses
 * (hipapi_check.c compares them with a real 6.x header's). */
typedef struct {
    unsigned a : 1, b : 1, c : 1, d : 1, e : 1, f : 1, g : 1, h : 1, i : 1, j : 1, k : 1, l : 1, m : 1, n : 1, o : 1,
        p : 1, q : 1;
} arch_flags;
typedef struct props_r0600 {
    char name[256];
    char uuid[16];
    char luid[8];
    unsigned int luidDeviceNodeMask;
    size_t totalGlobalMem, sharedMemPerBlock;
    int regsPerBlock, warpSize;
    size_t memPitch;
    int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate;
    size_t totalConstMem;
    int major, minor;
    size_t textureAlignment, texturePitchAlignment;
    int deviceOverlap, multiProcessorCount, kernelExecTimeoutEnabled, integrated, canMapHostMemory, computeMode;
    int maxTexture1D, maxTexture1DMipmap, maxTexture1DLinear, maxTexture2D[2], maxTexture2DMipmap[2];
    int maxTexture2DLinear[3], maxTexture2DGather[2], maxTexture3D[3], maxTexture3DAlt[3], maxTextureCubemap;
    int maxTexture1DLayered[2], maxTexture2DLayered[3], maxTextureCubemapLayered[2], maxSurface1D, maxSurface2D[2];
    int maxSurface3D[3], maxSurface1DLayered[2], maxSurface2DLayered[3], maxSurfaceCubemap, maxSurfaceCubemapLayered[2];
    size_t surfaceAlignment;
    int concurrentKernels, ECCEnabled, pciBusID, pciDeviceID, pciDomainID, tccDriver, asyncEngineCount;
    int unifiedAddressing, memoryClockRate, memoryBusWidth, l2CacheSize, persistingL2CacheMaxSize;
    int maxThreadsPerMultiProcessor, streamPrioritiesSupported, globalL1CacheSupported, localL1CacheSupported;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor, managedMemory, isMultiGpuBoard, multiGpuBoardGroupID, hostNativeAtomicSupported;
    int singleToDoublePrecisionPerfRatio, pageableMemoryAccess, concurrentManagedAccess, computePreemptionSupported;
    int canUseHostPointerForRegisteredMem, cooperativeLaunch, cooperativeMultiDeviceLaunch;
    size_t sharedMemPerBlockOptin;
    int pageableMemoryAccessUsesHostPageTables, directManagedMemAccessFromHost, maxBlocksPerMultiProcessor;
    int accessPolicyMaxWindowSize;
    size_t reservedSharedMemPerBlock;
    int hostRegisterSupported, sparseHipArraySupported, hostRegisterReadOnlySupported;
    int timelineSemaphoreInteropSupported, memoryPoolsSupported, gpuDirectRDMASupported;
    unsigned int gpuDirectRDMAFlushWritesOptions;
    int gpuDirectRDMAWritesOrdering;
    unsigned int memoryPoolSupportedHandleTypes;
    int deferredMappingHipArraySupported, ipcEventSupported, clusterLaunch, unifiedFunctionPointers;
    int reserved[63];
    int hipReserved[32];
    char gcnArchName[256];
    size_t maxSharedMemoryPerMultiProcessor;
    int clockInstructionRate;
    arch_flags arch;
    unsigned int *hdpMemFlushCntl, *hdpRegFlushCntl;
    int cooperativeMultiDeviceUnmatchedFunc, cooperativeMultiDeviceUnmatchedGridDim;
    int cooperativeMultiDeviceUnmatchedBlockDim, cooperativeMultiDeviceUnmatchedSharedMem;
    int isLargeBar, asicRevision;
} props_r0600;

static int g_device_count = 1;
static int g_init_result;
static int g_runtime_version = 70151234; /* HIP_VERSION: 7.1.51234 */
static int g_require_device = -1;
static int g_legacy_invalidated;
static char g_arch_name[256] = "gfx942:sramecc+:xnack-";
static int g_arch_shift;
static long g_set_device_calls;
static int g_last_begin_mode = -1;
static unsigned long long g_last_instantiate_flags = ~0ULL;
static unsigned long long g_next_capture_id = 1;
static __thread int t_device; /* a thread starts on device 0, as in HIP */

/* One-shot failure injection: the next call of the named function returns
 * the chosen code before doing anything. */
static char g_fail_fn[64];
static int g_fail_code;

static int take_fail(const char *fn) {
    int r = 0;
    pthread_mutex_lock(&g_mu);
    if (g_fail_code && strcmp(fn, g_fail_fn) == 0) {
        r = g_fail_code;
        g_fail_code = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

#define ENTER() do { int r_ = take_fail(__func__); if (r_) return r_; } while (0)
#define NEED_DEVICE() do { if (g_require_device >= 0 && t_device != g_require_device) return 101; } while (0)

/* Controls for the tests. */
void mock_set_device_count(int n) { g_device_count = n; }
void mock_set_init_result(int r) { g_init_result = r; }
void mock_set_runtime_version(int v) { g_runtime_version = v; }
void mock_require_device(int d) { g_require_device = d; }
void mock_reset_thread_device(void) { t_device = 0; }
long mock_set_device_calls(void) { return __atomic_load_n(&g_set_device_calls, __ATOMIC_SEQ_CST); }
void mock_set_legacy_invalidated(int on) { g_legacy_invalidated = on; }
void mock_set_arch(const char *name, int shift) {
    snprintf(g_arch_name, sizeof g_arch_name, "%s", name);
    g_arch_shift = shift;
}
void mock_props_layout(size_t *arch_offset, size_t *size) {
    *arch_offset = offsetof(props_r0600, gcnArchName);
    *size = sizeof(props_r0600);
}
void mock_fail_next(const char *fn, int code) {
    pthread_mutex_lock(&g_mu);
    snprintf(g_fail_fn, sizeof g_fail_fn, "%s", fn);
    g_fail_code = code;
    pthread_mutex_unlock(&g_mu);
}
int mock_last_begin_mode(void) { return g_last_begin_mode; }
unsigned long long mock_last_instantiate_flags(void) { return g_last_instantiate_flags; }

static struct stream g_null_stream;

/* Synchronous copies and memsets (906) and hipDeviceSynchronize (900)
 * invalidate every capture in the process. */
static hipError_t invalidate_all(hipError_t code) {
    hipError_t r = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (g_streams[i] && g_streams[i]->listed) { g_streams[i]->status = ST_INVALIDATED; r = code; }
    pthread_mutex_unlock(&g_mu);
    return r;
}

static hipError_t capture_ongoing(struct stream *s) {
    s = plain(s);
    if (!s) return 0;
    pthread_mutex_lock(&g_mu);
    int st = s->status;
    if (st == ST_ACTIVE) s->status = ST_INVALIDATED;
    pthread_mutex_unlock(&g_mu);
    if (st != ST_NONE) return 900;
    return capture_guard();
}

/* The async-events thread: one per process, started by the first host
 * function, running queued functions in order. */
struct job {
    hipHostFn_t fn;
    void *data;
    struct stream *s;
    struct job *next;
};
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static struct job *q_head, *q_tail;
static pthread_once_t events_once = PTHREAD_ONCE_INIT;
static long g_events_tid;
static long g_host_calls;

static void *events_loop(void *arg) {
    (void)arg;
    __atomic_store_n(&g_events_tid, (long)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&q_mu);
    for (;;) {
        while (!q_head) pthread_cond_wait(&q_cv, &q_mu);
        struct job *j = q_head;
        q_head = j->next;
        if (!q_head) q_tail = NULL;
        pthread_mutex_unlock(&q_mu);
        j->fn(j->data);
        pthread_mutex_lock(&q_mu);
        j->s->pending--;
        g_host_calls++;
        pthread_cond_broadcast(&done_cv);
        free(j);
    }
    return NULL;
}
static void start_events(void) {
    pthread_t t;
    pthread_create(&t, NULL, events_loop, NULL);
    pthread_detach(t);
}
long mock_events_tid(void) { return __atomic_load_n(&g_events_tid, __ATOMIC_SEQ_CST); }
long mock_host_calls(void) {
    pthread_mutex_lock(&q_mu);
    long n = g_host_calls;
    pthread_mutex_unlock(&q_mu);
    return n;
}

static struct stream *or_null(struct stream *s) {
    s = plain(s);
    return s ? s : &g_null_stream;
}

static void queue_host(struct stream *s, hipHostFn_t fn, void *data) {
    pthread_once(&events_once, start_events);
    struct job *j = calloc(1, sizeof *j);
    j->fn = fn;
    j->data = data;
    j->s = or_null(s);
    pthread_mutex_lock(&q_mu);
    j->s->pending++;
    if (q_tail) q_tail->next = j; else q_head = j;
    q_tail = j;
    pthread_cond_signal(&q_cv);
    pthread_mutex_unlock(&q_mu);
}
static int pending(struct stream *s) {
    pthread_mutex_lock(&q_mu);
    int n = or_null(s)->pending;
    pthread_mutex_unlock(&q_mu);
    return n;
}
/* wait_host waits for s's host functions, or every stream's with all. */
static void wait_host(struct stream *s, int all) {
    pthread_mutex_lock(&q_mu);
    for (;;) {
        int busy = or_null(s)->pending;
        if (all) {
            busy = g_null_stream.pending;
            pthread_mutex_lock(&g_mu);
            for (int i = 0; i < MAX_STREAMS; i++)
                if (g_streams[i]) busy += g_streams[i]->pending;
            pthread_mutex_unlock(&g_mu);
        }
        if (!busy) break;
        pthread_cond_wait(&done_cv, &q_mu);
    }
    pthread_mutex_unlock(&q_mu);
}

/* Kernels. Each knows the sizes of its parameters, as a code object does. */
struct function {
    int kernel;
    const char *name;
    int nargs;
    int size[8];
};
static struct function k_vadd = {1, "vadd", 4, {8, 8, 8, 4}};
static struct function k_inc = {2, "inc", 2, {8, 4}};
static struct function k_probe = {3, "probe", 7, {8, 4, 4, 8, 8, 4, 8}};

/* The last launch as the runtime received it. */
struct launch_record {
    unsigned grid[3], block[3], shared;
    int kernel;
    uint64_t stream;
    int nargs, pad;
    uint64_t args[8];
};
static struct launch_record g_last_launch;
void mock_last_launch(struct launch_record *out) {
    pthread_mutex_lock(&g_mu);
    *out = g_last_launch;
    pthread_mutex_unlock(&g_mu);
}
size_t mock_launch_record_size(void) { return sizeof(struct launch_record); }

static void run_node(struct stream *s, const struct node *k) {
    switch (k->kind) {
    case NODE_KERNEL:
        host_kernel(k->kernel, k->args);
        break;
    case NODE_HOST:
        queue_host(s, k->fn, k->data);
        break;
    case NODE_MEMSET:
        memset(k->dst, k->value, k->n);
        break;
    case NODE_COPY:
        memmove(k->dst, k->src, k->n);
        break;
    }
}

/* enqueue applies HIP's STREAM_CAPTURE: on an active capture the work is
 * recorded, on an invalidated one refused with 901, else done. */
static hipError_t enqueue(struct stream *s, const struct node *n) {
    s = plain(s);
    if (s) {
        pthread_mutex_lock(&g_mu);
        int st = s->status;
        hipError_t r = 0;
        if (st == ST_INVALIDATED) r = 901;
        else if (st == ST_ACTIVE) {
            if (!s->g) s->g = calloc(1, sizeof *s->g);
            if (s->g->n == 64) r = 2;
            else s->g->nodes[s->g->n++] = *n;
        }
        pthread_mutex_unlock(&g_mu);
        if (st != ST_NONE) return r;
    }
    run_node(s, n);
    return 0;
}

hipError_t hipInit(unsigned flags) { (void)flags; ENTER(); return g_init_result; }
hipError_t hipRuntimeGetVersion(int *v) { ENTER(); *v = g_runtime_version; return 0; }
hipError_t hipDriverGetVersion(int *v) { ENTER(); *v = 70151234; return 0; }
const char *hipGetErrorName(hipError_t code) {
    switch (code) {
    case 0: return "hipSuccess";
    case 1: return "hipErrorInvalidValue";
    case 100: return "hipErrorNoDevice";
    case 101: return "hipErrorInvalidDevice";
    case 401: return "hipErrorIllegalState";
    case 600: return "hipErrorNotReady";
    case 900: return "hipErrorStreamCaptureUnsupported";
    case 901: return "hipErrorStreamCaptureInvalidated";
    case 906: return "hipErrorStreamCaptureImplicit";
    case 908: return "hipErrorStreamCaptureWrongThread";
    case 1052: return "hipErrorRuntimeMemory";
    }
    return "hipErrorUnknown";
}
hipError_t hipGetDeviceCount(int *n) {
    ENTER();
    *n = g_device_count;
    return g_device_count ? 0 : 100;
}
hipError_t hipSetDevice(int d) {
    ENTER();
    __atomic_add_fetch(&g_set_device_calls, 1, __ATOMIC_SEQ_CST);
    if (d < 0 || d >= g_device_count) return 101;
    t_device = d;
    return 0;
}
hipError_t hipDeviceGetName(char *name, int len, int dev) {
    ENTER();
    if (dev < 0 || dev >= g_device_count) return 101;
    snprintf(name, (size_t)len, "Mock AMD GPU %d", dev);
    return 0;
}
hipError_t hipDeviceGetAttribute(int *v, int attr, int dev) {
    ENTER();
    if (dev < 0 || dev >= g_device_count) return 101;
    switch (attr) {
    case 5: *v = 2100000; break;
    case 63: *v = 304; break;
    case 87: *v = 64; break;
    default: *v = 0; return 1;
    }
    return 0;
}
hipError_t hipDeviceTotalMem(size_t *bytes, int dev) {
    ENTER();
    if (dev < 0 || dev >= g_device_count) return 101;
    *bytes = (size_t)206158430208ULL;
    return 0;
}
hipError_t hipGetDevicePropertiesR0600(props_r0600 *p, int dev) {
    ENTER();
    if (dev < 0 || dev >= g_device_count) return 101;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "Mock AMD GPU %d", dev);
    p->totalGlobalMem = (size_t)206158430208ULL;
    p->warpSize = 64;
    p->clockRate = 2100000;
    p->multiProcessorCount = 304;
    /* A shift writes the name where a changed layout would put it. */
    char *at = p->gcnArchName + g_arch_shift;
    snprintf(at, sizeof p->gcnArchName, "%s", g_arch_name);
    p->isLargeBar = 1;
    return 0;
}
hipError_t hipDeviceSynchronize(void) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = invalidate_all(900);
    if (r) return r;
    wait_host(NULL, 1);
    return 0;
}

hipError_t hipMalloc(void **p, size_t n) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = capture_guard();
    if (r) return r;
    if (n == 0) { *p = NULL; return 0; }
    *p = calloc(1, n);
    return *p ? 0 : 2;
}
hipError_t hipFree(void *p) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = capture_guard();
    if (r) return r;
    free(p);
    return 0;
}
/* Pinned host memory: host memory all the same, under the allocation guard. */
hipError_t hipHostMalloc(void **p, size_t n, unsigned int flags) {
    (void)flags;
    ENTER();
    NEED_DEVICE();
    hipError_t r = capture_guard();
    if (r) return r;
    if (n == 0) { *p = NULL; return 0; }
    *p = calloc(1, n);
    return *p ? 0 : 2;
}
hipError_t hipHostFree(void *p) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = capture_guard();
    if (r) return r;
    free(p);
    return 0;
}
hipError_t hipHostRegister(void *p, size_t n, unsigned int flags) {
    (void)flags;
    ENTER();
    NEED_DEVICE();
    hipError_t r = capture_guard();
    if (r) return r;
    return p && n ? 0 : 1;
}
hipError_t hipHostUnregister(void *p) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = capture_guard();
    if (r) return r;
    return p ? 0 : 1;
}
hipError_t hipMemset(void *p, int v, size_t n) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = invalidate_all(906);
    if (r) return r;
    memset(p, v, n);
    return 0;
}
hipError_t hipMemsetAsync(void *p, int v, size_t n, struct stream *s) {
    ENTER();
    NEED_DEVICE();
    struct node k = {.kind = NODE_MEMSET, .dst = p, .value = v, .n = n};
    return enqueue(s, &k);
}
hipError_t hipMemcpyHtoD(void *dst, const void *src, size_t n) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = invalidate_all(906);
    if (r) return r;
    memcpy(dst, src, n);
    return 0;
}
hipError_t hipMemcpyDtoH(void *dst, hipDeviceptr_t src, size_t n) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = invalidate_all(906);
    if (r) return r;
    memcpy(dst, src, n);
    return 0;
}
static hipError_t copy_async(void *dst, const void *src, size_t n, struct stream *s) {
    struct node k = {.kind = NODE_COPY, .dst = dst, .src = src, .n = n};
    return enqueue(s, &k);
}
hipError_t hipMemcpyHtoDAsync(void *dst, const void *src, size_t n, struct stream *s) { ENTER(); NEED_DEVICE(); return copy_async(dst, src, n, s); }
hipError_t hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t n, struct stream *s) { ENTER(); NEED_DEVICE(); return copy_async(dst, src, n, s); }
hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n, struct stream *s) { ENTER(); NEED_DEVICE(); return copy_async(dst, src, n, s); }

hipError_t hipStreamCreateWithFlags(struct stream **out, unsigned flags) {
    ENTER();
    NEED_DEVICE();
    struct stream *s = calloc(1, sizeof *s);
    s->flags = flags;
    track(s);
    *out = s;
    return 0;
}
hipError_t hipStreamDestroy(struct stream *s) {
    ENTER();
    NEED_DEVICE();
    if (!s) return 400;
    wait_host(s, 0);
    untrack(s);
    free(s->g);
    free(s);
    return 0;
}
hipError_t hipStreamQuery(struct stream *s) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = capture_ongoing(s);
    if (r) return r;
    return pending(s) ? 600 : 0;
}
hipError_t hipStreamSynchronize(struct stream *s) {
    ENTER();
    NEED_DEVICE();
    hipError_t r = capture_ongoing(s);
    if (r) return r;
    wait_host(s, 0);
    return 0;
}
hipError_t hipStreamWaitEvent(struct stream *s, struct event *e, unsigned flags) {
    (void)s; (void)e; (void)flags;
    ENTER();
    NEED_DEVICE();
    return 0;
}
hipError_t hipStreamIsCapturing(struct stream *s, int *status) {
    ENTER();
    NEED_DEVICE();
    s = plain(s);
    pthread_mutex_lock(&g_mu);
    *status = s ? s->status : ST_NONE;
    pthread_mutex_unlock(&g_mu);
    return 0;
}
hipError_t hipStreamGetCaptureInfo(struct stream *s, int *status, unsigned long long *id) {
    ENTER();
    NEED_DEVICE();
    s = plain(s);
    pthread_mutex_lock(&g_mu);
    *status = s ? s->status : ST_NONE;
    if (id) *id = s ? s->id : 0;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

struct event {
    int recorded;
    struct stream *captured_on; /* recorded inside this capture */
    unsigned long long capture_id;
};
hipError_t hipEventCreateWithFlags(struct event **e, unsigned flags) {
    (void)flags;
    ENTER();
    NEED_DEVICE();
    *e = calloc(1, sizeof **e);
    return 0;
}
hipError_t hipEventRecord(struct event *e, struct stream *s) {
    ENTER();
    NEED_DEVICE();
    s = plain(s);
    if (s) {
        pthread_mutex_lock(&g_mu);
        int st = s->status;
        if (st == ST_ACTIVE) { e->captured_on = s; e->capture_id = s->id; }
        pthread_mutex_unlock(&g_mu);
        if (st == ST_INVALIDATED) return 901;
        if (st == ST_ACTIVE) return 0;
    }
    e->recorded = 1;
    e->captured_on = NULL;
    return 0;
}
/* The 2026 runtime's event rules: an event recorded inside a live capture
 * is refused with 907 and breaks it; others follow the allocation guard. */
static hipError_t event_guard(struct event *e) {
    if (e->captured_on) {
        hipError_t r = 0;
        pthread_mutex_lock(&g_mu);
        struct stream *s = e->captured_on;
        if (tracked_locked(s) && s->status == ST_ACTIVE && s->id == e->capture_id) {
            s->status = ST_INVALIDATED;
            r = 907;
        }
        pthread_mutex_unlock(&g_mu);
        if (r) return r;
    }
    if (!e->recorded) return 0;
    return capture_guard();
}
hipError_t hipEventQuery(struct event *e) { ENTER(); NEED_DEVICE(); return event_guard(e); }
hipError_t hipEventSynchronize(struct event *e) { ENTER(); NEED_DEVICE(); return event_guard(e); }
hipError_t hipEventElapsedTime(float *ms, struct event *a, struct event *b) {
    ENTER();
    NEED_DEVICE();
    if (!a->recorded || !b->recorded) return 600;
    *ms = 1.5f;
    return 0;
}
hipError_t hipEventDestroy(struct event *e) { ENTER(); NEED_DEVICE(); free(e); return 0; }

struct module { char *text; };
hipError_t hipModuleLoadData(struct module **m, const void *image) {
    ENTER();
    NEED_DEVICE();
    const char *t = image;
    if (strncmp(t, "MOCKCO ", 7) != 0) return 200;
    *m = calloc(1, sizeof **m);
    (*m)->text = strdup(t);
    return 0;
}
hipError_t hipModuleGetFunction(struct function **f, struct module *m, const char *name) {
    ENTER();
    NEED_DEVICE();
    if (!strstr(m->text, name)) return 500;
    struct function *all[] = {&k_vadd, &k_inc, &k_probe};
    for (int i = 0; i < 3; i++)
        if (strcmp(name, all[i]->name) == 0) { *f = all[i]; return 0; }
    return 500;
}
hipError_t hipModuleUnload(struct module *m) { ENTER(); NEED_DEVICE(); free(m->text); free(m); return 0; }

hipError_t hipModuleLaunchKernel(struct function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                 unsigned bz, unsigned shared, struct stream *s, void **params, void **extra) {
    ENTER();
    NEED_DEVICE();
    if (!f || !params || extra) return 1;
    struct node k = {.kind = NODE_KERNEL, .kernel = f->kernel};
    /* Read each parameter at its own size, as the kernel would. */
    for (int i = 0; i < f->nargs; i++) memcpy(&k.args[i], params[i], (size_t)f->size[i]);
    pthread_mutex_lock(&g_mu);
    g_last_launch = (struct launch_record){
        .grid = {gx, gy, gz}, .block = {bx, by, bz}, .shared = shared, .kernel = f->kernel,
        .stream = (uint64_t)(uintptr_t)s, .nargs = f->nargs};
    memcpy(g_last_launch.args, k.args, sizeof k.args);
    pthread_mutex_unlock(&g_mu);
    return enqueue(s, &k);
}

hipError_t hipLaunchHostFunc(struct stream *s, hipHostFn_t fn, void *data) {
    ENTER();
    NEED_DEVICE();
    if (!fn) return 1;
    struct node h = {.kind = NODE_HOST, .fn = fn, .data = data};
    return enqueue(s, &h);
}

hipError_t hipStreamBeginCapture(struct stream *s, int mode) {
    ENTER();
    NEED_DEVICE();
    g_last_begin_mode = mode;
    s = plain(s);
    if (!s) return 900;
    if (mode < 0 || mode > 2) return 1;
    pthread_mutex_lock(&g_mu);
    if (s->status == ST_ACTIVE) { pthread_mutex_unlock(&g_mu); return 401; }
    s->id = g_next_capture_id++;
    s->status = ST_ACTIVE;
    s->listed = 1;
    s->mode = mode;
    s->owner = pthread_self();
    free(s->g);
    s->g = calloc(1, sizeof *s->g);
    pthread_mutex_unlock(&g_mu);
    return 0;
}
hipError_t hipStreamEndCapture(struct stream *s, struct graph **out) {
    ENTER();
    NEED_DEVICE();
    *out = NULL;
    s = plain(s);
    if (!s) return 401;
    pthread_mutex_lock(&g_mu);
    hipError_t r = 0;
    if (s->status == ST_NONE) r = 401;
    /* HIP returns before any clean-up: the capture stays active. */
    else if (s->mode != MODE_RELAXED && !pthread_equal(s->owner, pthread_self())) r = 908;
    else if (s->status == ST_INVALIDATED) {
        /* Out of the lists either way; older HIP keeps the status. */
        s->listed = 0;
        free(s->g);
        s->g = NULL;
        if (!g_legacy_invalidated) { s->status = ST_NONE; s->id = 0; }
        r = 901;
    } else {
        *out = s->g;
        s->g = NULL;
        s->listed = 0;
        s->status = ST_NONE;
        s->id = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}
hipError_t hipThreadExchangeStreamCaptureMode(int *mode) {
    ENTER();
    return exchange_mode(mode);
}
hipError_t hipGraphInstantiateWithFlags(struct graph **exec, struct graph *g, unsigned long long flags) {
    ENTER();
    NEED_DEVICE();
    g_last_instantiate_flags = flags;
    if (!g) return 1;
    *exec = malloc(sizeof **exec);
    **exec = *g;
    return 0;
}
hipError_t hipGraphLaunch(struct graph *exec, struct stream *s) {
    ENTER();
    NEED_DEVICE();
    if (!exec) return 400;
    for (int i = 0; i < exec->n; i++) run_node(s, &exec->nodes[i]);
    return 0;
}
hipError_t hipGraphExecDestroy(struct graph *exec) { ENTER(); NEED_DEVICE(); free(exec); return 0; }
hipError_t hipGraphDestroy(struct graph *g) { ENTER(); NEED_DEVICE(); free(g); return 0; }
