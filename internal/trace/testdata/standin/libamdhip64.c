/*
 * A stand-in libamdhip64.so for the trace tests: no device, but HIP's
 * capture rules as the 2026 runtime applies them (the HIP rules table,
 * configs/rules/hip.yaml): a capture on a stream records its work; a call
 * the rules refuse returns HIP's code and invalidates the captures the
 * runtime would invalidate; an invalidated capture's launches return 901
 * and its end returns 901. Handles are heap objects; work does nothing.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../observer/mt_abi.h"

#define OWN(t) mt_##t
#define DECLARE(ret, name, params) ret name params;
MT_HIP_API(DECLARE, OWN)
mt_hipError_t hipStreamCreate(mt_hipStream_t *stream);
mt_hipError_t hipEventCreate(mt_hipEvent_t *event);
mt_hipError_t hipEventDestroy(mt_hipEvent_t event);
mt_hipError_t hipGraphDestroy(mt_hipGraph_t graph);

struct ihipStream_t {
    int status, mode, nodes;
    pid_t owner;
    struct ihipStream_t *origin; /* the capture it joined by waiting on one of its events */
};
struct ihipEvent_t {
    struct ihipStream_t *captured_in; /* recorded inside that capture */
    int recorded;
};
struct ihipGraph {
    int nodes;
};
struct hipGraphExec {
    struct ihipGraph *graph;
};
mt_hipError_t hipGraphCreate(mt_hipGraph_t *graph, unsigned int flags);
mt_hipError_t hipGraphAddKernelNode(mt_hipGraphNode_t *node, mt_hipGraph_t graph, const mt_hipGraphNode_t *deps,
                                    size_t ndeps, const void *params);
mt_hipError_t hipGraphGetNodes(mt_hipGraph_t graph, mt_hipGraphNode_t *nodes, size_t *n);
mt_hipError_t hipGraphExecDestroy(mt_hipGraphExec_t exec);

#define STANDIN_STREAM struct ihipStream_t
#include "capture_rules.h"

static mt_hipError_t stream_check(struct ihipStream_t *s) {
    if (!s)
        return OK; /* the null stream has no capture check */
    pthread_mutex_lock(&mu);
    mt_hipError_t r = OK;
    if (s->status == ACTIVE) {
        s->status = INVALIDATED;
        r = UNSUPPORTED;
    } else if (s->status == INVALIDATED) {
        r = UNSUPPORTED;
    } else if (unsafe_call()) {
        r = UNSUPPORTED;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

/* An enqueue: captured into an active capture (the stream's own, or the
 * one it joined), refused on an invalidated one. */
static mt_hipError_t enqueue(struct ihipStream_t *s) {
    if (!s)
        return OK;
    pthread_mutex_lock(&mu);
    mt_hipError_t r = OK;
    struct ihipStream_t *capture = s->origin ? s->origin : s;
    if (s->status == ACTIVE && capture->status == ACTIVE)
        capture->nodes++;
    else if (s->status == INVALIDATED || capture->status == INVALIDATED)
        r = INVALIDATED_ERR;
    pthread_mutex_unlock(&mu);
    return r;
}

/* Streams that joined a capture, until it ends. */
static struct ihipStream_t *joined[MAX];

static void release_joined(struct ihipStream_t *origin) {
    for (int i = 0; i < MAX; i++)
        if (joined[i] && joined[i]->origin == origin) {
            joined[i]->status = NONE;
            joined[i]->origin = NULL;
            joined[i] = NULL;
        }
}

static int any_capture(void) {
    for (int i = 0; i < MAX; i++)
        if (capturing[i] && capturing[i]->status == ACTIVE)
            return 1;
    return 0;
}

mt_hipError_t hipStreamCreate(mt_hipStream_t *stream) {
    *stream = calloc(1, sizeof **stream);
    return OK;
}

mt_hipError_t hipStreamDestroy(mt_hipStream_t stream) {
    pthread_mutex_lock(&mu);
    drop(stream);
    pthread_mutex_unlock(&mu);
    free(stream);
    return OK;
}

mt_hipError_t hipEventCreate(mt_hipEvent_t *event) {
    *event = calloc(1, sizeof **event);
    return OK;
}

mt_hipError_t hipEventDestroy(mt_hipEvent_t event) {
    free(event);
    return OK;
}

mt_hipError_t hipGraphDestroy(mt_hipGraph_t graph) {
    free(graph);
    return OK;
}

mt_hipError_t hipStreamBeginCapture(mt_hipStream_t s, mt_hipStreamCaptureMode mode) {
    if (!s)
        return UNSUPPORTED;
    if (mode > RELAXED)
        return INVALID_VALUE;
    pthread_mutex_lock(&mu);
    mt_hipError_t r = OK;
    if (s->status == ACTIVE) {
        r = ILLEGAL_STATE;
    } else {
        s->status = ACTIVE;
        s->mode = (int)mode;
        s->owner = me();
        s->nodes = 0;
        add(s);
    }
    pthread_mutex_unlock(&mu);
    return r;
}

mt_hipError_t hipStreamEndCapture(mt_hipStream_t s, mt_hipGraph_t *graph) {
    if (!s)
        return ILLEGAL_STATE;
    pthread_mutex_lock(&mu);
    mt_hipError_t r = OK;
    if (s->status == NONE) {
        r = ILLEGAL_STATE;
    } else if (s->mode != RELAXED && s->owner != me()) {
        r = WRONG_THREAD; /* HIP leaves the capture as it was */
    } else {
        drop(s);
        release_joined(s);
        if (s->status == INVALIDATED) {
            *graph = NULL;
            r = INVALIDATED_ERR;
        } else {
            *graph = calloc(1, sizeof **graph);
            (*graph)->nodes = s->nodes;
        }
        s->status = NONE;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

mt_hipError_t hipStreamIsCapturing(mt_hipStream_t s, mt_hipStreamCaptureStatus *status) {
    *status = s ? (mt_hipStreamCaptureStatus)s->status : NONE;
    return OK;
}

mt_hipError_t hipThreadExchangeStreamCaptureMode(mt_hipStreamCaptureMode *mode) {
    if (!mode || *mode > RELAXED)
        return INVALID_VALUE;
    int old = thread_mode;
    thread_mode = (int)*mode;
    *mode = (mt_hipStreamCaptureMode)old;
    return OK;
}

mt_hipError_t hipStreamQuery(mt_hipStream_t s) { return stream_check(s); }
mt_hipError_t hipStreamSynchronize(mt_hipStream_t s) { return stream_check(s); }

static mt_hipError_t event_check(struct ihipEvent_t *e) {
    pthread_mutex_lock(&mu);
    mt_hipError_t r = OK;
    if (e->captured_in && e->captured_in->status == ACTIVE) {
        e->captured_in->status = INVALIDATED;
        r = CAPTURED_EVENT;
    } else if (e->recorded && unsafe_call()) {
        r = UNSUPPORTED;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

mt_hipError_t hipEventQuery(mt_hipEvent_t e) { return event_check(e); }
mt_hipError_t hipEventSynchronize(mt_hipEvent_t e) { return event_check(e); }

mt_hipError_t hipEventRecord(mt_hipEvent_t e, mt_hipStream_t s) {
    mt_hipError_t r = enqueue(s);
    if (r == OK) {
        pthread_mutex_lock(&mu);
        e->captured_in = s && s->status == ACTIVE ? s : NULL;
        e->recorded = 1;
        pthread_mutex_unlock(&mu);
    }
    return r;
}

/* A stream that waits on an event recorded in a capture joins it. */
mt_hipError_t hipStreamWaitEvent(mt_hipStream_t s, mt_hipEvent_t e, unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&mu);
    struct ihipStream_t *in = e ? e->captured_in : NULL;
    struct ihipStream_t *origin = in && in->origin ? in->origin : in;
    if (origin && origin->status == ACTIVE && s && s != origin && s->status == NONE) {
        for (int i = 0; i < MAX; i++)
            if (!joined[i]) {
                joined[i] = s;
                s->status = ACTIVE;
                s->origin = origin;
                break;
            }
    }
    pthread_mutex_unlock(&mu);
    return enqueue(s);
}

mt_hipError_t hipDeviceSynchronize(void) {
    pthread_mutex_lock(&mu);
    mt_hipError_t r = invalidate(0) ? UNSUPPORTED : OK;
    pthread_mutex_unlock(&mu);
    return r;
}

static mt_hipError_t alloc_check(void) {
    pthread_mutex_lock(&mu);
    mt_hipError_t r = unsafe_call() ? UNSUPPORTED : OK;
    pthread_mutex_unlock(&mu);
    return r;
}

mt_hipError_t hipMalloc(void **ptr, size_t size) {
    mt_hipError_t r = alloc_check();
    if (r == OK)
        *ptr = malloc(size ? size : 1);
    return r;
}

mt_hipError_t hipFree(void *ptr) {
    mt_hipError_t r = alloc_check();
    if (r == OK)
        free(ptr);
    return r;
}

/* Synchronous copies and sets invalidate every capture, whatever the mode. */
static mt_hipError_t sync_copy(void) {
    pthread_mutex_lock(&mu);
    mt_hipError_t r = any_capture() && invalidate(0) ? IMPLICIT : OK;
    pthread_mutex_unlock(&mu);
    return r;
}

mt_hipError_t hipMemcpy(void *dst, const void *src, size_t n, mt_hipMemcpyKind kind) {
    (void)kind;
    mt_hipError_t r = sync_copy();
    if (r == OK)
        memmove(dst, src, n);
    return r;
}

mt_hipError_t hipMemset(void *dst, int value, size_t n) {
    mt_hipError_t r = sync_copy();
    if (r == OK)
        memset(dst, value, n);
    return r;
}

mt_hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, mt_hipMemcpyKind kind, mt_hipStream_t s) {
    (void)kind;
    mt_hipError_t r = enqueue(s);
    if (r == OK && !(s && s->status == ACTIVE))
        memmove(dst, src, n);
    return r;
}

mt_hipError_t hipLaunchKernel(const void *fn, mt_dim3 grid, mt_dim3 block, void **args, size_t shared,
                              mt_hipStream_t s) {
    (void)fn, (void)grid, (void)block, (void)args, (void)shared;
    return enqueue(s);
}

mt_hipError_t hipModuleLaunchKernel(mt_hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                                    unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                    mt_hipStream_t s, void **params, void **extra) {
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)params, (void)extra;
    return enqueue(s);
}

mt_hipError_t hipGraphLaunch(mt_hipGraphExec_t exec, mt_hipStream_t s) {
    if (!exec)
        return INVALID_VALUE;
    return enqueue(s);
}

/* Graphs built node by node: a node is counted, its parameters not looked
 * at. */
mt_hipError_t hipGraphCreate(mt_hipGraph_t *graph, unsigned int flags) {
    (void)flags;
    *graph = calloc(1, sizeof **graph);
    return OK;
}

mt_hipError_t hipGraphAddKernelNode(mt_hipGraphNode_t *node, mt_hipGraph_t graph, const mt_hipGraphNode_t *deps,
                                    size_t ndeps, const void *params) {
    (void)deps, (void)ndeps, (void)params;
    *node = (mt_hipGraphNode_t)(uintptr_t)++graph->nodes;
    return OK;
}

mt_hipError_t hipGraphGetNodes(mt_hipGraph_t graph, mt_hipGraphNode_t *nodes, size_t *n) {
    if (!graph || !n)
        return INVALID_VALUE;
    if (nodes)
        for (int i = 0; i < graph->nodes && (size_t)i < *n; i++)
            nodes[i] = (mt_hipGraphNode_t)(uintptr_t)(i + 1);
    *n = (size_t)graph->nodes;
    return OK;
}

static mt_hipError_t instantiate(mt_hipGraphExec_t *exec, mt_hipGraph_t graph) {
    if (!graph || !exec)
        return INVALID_VALUE;
    *exec = calloc(1, sizeof **exec);
    (*exec)->graph = graph;
    return OK;
}

mt_hipError_t hipGraphInstantiate(mt_hipGraphExec_t *exec, mt_hipGraph_t graph, mt_hipGraphNode_t *error_node,
                                  char *log, size_t log_size) {
    (void)error_node, (void)log, (void)log_size;
    return instantiate(exec, graph);
}

mt_hipError_t hipGraphInstantiateWithFlags(mt_hipGraphExec_t *exec, mt_hipGraph_t graph, unsigned long long flags) {
    (void)flags;
    return instantiate(exec, graph);
}

mt_hipError_t hipGraphExecDestroy(mt_hipGraphExec_t exec) {
    free(exec);
    return OK;
}

/* What the observer asks to name a capture's device. */
mt_hipError_t hipGetDevice(int *deviceId) {
    *deviceId = 0;
    return OK;
}

mt_hipError_t hipDeviceGetName(char *name, int len, mt_hipDevice_t device) {
    snprintf(name, (size_t)len, "Stand-in HIP device %d", device);
    return OK;
}

mt_hipError_t hipDeviceGetAttribute(int *pi, mt_hipDeviceAttribute_t attr, int deviceId) {
    (void)deviceId;
    *pi = attr == MT_hipDeviceAttributeMultiprocessorCount ? 304 : 0;
    return OK;
}

mt_hipError_t hipGetDevicePropertiesR0600(struct hipDeviceProp_tR0600 *prop, int deviceId) {
    (void)deviceId;
    memset(prop, 0xff, MT_HIP_DEVICE_PROP_SIZE);
    strcpy((char *)prop + MT_HIP_DEVICE_PROP_GCN_ARCH_NAME, "gfx942:sramecc+:xnack-");
    return OK;
}
