/*
 * A stand-in libcuda.so.1 for the trace tests: cuInit loads the library
 * CUDA_INJECTION64_PATH names and calls its InitializeInjection, as the
 * driver does, and every driver call below fires the callback the stand-in
 * libcupti registered, at entry and exit, with a CUpti_CallbackData laid
 * out as the real one and the call's parameter struct. The calls apply the
 * H200's capture rules (configs/rules/h200-cuda.yaml) to captures on
 * non-blocking streams; handles are heap objects and work does nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../observer/mt_abi.h"

struct CUstream_st {
    int status, mode, nodes;
    pid_t owner;
    struct CUstream_st *origin; /* the capture it joined by waiting on one of its events */
};
struct CUevent_st {
    struct CUstream_st *captured_in;
    int recorded;
};
struct CUgraph_st {
    int nodes;
};
struct CUgraphExec_st {
    struct CUgraph_st *graph;
};

/* ---- CUPTI's side: what the stand-in libcupti registers ---- */

static mt_CUpti_CallbackFunc callback;
static void *callback_data;

/* Which callbacks are on, by id, as CUPTI keeps it: enabling the domain
 * turns every one on, disabling it every one off, and one can be turned
 * on or off alone. */
#define STANDIN_CBIDS 8192
static _Atomic unsigned char enabled[STANDIN_CBIDS];

/* The stand-in's callback ids and the names CUPTI gives them. */
static const struct {
    uint32_t cbid;
    const char *name;
} cbid_names[] = {
    {10, "cuStreamCreate"}, {11, "cuStreamDestroy_v2"}, {12, "cuEventCreate"}, {13, "cuEventRecord"},
    {14, "cuEventQuery"}, {15, "cuEventSynchronize"}, {16, "cuStreamQuery"}, {17, "cuStreamSynchronize"},
    {18, "cuMemAlloc_v2"}, {19, "cuMemFree_v2"}, {20, "cuMemcpyHtoD_v2"}, {21, "cuLaunchKernel"},
    {22, "cuStreamBeginCapture_v2"}, {23, "cuStreamEndCapture"}, {24, "cuThreadExchangeStreamCaptureMode"},
    {25, "cuGraphDestroy"}, {26, "cuCtxGetDevice"}, {27, "cuDeviceGetName"}, {28, "cuDeviceGetAttribute"},
    {29, "cuStreamIsCapturing"}, {30, "cuGraphGetNodes"}, {31, "cuGraphCreate"}, {32, "cuGraphAddKernelNode_v2"},
    {33, "cuGraphInstantiateWithFlags"}, {34, "cuGraphLaunch"}, {35, "cuGraphExecDestroy"},
    {36, "cuStreamWaitEvent"}, {5000, "cuCtxSynchronize_v2"},
};

__attribute__((visibility("default"))) void standin_cupti_attach(mt_CUpti_CallbackFunc fn, void *userdata) {
    callback = fn;
    callback_data = userdata;
}

__attribute__((visibility("default"))) void standin_cupti_enable(int on) {
    for (int i = 0; i < STANDIN_CBIDS; i++)
        enabled[i] = (unsigned char)on;
}

__attribute__((visibility("default"))) int standin_cupti_enable_one(uint32_t cbid, int on) {
    for (size_t i = 0; i < sizeof cbid_names / sizeof cbid_names[0]; i++)
        if (cbid_names[i].cbid == cbid) {
            enabled[cbid] = (unsigned char)on;
            return 1;
        }
    return 0;
}

__attribute__((visibility("default"))) const char *standin_cupti_name(uint32_t cbid) {
    for (size_t i = 0; i < sizeof cbid_names / sizeof cbid_names[0]; i++)
        if (cbid_names[i].cbid == cbid)
            return cbid_names[i].name;
    return NULL;
}

/* How many callbacks have fired: a test of the observer's cost outside
 * captures reads it (STANDIN_CUPTI_COUNT prints it at exit). */
static _Atomic long fired;

__attribute__((destructor)) static void print_fired(void) {
    const char *want = getenv("STANDIN_CUPTI_COUNT");
    if (want && strcmp(want, "1") == 0)
        fprintf(stderr, "standin-cupti: %ld callbacks fired\n", (long)fired);
}

/* Callbacks that still fire for calls whose callback is off: a CUPTI
 * whose narrowing takes a while (STANDIN_CUPTI_NARROW=late). */
static _Atomic int leaks;

__attribute__((visibility("default"))) void standin_cupti_leak(int n) { leaks = n; }

static void fire(unsigned site, uint32_t cbid, const char *name, const void *params, mt_CUresult *ret) {
    if (!callback || cbid >= STANDIN_CBIDS)
        return;
    if (!enabled[cbid] && (leaks <= 0 || leaks-- <= 0))
        return;
    fired++;
    uint64_t correlation = 0;
    mt_CUpti_CallbackData d = {site, name, params, ret, NULL, NULL, 1, &correlation, cbid};
    callback(callback_data, MT_CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
}

/* Each call: the entry callback, the body, the exit callback with its
 * result. */
#define CALL(cbid, name, params, body) \
    do { \
        mt_CUresult result_ = OK; \
        fire(MT_CUPTI_API_ENTER, cbid, name, &params, &result_); \
        result_ = (body); \
        fire(MT_CUPTI_API_EXIT, cbid, name, &params, &result_); \
        return result_; \
    } while (0)

/* ---- the capture rules ---- */

#define STANDIN_STREAM struct CUstream_st
#include "capture_rules.h"

static mt_CUresult locked(mt_CUresult (*fn)(void *), void *arg) {
    pthread_mutex_lock(&mu);
    mt_CUresult r = fn(arg);
    pthread_mutex_unlock(&mu);
    return r;
}

static mt_CUresult stream_check(void *arg) {
    struct CUstream_st *s = arg;
    if (s && s->status == ACTIVE) {
        s->status = INVALIDATED;
        return UNSUPPORTED;
    }
    if (s && s->status == INVALIDATED)
        return UNSUPPORTED;
    return unsafe_call() ? UNSUPPORTED : OK;
}

static mt_CUresult event_check(void *arg) {
    struct CUevent_st *e = arg;
    if (e->captured_in && e->captured_in->status == ACTIVE) {
        e->captured_in->status = INVALIDATED;
        return CAPTURED_EVENT;
    }
    return e->recorded && unsafe_call() ? UNSUPPORTED : OK;
}

static mt_CUresult unsafe(void *arg) {
    (void)arg;
    return unsafe_call() ? UNSUPPORTED : OK;
}

static mt_CUresult device_sync(void *arg) {
    (void)arg;
    return invalidate(0) ? UNSUPPORTED : OK;
}

/* Work on a stream: a node of the capture it belongs to (its own, or the
 * one it joined). */
static mt_CUresult enqueue(void *arg) {
    struct CUstream_st *s = arg;
    struct CUstream_st *capture = s && s->origin ? s->origin : s;
    if (s && s->status == ACTIVE && capture->status == ACTIVE)
        capture->nodes++;
    else if (s && (s->status == INVALIDATED || capture->status == INVALIDATED))
        return INVALIDATED_ERR;
    return OK;
}

/* Streams that joined a capture, until it ends. */
static struct CUstream_st *joined[MAX];

/* A stream that waits on an event recorded in a capture joins it, as
 * CUDA's cross-stream capture does: it captures until the capture ends. */
static mt_CUresult wait_event(void *arg) {
    mt_cuStreamWaitEvent_params *p = arg;
    struct CUstream_st *s = p->hStream, *in = p->hEvent ? p->hEvent->captured_in : NULL;
    struct CUstream_st *origin = in && in->origin ? in->origin : in;
    if (origin && origin->status == ACTIVE && s && s != origin && s->status == NONE) {
        for (int i = 0; i < MAX; i++)
            if (!joined[i]) {
                joined[i] = s;
                s->status = ACTIVE;
                s->origin = origin;
                break;
            }
    }
    return enqueue(s);
}

static void release_joined(struct CUstream_st *origin) {
    for (int i = 0; i < MAX; i++)
        if (joined[i] && joined[i]->origin == origin) {
            joined[i]->status = NONE;
            joined[i]->origin = NULL;
            joined[i] = NULL;
        }
}

/* ---- the driver API ---- */

#define EXPORT __attribute__((visibility("default")))

EXPORT mt_CUresult cuInit(unsigned int flags) {
    static int done;
    (void)flags;
    if (!done) {
        done = 1;
        const char *path = getenv("CUDA_INJECTION64_PATH");
        if (path && path[0]) {
            void *h = dlopen(path, RTLD_NOW);
            int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;
            if (init)
                init();
        }
    }
    return OK;
}

EXPORT mt_CUresult cuStreamCreate(mt_CUstream *ps, unsigned int flags) {
    struct { mt_CUstream *phStream; unsigned int Flags; } p = {ps, flags};
    CALL(10, "cuStreamCreate", p, (*ps = calloc(1, sizeof **ps), OK));
}

static mt_CUresult destroy(void *arg) {
    drop(arg);
    free(arg);
    return OK;
}

EXPORT mt_CUresult cuStreamDestroy_v2(mt_CUstream s) {
    mt_cuStreamQuery_params p = {s};
    CALL(11, "cuStreamDestroy_v2", p, locked(destroy, s));
}

EXPORT mt_CUresult cuEventCreate(mt_CUevent *pe, unsigned int flags) {
    struct { mt_CUevent *phEvent; unsigned int Flags; } p = {pe, flags};
    CALL(12, "cuEventCreate", p, (*pe = calloc(1, sizeof **pe), OK));
}

static mt_CUresult record(void *arg) {
    mt_cuEventRecord_params *p = arg;
    mt_CUresult r = enqueue(p->hStream);
    if (r == OK) {
        p->hEvent->captured_in = p->hStream && p->hStream->status == ACTIVE ? p->hStream : NULL;
        p->hEvent->recorded = 1;
    }
    return r;
}

EXPORT mt_CUresult cuEventRecord(mt_CUevent e, mt_CUstream s) {
    mt_cuEventRecord_params p = {e, s};
    CALL(13, "cuEventRecord", p, locked(record, &p));
}

EXPORT mt_CUresult cuStreamWaitEvent(mt_CUstream s, mt_CUevent e, unsigned int flags) {
    mt_cuStreamWaitEvent_params p = {s, e, flags};
    CALL(36, "cuStreamWaitEvent", p, locked(wait_event, &p));
}

EXPORT mt_CUresult cuEventQuery(mt_CUevent e) {
    mt_cuEventQuery_params p = {e};
    CALL(14, "cuEventQuery", p, locked(event_check, e));
}

EXPORT mt_CUresult cuEventSynchronize(mt_CUevent e) {
    mt_cuEventQuery_params p = {e};
    CALL(15, "cuEventSynchronize", p, locked(event_check, e));
}

EXPORT mt_CUresult cuStreamQuery(mt_CUstream s) {
    mt_cuStreamQuery_params p = {s};
    CALL(16, "cuStreamQuery", p, locked(stream_check, s));
}

EXPORT mt_CUresult cuStreamSynchronize(mt_CUstream s) {
    mt_cuStreamQuery_params p = {s};
    CALL(17, "cuStreamSynchronize", p, locked(stream_check, s));
}

/* Past the observer's callback-id cache: classified by name each time. */
EXPORT mt_CUresult cuCtxSynchronize(void) {
    struct { int unused; } p = {0};
    CALL(5000, "cuCtxSynchronize_v2", p, locked(device_sync, NULL));
}

EXPORT mt_CUresult cuMemAlloc_v2(mt_CUdeviceptr *dptr, size_t size) {
    struct { mt_CUdeviceptr *dptr; size_t bytesize; } p = {dptr, size};
    mt_CUresult r = OK;
    fire(MT_CUPTI_API_ENTER, 18, "cuMemAlloc_v2", &p, &r);
    r = locked(unsafe, NULL);
    if (r == OK)
        *dptr = (mt_CUdeviceptr)(uintptr_t)malloc(size ? size : 1);
    fire(MT_CUPTI_API_EXIT, 18, "cuMemAlloc_v2", &p, &r);
    return r;
}

EXPORT mt_CUresult cuMemFree_v2(mt_CUdeviceptr dptr) {
    struct { mt_CUdeviceptr dptr; } p = {dptr};
    mt_CUresult r = OK;
    fire(MT_CUPTI_API_ENTER, 19, "cuMemFree_v2", &p, &r);
    r = locked(unsafe, NULL);
    if (r == OK)
        free((void *)(uintptr_t)dptr);
    fire(MT_CUPTI_API_EXIT, 19, "cuMemFree_v2", &p, &r);
    return r;
}

/* Allowed while non-blocking streams capture. */
EXPORT mt_CUresult cuMemcpyHtoD_v2(mt_CUdeviceptr dst, const void *src, size_t n) {
    struct { mt_CUdeviceptr dstDevice; const void *srcHost; size_t ByteCount; } p = {dst, src, n};
    CALL(20, "cuMemcpyHtoD_v2", p, (memmove((void *)(uintptr_t)dst, src, n), OK));
}

EXPORT mt_CUresult cuLaunchKernel(mt_CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                  unsigned int by, unsigned int bz, unsigned int shared, mt_CUstream s, void **params,
                                  void **extra) {
    mt_cuLaunchKernel_params p = {f, gx, gy, gz, bx, by, bz, shared, s, params, extra};
    CALL(21, "cuLaunchKernel", p, locked(enqueue, s));
}

static mt_CUresult begin(void *arg) {
    mt_cuStreamBeginCapture_v2_params *p = arg;
    struct CUstream_st *s = p->hStream;
    if (!s || s == (void *)1)
        return UNSUPPORTED;
    if (p->mode > RELAXED)
        return INVALID_VALUE;
    if (s->status != NONE)
        return ILLEGAL_STATE;
    s->status = ACTIVE;
    s->mode = (int)p->mode;
    s->owner = me();
    s->nodes = 0;
    add(s);
    return OK;
}

EXPORT mt_CUresult cuStreamBeginCapture_v2(mt_CUstream s, mt_CUstreamCaptureMode mode) {
    mt_cuStreamBeginCapture_v2_params p = {s, mode};
    CALL(22, "cuStreamBeginCapture_v2", p, locked(begin, &p));
}

static mt_CUresult end(void *arg) {
    mt_cuStreamEndCapture_params *p = arg;
    struct CUstream_st *s = p->hStream;
    if (!s || s->status == NONE)
        return ILLEGAL_STATE;
    drop(s);
    release_joined(s);
    int status = s->status;
    s->status = NONE;
    *p->phGraph = NULL;
    if (s->mode != RELAXED && s->owner != me())
        return WRONG_THREAD; /* CUDA tears the capture down */
    if (status == INVALIDATED)
        return INVALIDATED_ERR;
    *p->phGraph = calloc(1, sizeof **p->phGraph);
    (*p->phGraph)->nodes = s->nodes;
    return OK;
}

EXPORT mt_CUresult cuStreamEndCapture(mt_CUstream s, mt_CUgraph *graph) {
    mt_cuStreamEndCapture_params p = {s, graph};
    CALL(23, "cuStreamEndCapture", p, locked(end, &p));
}

static mt_CUresult exchange(void *arg) {
    mt_CUstreamCaptureMode *mode = arg;
    if (!mode || *mode > RELAXED)
        return INVALID_VALUE;
    int old = thread_mode;
    thread_mode = (int)*mode;
    *mode = (mt_CUstreamCaptureMode)old;
    return OK;
}

EXPORT mt_CUresult cuThreadExchangeStreamCaptureMode(mt_CUstreamCaptureMode *mode) {
    mt_cuThreadExchangeStreamCaptureMode_params p = {mode};
    CALL(24, "cuThreadExchangeStreamCaptureMode", p, exchange(mode));
}

EXPORT mt_CUresult cuGraphDestroy(mt_CUgraph g) {
    struct { mt_CUgraph hGraph; } p = {g};
    CALL(25, "cuGraphDestroy", p, (free(g), OK));
}

/* What the observer asks to name a capture's device. Each fires its
 * callbacks as the driver's calls do, so that a capture would count them
 * were they not the observer's own. The stand-in is device 1, to tell its
 * ordinal from a default. */
EXPORT mt_CUresult cuCtxGetDevice(mt_CUdevice *dev) {
    struct { mt_CUdevice *device; } p = {dev};
    CALL(26, "cuCtxGetDevice", p, (*dev = 1, OK));
}

EXPORT mt_CUresult cuDeviceGetName(char *name, int len, mt_CUdevice dev) {
    struct { char *name; int len; mt_CUdevice dev; } p = {name, len, dev};
    CALL(27, "cuDeviceGetName", p, (snprintf(name, (size_t)len, "Stand-in CUDA device %d", dev), OK));
}

EXPORT mt_CUresult cuDeviceGetAttribute(int *pi, mt_CUdevice_attribute attrib, mt_CUdevice dev) {
    struct { int *pi; mt_CUdevice_attribute attrib; mt_CUdevice dev; } p = {pi, attrib, dev};
    CALL(28, "cuDeviceGetAttribute", p,
         (*pi = attrib == MT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR   ? 9
                : attrib == MT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? 0
                : attrib == MT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT     ? 132
                                                                            : 0,
          OK));
}

/* ---- graphs, built node by node or captured, instantiated, launched ---- */

EXPORT mt_CUresult cuStreamIsCapturing(mt_CUstream s, mt_CUstreamCaptureStatus *status) {
    mt_cuStreamQuery_params p = {s};
    CALL(29, "cuStreamIsCapturing", p, (*status = s ? (mt_CUstreamCaptureStatus)s->status : NONE, OK));
}

static mt_CUresult get_nodes(mt_CUgraph g, mt_CUgraphNode *nodes, size_t *n) {
    if (!g || !n)
        return INVALID_VALUE;
    if (nodes)
        for (int i = 0; i < g->nodes && (size_t)i < *n; i++)
            nodes[i] = (mt_CUgraphNode)(uintptr_t)(i + 1);
    *n = (size_t)g->nodes;
    return OK;
}

EXPORT mt_CUresult cuGraphGetNodes(mt_CUgraph g, mt_CUgraphNode *nodes, size_t *n) {
    struct { mt_CUgraph hGraph; mt_CUgraphNode *nodes; size_t *numNodes; } p = {g, nodes, n};
    CALL(30, "cuGraphGetNodes", p, get_nodes(g, nodes, n));
}

EXPORT mt_CUresult cuGraphCreate(mt_CUgraph *g, unsigned int flags) {
    struct { mt_CUgraph *phGraph; unsigned int flags; } p = {g, flags};
    CALL(31, "cuGraphCreate", p, (*g = calloc(1, sizeof **g), OK));
}

/* The kernel's parameters are not looked at: a node is counted. */
EXPORT mt_CUresult cuGraphAddKernelNode(mt_CUgraphNode *node, mt_CUgraph g, const mt_CUgraphNode *deps, size_t ndeps,
                                        const void *params) {
    struct { mt_CUgraphNode *phGraphNode; mt_CUgraph hGraph; const mt_CUgraphNode *dependencies; size_t numDependencies;
             const void *nodeParams; } p = {node, g, deps, ndeps, params};
    CALL(32, "cuGraphAddKernelNode_v2", p, (*node = (mt_CUgraphNode)(uintptr_t)++g->nodes, OK));
}

static mt_CUresult instantiate(mt_CUgraphExec *exec, mt_CUgraph g) {
    if (!g)
        return INVALID_VALUE;
    *exec = calloc(1, sizeof **exec);
    (*exec)->graph = g;
    return OK;
}

EXPORT mt_CUresult cuGraphInstantiateWithFlags(mt_CUgraphExec *exec, mt_CUgraph g, unsigned long long flags) {
    struct { mt_CUgraphExec *phGraphExec; mt_CUgraph hGraph; unsigned long long flags; } p = {exec, g, flags};
    CALL(33, "cuGraphInstantiateWithFlags", p, instantiate(exec, g));
}

EXPORT mt_CUresult cuGraphLaunch(mt_CUgraphExec exec, mt_CUstream s) {
    mt_cuGraphLaunch_params p = {exec, s};
    CALL(34, "cuGraphLaunch", p, locked(enqueue, s));
}

EXPORT mt_CUresult cuGraphExecDestroy(mt_CUgraphExec exec) {
    struct { mt_CUgraphExec hGraphExec; } p = {exec};
    CALL(35, "cuGraphExecDestroy", p, (free(exec), OK));
}
