/*
 * The CUDA side: a CUPTI injection library. The driver loads the library
 * that CUDA_INJECTION64_PATH names during cuInit and calls its
 * InitializeInjection; that subscribes to CUPTI's driver-API callbacks, which
 * run on the calling thread at the entry and exit of every driver call,
 * those the CUDA runtime makes included.
 *
 * Cost when no capture is active: the callback reads one cached word that
 * classifies the call (by callback id) and, at exit, one relaxed counter.
 * Only the capture calls, the thread's mode exchanges and the graph calls
 * (an instantiation; a graph launch looks its executable graph up in a
 * table, and only its first launch is reported) do more.
 *
 * A program's own injection library (its CUDA_INJECTION64_PATH, which
 * miotool passes in MIOTOOL_TRACE_INJECTION) is loaded and its
 * InitializeInjection called after the observer's subscription: it runs,
 * but CUPTI takes one subscriber, so a subscription of its own fails; the
 * observer's cuptiSubscribe (which the program's libraries reach first)
 * returns CUPTI's error unchanged and tells miotool who was refused.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observer.h"

/* What a driver call is to the observer, cached per callback id. */
enum {
    MT_K_CALL = 1,        /* any other call */
    MT_K_BEGIN,           /* cuStreamBeginCapture_v2 (stream, mode) */
    MT_K_BEGIN_GLOBAL,    /* cuStreamBeginCapture without a mode: global */
    MT_K_BEGIN_TO_GRAPH,  /* cuStreamBeginCaptureToGraph */
    MT_K_END,             /* cuStreamEndCapture */
    MT_K_EXCHANGE,        /* cuThreadExchangeStreamCaptureMode */
    MT_K_DESTROY,         /* cuStreamDestroy */
    MT_K_INSTANTIATE,     /* cuGraphInstantiate* (executable graph, graph) */
    MT_K_GRAPH_LAUNCH,    /* cuGraphLaunch (executable graph, stream) */
};
/* Where in the call's parameter struct its stream and event are: a byte
 * offset plus one (0: none), or the launch config's stream. */
#define MT_AT(off) ((off) / 8 + 1)
#define MT_AT_LAUNCH_CONFIG 63
#define MT_INFO(kind, stream, event, candidate) \
    (0x80000000u | (kind) | ((unsigned)(stream) << 4) | ((unsigned)(event) << 10) | ((candidate) ? 1u << 16 : 0u))
/* A call that enqueues work on its stream: one that names a stream no
 * capture began on, while a capture is active, is asked whether that stream
 * captures. */
#define MT_ENQUEUES (1u << 17)

struct mt_cuda_call {
    const char *name; /* without _v2, _ptsz, ... */
    unsigned info;
};

/* Calls that may name a capture's stream or that the capture rules govern
 * (candidates: their callers are worth knowing when they succeed too). */
static const struct mt_cuda_call mt_cuda_calls[] = {
    {"cuStreamEndCapture", MT_INFO(MT_K_END, MT_AT(0), 0, 1)},
    {"cuThreadExchangeStreamCaptureMode", MT_INFO(MT_K_EXCHANGE, 0, 0, 0)},
    {"cuStreamDestroy", MT_INFO(MT_K_DESTROY, MT_AT(0), 0, 0)},
    {"cuStreamQuery", MT_INFO(MT_K_CALL, MT_AT(0), 0, 1)},
    {"cuStreamSynchronize", MT_INFO(MT_K_CALL, MT_AT(0), 0, 1)},
    {"cuEventQuery", MT_INFO(MT_K_CALL, 0, MT_AT(0), 1)},
    {"cuEventSynchronize", MT_INFO(MT_K_CALL, 0, MT_AT(0), 1)},
    {"cuCtxSynchronize", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemAlloc", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemAllocPitch", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemAllocManaged", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemAllocHost", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemHostAlloc", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemFree", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemFreeHost", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemcpy", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemcpyHtoD", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemcpyDtoH", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemcpyDtoD", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemsetD8", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemsetD16", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuMemsetD32", MT_INFO(MT_K_CALL, 0, 0, 1)},
    {"cuEventRecord", MT_INFO(MT_K_CALL, MT_AT(8), MT_AT(0), 0)},
    {"cuEventRecordWithFlags", MT_INFO(MT_K_CALL, MT_AT(8), MT_AT(0), 0)},
    {"cuStreamWaitEvent", MT_INFO(MT_K_CALL, MT_AT(0), MT_AT(8), 0)},
    {"cuLaunchKernel", MT_INFO(MT_K_CALL, MT_AT(40), 0, 0) | MT_ENQUEUES},
    {"cuLaunchCooperativeKernel", MT_INFO(MT_K_CALL, MT_AT(40), 0, 0) | MT_ENQUEUES},
    {"cuLaunchKernelEx", MT_INFO(MT_K_CALL, MT_AT_LAUNCH_CONFIG, 0, 0) | MT_ENQUEUES},
    {"cuLaunchHostFunc", MT_INFO(MT_K_CALL, MT_AT(0), 0, 0) | MT_ENQUEUES},
    {"cuStreamAddCallback", MT_INFO(MT_K_CALL, MT_AT(0), 0, 0) | MT_ENQUEUES},
    {"cuMemcpyAsync", MT_INFO(MT_K_CALL, MT_AT(24), 0, 0) | MT_ENQUEUES},
    {"cuMemcpyHtoDAsync", MT_INFO(MT_K_CALL, MT_AT(24), 0, 0) | MT_ENQUEUES},
    {"cuMemcpyDtoHAsync", MT_INFO(MT_K_CALL, MT_AT(24), 0, 0) | MT_ENQUEUES},
    {"cuMemcpyDtoDAsync", MT_INFO(MT_K_CALL, MT_AT(24), 0, 0) | MT_ENQUEUES},
    {"cuMemcpy2DAsync", MT_INFO(MT_K_CALL, MT_AT(8), 0, 0) | MT_ENQUEUES},
    {"cuMemcpy3DAsync", MT_INFO(MT_K_CALL, MT_AT(8), 0, 0) | MT_ENQUEUES},
    {"cuMemsetD8Async", MT_INFO(MT_K_CALL, MT_AT(24), 0, 0) | MT_ENQUEUES},
    {"cuMemsetD16Async", MT_INFO(MT_K_CALL, MT_AT(24), 0, 0) | MT_ENQUEUES},
    {"cuMemsetD32Async", MT_INFO(MT_K_CALL, MT_AT(24), 0, 0) | MT_ENQUEUES},
    {"cuMemAllocAsync", MT_INFO(MT_K_CALL, MT_AT(16), 0, 0)},
    {"cuMemFreeAsync", MT_INFO(MT_K_CALL, MT_AT(8), 0, 0)},
    {"cuGraphLaunch", MT_INFO(MT_K_GRAPH_LAUNCH, MT_AT(8), 0, 0) | MT_ENQUEUES},
    {"cuGraphUpload", MT_INFO(MT_K_CALL, MT_AT(8), 0, 0)},
    {"cuStreamIsCapturing", MT_INFO(MT_K_CALL, MT_AT(0), 0, 0)},
    {"cuStreamGetCaptureInfo", MT_INFO(MT_K_CALL, MT_AT(0), 0, 0)},
    {"cuStreamUpdateCaptureDependencies", MT_INFO(MT_K_CALL, MT_AT(0), 0, 0)},
};

/* The name without its ABI suffixes: cuMemcpyHtoDAsync_v2_ptsz names
 * cuMemcpyHtoDAsync. */
static size_t mt_base_len(const char *name) {
    static const char *const suffixes[] = {"_v2", "_v3", "_v4", "_ptsz", "_ptds"};
    size_t n = strlen(name);
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
            size_t k = strlen(suffixes[i]);
            if (n > k && strncmp(name + n - k, suffixes[i], k) == 0) {
                n -= k;
                again = 1;
            }
        }
    }
    return n;
}

static unsigned mt_classify(const char *name) {
    if (!name)
        return MT_INFO(MT_K_CALL, 0, 0, 0);
    size_t n = mt_base_len(name);
    if (n == strlen("cuStreamBeginCapture") && strncmp(name, "cuStreamBeginCapture", n) == 0)
        /* The plain and _ptsz forms are the old ABI, without a mode. */
        return strstr(name, "_v2") ? MT_INFO(MT_K_BEGIN, MT_AT(0), 0, 1) : MT_INFO(MT_K_BEGIN_GLOBAL, MT_AT(0), 0, 1);
    if (n == strlen("cuStreamBeginCaptureToGraph") && strncmp(name, "cuStreamBeginCaptureToGraph", n) == 0)
        return MT_INFO(MT_K_BEGIN_TO_GRAPH, MT_AT(0), 0, 1);
    if (strncmp(name, "cuGraphInstantiate", strlen("cuGraphInstantiate")) == 0)
        return MT_INFO(MT_K_INSTANTIATE, 0, 0, 0);
    for (size_t i = 0; i < sizeof mt_cuda_calls / sizeof mt_cuda_calls[0]; i++)
        if (strlen(mt_cuda_calls[i].name) == n && strncmp(name, mt_cuda_calls[i].name, n) == 0)
            return mt_cuda_calls[i].info;
    return MT_INFO(MT_K_CALL, 0, 0, 0);
}

#define MT_CBID_CACHE 4096
static _Atomic unsigned mt_cbid_info[MT_CBID_CACHE];

static unsigned mt_info(mt_CUpti_CallbackId cbid, const char *name) {
    if (cbid < MT_CBID_CACHE) {
        unsigned info = atomic_load_explicit(&mt_cbid_info[cbid], memory_order_relaxed);
        if (info)
            return info;
        info = mt_classify(name);
        atomic_store_explicit(&mt_cbid_info[cbid], info, memory_order_relaxed);
        return info;
    }
    return mt_classify(name);
}

static uint64_t mt_handle_at(const void *params, unsigned at) {
    if (!params || at == 0)
        return 0;
    if (at == MT_AT_LAUNCH_CONFIG) {
        const mt_CUlaunchConfig *cfg = ((const mt_cuLaunchKernelEx_params *)params)->config;
        return cfg ? (uint64_t)(uintptr_t)cfg->hStream : 0;
    }
    const void *const *field = (const void *const *)((const char *)params + (at - 1) * 8);
    return (uint64_t)(uintptr_t)*field;
}

/* A driver function of the observer's own queries, through the driver
 * that loaded this library: in the global scope or, when the runtime
 * opened it locally, by its soname. These calls fire this library's
 * callbacks too; mt_call leaves them out (mt_own_call). */
static void *mt_driver(_Atomic(void *) *slot, const char *name) {
    void *fn = atomic_load_explicit(slot, memory_order_acquire);
    if (fn)
        return fn;
    fn = dlsym(RTLD_DEFAULT, name);
    if (!fn) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        if (h)
            fn = dlsym(h, name);
    }
    if (fn)
        atomic_store_explicit(slot, fn, memory_order_release);
    return fn;
}

/* The device of the calling thread's current context. */
static void mt_cuda_device(struct mt_device *d, int full) {
    static _Atomic(void *) get_device, get_name, get_attribute;
    mt_cuCtxGetDevice_fn device = (mt_cuCtxGetDevice_fn)mt_driver(&get_device, "cuCtxGetDevice");
    mt_CUdevice dev;
    if (!device || device(&dev) != 0)
        return;
    d->ordinal = dev;
    if (!full)
        return;
    mt_cuDeviceGetName_fn name = (mt_cuDeviceGetName_fn)mt_driver(&get_name, "cuDeviceGetName");
    mt_cuDeviceGetAttribute_fn attribute = (mt_cuDeviceGetAttribute_fn)mt_driver(&get_attribute, "cuDeviceGetAttribute");
    if (name && name(d->name, (int)sizeof d->name, dev) != 0)
        d->name[0] = '\0';
    int major = 0, minor = 0, sms = 0;
    if (attribute && attribute(&major, MT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == 0 &&
        attribute(&minor, MT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == 0)
        snprintf(d->arch, sizeof d->arch, "sm_%d%d", major, minor);
    if (attribute && attribute(&sms, MT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == 0)
        d->cus = sms;
}

/* A graph's node count (-1: unknown). */
static long mt_cuda_graph_nodes(mt_CUgraph graph) {
    static _Atomic(void *) get_nodes;
    mt_cuGraphGetNodes_fn fn = (mt_cuGraphGetNodes_fn)mt_driver(&get_nodes, "cuGraphGetNodes");
    size_t n = 0;
    if (!graph || !fn)
        return -1;
    mt_own_call = 1;
    mt_CUresult r = fn(graph, NULL, &n);
    mt_own_call = 0;
    return r == 0 ? (long)n : -1;
}

/* Whether work launched into stream escaped every capture: the stream is
 * not a capture's own and the driver says it is not capturing (a stream
 * that joined a capture through an event is capturing). */
static int mt_cuda_outside(uint64_t stream) {
    static _Atomic(void *) is_capturing;
    if (mt_capture_origin(MT_API_CUDA, stream))
        return 0;
    mt_cuStreamIsCapturing_fn fn = (mt_cuStreamIsCapturing_fn)mt_driver(&is_capturing, "cuStreamIsCapturing");
    if (!fn)
        return 0;
    mt_CUstreamCaptureStatus status = 0;
    mt_own_call = 1;
    mt_CUresult r = fn((mt_CUstream)(uintptr_t)stream, &status);
    mt_own_call = 0;
    return r == 0 && status == MT_CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ---- which callbacks are on ----
 *
 * Outside every capture the observer needs only the calls that begin a
 * capture, change a thread's mode, destroy a stream, end a capture or make
 * and launch graphs: those callbacks stay on (the narrow scope), one by
 * one, and every other driver call, a kernel launch among them, costs the
 * program nothing at all. From the entry of a call that begins a capture
 * until the last capture has ended, the whole driver domain is on (the
 * full scope), so that every call made during a capture is seen: the
 * domain is enabled at the begin's entry, before the capture exists.
 * Where callbacks cannot be named or enabled one by one (an old or
 * stand-in CUPTI without cuptiGetCallbackName or cuptiEnableCallback), the
 * full scope stays on. */
#define MT_MAX_ALWAYS 128
static mt_CUpti_SubscriberHandle mt_sub;
static mt_cuptiEnableDomain_fn mt_enable_domain;
static mt_cuptiEnableCallback_fn mt_enable_callback;
static mt_CUpti_CallbackId mt_always[MT_MAX_ALWAYS];
static const char *mt_always_names[MT_MAX_ALWAYS];
static int mt_nalways;
static pthread_mutex_t mt_scope_mu = PTHREAD_MUTEX_INITIALIZER;
static int mt_full = 1;   /* the whole driver domain is on */
static int mt_narrowable; /* the narrow scope is possible */
static int mt_beginning;  /* begin-capture calls between their entry and exit */

/* The kinds whose callbacks stay on outside captures. */
static int mt_always_kind(unsigned kind) { return kind != MT_K_CALL; }

/* What the scope is, told to miotool once per kind of news: "narrow" (how
 * many callbacks stay on outside captures), "full" (why every driver call
 * runs the observer's callback outside captures too: the cost of a trace
 * on a launch-bound program); mt_scope_stray says "renarrowed". */
static atomic_int mt_said_narrow, mt_said_full;
/* Callbacks of calls outside captures while the scope is narrow, since the
 * last narrowing (mt_scope_stray). */
#define MT_STRAY_LIMIT 256
static atomic_uint mt_strays;
static atomic_int mt_renarrowed;

static void mt_scope_news(atomic_int *said, const char *status, const char *text) {
    if (!atomic_exchange(said, 1))
        mt_note("scope", status, text);
}

static void mt_scope_full_because(const char *why) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s: the whole driver domain stays on, and every driver call runs the observer's callback", why);
    mt_scope_news(&mt_said_full, "full", msg);
}

static void mt_scope_full_locked(void) {
    if (!mt_full && mt_enable_domain(1, mt_sub, MT_CUPTI_CB_DOMAIN_DRIVER_API) == MT_CUPTI_SUCCESS)
        __atomic_store_n(&mt_full, 1, __ATOMIC_RELAXED);
}

static void mt_scope_narrow_locked(void) {
    if (!mt_narrowable || !mt_full || mt_beginning > 0 || mt_any_capture())
        return;
    mt_CUptiResult r = mt_enable_domain(0, mt_sub, MT_CUPTI_CB_DOMAIN_DRIVER_API);
    if (r != MT_CUPTI_SUCCESS) {
        char why[256];
        snprintf(why, sizeof why, "cuptiEnableDomain(0, driver API) returned %u", r);
        mt_scope_full_because(why);
        return;
    }
    __atomic_store_n(&mt_full, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < mt_nalways; i++)
        if ((r = mt_enable_callback(1, mt_sub, MT_CUPTI_CB_DOMAIN_DRIVER_API, mt_always[i])) != MT_CUPTI_SUCCESS) {
            mt_scope_full_locked(); /* a callback that will not turn on: see everything */
            char why[256];
            snprintf(why, sizeof why, "cuptiEnableCallback(1, driver API, %u %s) returned %u", mt_always[i],
                     mt_always_names[i] ? mt_always_names[i] : "?", r);
            mt_scope_full_because(why);
            return;
        }
    atomic_store(&mt_strays, 0);
    char msg[128];
    snprintf(msg, sizeof msg, "%d driver callbacks on outside captures", mt_nalways);
    mt_scope_news(&mt_said_narrow, "narrow", msg);
}

/* A callback for a call that needs none outside captures came while the
 * scope is narrow. A few do (a call that entered before the last capture
 * ended exits after it); hundreds in a row say that CUPTI did not take the
 * narrowing. The observer then narrows once more, and if CUPTI still
 * calls, turns the whole domain on and says so. */
static void mt_scope_stray(const char *name) {
    if (__atomic_load_n(&mt_full, __ATOMIC_RELAXED))
        return;
    if (atomic_fetch_add(&mt_strays, 1) + 1 != MT_STRAY_LIMIT)
        return;
    char msg[256];
    if (!atomic_exchange(&mt_renarrowed, 1)) {
        snprintf(msg, sizeof msg, "CUPTI called the observer for %d driver calls outside captures (%s among them) after the narrowing: narrowed again",
                 MT_STRAY_LIMIT, name ? name : "?");
        mt_note("scope", "renarrowed", msg);
        pthread_mutex_lock(&mt_scope_mu);
        __atomic_store_n(&mt_full, 1, __ATOMIC_RELAXED);
        mt_scope_narrow_locked();
        pthread_mutex_unlock(&mt_scope_mu);
        return;
    }
    /* The whole domain on, as CUPTI has it anyway: believing it on while it
     * was not would leave a capture's begin without the full scope. */
    pthread_mutex_lock(&mt_scope_mu);
    mt_scope_full_locked();
    pthread_mutex_unlock(&mt_scope_mu);
    snprintf(msg, sizeof msg, "CUPTI went on calling the observer for driver calls outside captures (%s among them) after it narrowed twice",
             name ? name : "?");
    mt_scope_full_because(msg);
}

/* A begin-capture call enters: the full scope, before the capture exists. */
static void mt_scope_begin_enter(void) {
    pthread_mutex_lock(&mt_scope_mu);
    mt_beginning++;
    mt_scope_full_locked();
    pthread_mutex_unlock(&mt_scope_mu);
}

/* A begin-capture call has returned (its capture counted if it began). */
static void mt_scope_begin_exit(void) {
    pthread_mutex_lock(&mt_scope_mu);
    if (mt_beginning > 0)
        mt_beginning--;
    mt_scope_narrow_locked();
    pthread_mutex_unlock(&mt_scope_mu);
}

/* A capture may have ended: the narrow scope when none is left. */
static void mt_scope_settle(void) {
    pthread_mutex_lock(&mt_scope_mu);
    mt_scope_narrow_locked();
    pthread_mutex_unlock(&mt_scope_mu);
}

/* The callbacks that stay on, found by name; the narrow scope is possible
 * only when CUPTI names them and turns them on one by one. */
static void mt_find_always(void *cupti) {
    mt_cuptiGetCallbackName_fn name = (mt_cuptiGetCallbackName_fn)dlsym(cupti, "cuptiGetCallbackName");
    mt_enable_callback = (mt_cuptiEnableCallback_fn)dlsym(cupti, "cuptiEnableCallback");
    if (!name || !mt_enable_callback) {
        mt_scope_full_because("this CUPTI cannot turn driver callbacks on one by one (no cuptiGetCallbackName or cuptiEnableCallback)");
        return;
    }
    /* Driver callback ids are small; past the last one CUPTI refuses. */
    int misses = 0;
    for (mt_CUpti_CallbackId cbid = 1; cbid < 8192 && misses < 1024; cbid++) {
        const char *n = NULL;
        if (name(MT_CUPTI_CB_DOMAIN_DRIVER_API, cbid, &n) != MT_CUPTI_SUCCESS || !n) {
            misses++;
            continue;
        }
        misses = 0;
        if (mt_always_kind(mt_info(cbid, n) & 15)) {
            if (mt_nalways == MT_MAX_ALWAYS) {
                mt_scope_full_because("more driver callbacks would stay on outside captures than the observer keeps");
                return;
            }
            mt_always_names[mt_nalways] = n;
            mt_always[mt_nalways++] = cbid;
        }
    }
    mt_narrowable = mt_nalways > 0;
    if (!mt_narrowable)
        mt_scope_full_because("CUPTI named none of the callbacks that begin or end a capture");
}

/* The mode a thread asked for at the entry of its exchange, kept for the
 * exit, where the parameter holds the old mode instead. */
static MT_TLS unsigned mt_pending_mode;

static void mt_cupti_callback(void *userdata, mt_CUpti_CallbackDomain domain, mt_CUpti_CallbackId cbid,
                              const void *cbdata) {
    (void)userdata;
    if (domain != MT_CUPTI_CB_DOMAIN_DRIVER_API || !cbdata)
        return;
    const mt_CUpti_CallbackData *cb = cbdata;
    unsigned info = mt_info(cbid, cb->functionName);
    unsigned kind = info & 15;
    if (cb->callbackSite == MT_CUPTI_API_ENTER) {
        if (kind == MT_K_BEGIN || kind == MT_K_BEGIN_GLOBAL || kind == MT_K_BEGIN_TO_GRAPH)
            mt_scope_begin_enter();
        if (kind == MT_K_EXCHANGE && cb->functionParams) {
            const mt_CUstreamCaptureMode *mode = ((const mt_cuThreadExchangeStreamCaptureMode_params *)cb->functionParams)->mode;
            mt_pending_mode = mode ? *mode : mt_cuda_thread_mode;
        }
        return;
    }
    if (cb->callbackSite != MT_CUPTI_API_EXIT)
        return;
    unsigned result = cb->functionReturnValue ? *(const mt_CUresult *)cb->functionReturnValue : 0;
    uint64_t stream = mt_handle_at(cb->functionParams, (info >> 4) & 63);
    switch (kind) {
    case MT_K_BEGIN:
        mt_begin(MT_API_CUDA, cb->functionName, stream,
                 cb->functionParams ? ((const mt_cuStreamBeginCapture_v2_params *)cb->functionParams)->mode : 0, result,
                 mt_cuda_device);
        mt_scope_begin_exit();
        return;
    case MT_K_BEGIN_GLOBAL:
        mt_begin(MT_API_CUDA, cb->functionName, stream, MT_CU_STREAM_CAPTURE_MODE_GLOBAL, result, mt_cuda_device);
        mt_scope_begin_exit();
        return;
    case MT_K_BEGIN_TO_GRAPH:
        mt_begin(MT_API_CUDA, cb->functionName, stream,
                 cb->functionParams ? ((const mt_cuStreamBeginCaptureToGraph_params *)cb->functionParams)->mode : 0,
                 result, mt_cuda_device);
        mt_scope_begin_exit();
        return;
    case MT_K_END: {
        /* CUDA ends the capture whatever EndCapture returns (from the wrong
         * thread too: it tears the capture down). */
        const mt_cuStreamEndCapture_params *p = cb->functionParams;
        mt_CUgraph graph = result == 0 && p && p->phGraph ? *p->phGraph : NULL;
        mt_end(MT_API_CUDA, cb->functionName, stream, result, 0, (uint64_t)(uintptr_t)graph,
               mt_tracing && graph ? mt_cuda_graph_nodes(graph) : -1);
        mt_scope_settle();
        return;
    }
    case MT_K_INSTANTIATE:
        if (mt_tracing && cb->functionParams) {
            const mt_cuGraphInstantiate_params *p = cb->functionParams;
            mt_CUgraphExec exec = result == 0 && p->phGraphExec ? *p->phGraphExec : NULL;
            mt_graph_instantiated(MT_API_CUDA, cb->functionName, (uint64_t)(uintptr_t)p->hGraph,
                                  (uint64_t)(uintptr_t)exec, result, mt_cuda_graph_nodes(p->hGraph));
        }
        break;
    case MT_K_GRAPH_LAUNCH:
        if (cb->functionParams) {
            uint64_t exec = (uint64_t)(uintptr_t)((const mt_cuGraphLaunch_params *)cb->functionParams)->hGraph;
            if (mt_graph_launch_new(MT_API_CUDA, exec))
                mt_graph_launched(MT_API_CUDA, cb->functionName, exec, stream, result);
        }
        break;
    case MT_K_EXCHANGE:
        if (result == 0)
            mt_cuda_thread_mode = mt_pending_mode;
        break;
    case MT_K_DESTROY:
        if (result == 0 && mt_any_capture()) {
            mt_stream_gone(MT_API_CUDA, stream);
            mt_scope_settle();
        }
        break;
    }
    if (!mt_any_capture()) {
        if (kind == MT_K_CALL)
            mt_scope_stray(cb->functionName);
        return;
    }
    int outside = (info & MT_ENQUEUES) && result == 0 && mt_cuda_outside(stream);
    mt_call(MT_API_CUDA, cb->functionName, stream, mt_handle_at(cb->functionParams, (info >> 10) & 63), result,
            mt_cuda_thread_mode, (info >> 16) & 1, outside);
}

/* ---- loading CUPTI ---- */

static void *mt_open_cupti(char *tried, size_t size) {
    static const char *const sonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so.11"};
    const size_t nsonames = sizeof sonames / sizeof sonames[0];
    void *h;
    /* A copy the program already loaded (PyTorch's) is the one to share. */
    for (size_t i = 0; i < nsonames; i++)
        if ((h = dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD)))
            return h;
    /* The one miotool found beside the CUDA installation it looked at.
     * Lazy binding: of CUPTI's thousands of functions the observer calls a
     * handful, and binding them all would lengthen every traced program's
     * start. */
    const char *found = getenv("MIOTOOL_TRACE_CUPTI");
    if (found && found[0]) {
        if ((h = dlopen(found, RTLD_LAZY)))
            return h;
        snprintf(tried + strlen(tried), size - strlen(tried), "%s (%s); ", found, dlerror());
    }
    for (size_t i = 0; i < nsonames; i++) {
        if ((h = dlopen(sonames[i], RTLD_LAZY)))
            return h;
        snprintf(tried + strlen(tried), size - strlen(tried), "%s; ", sonames[i]);
    }
    return NULL;
}

static const char *mt_cupti_error(void *h, mt_CUptiResult r, char *buf, size_t size) {
    mt_cuptiGetResultString_fn text = (mt_cuptiGetResultString_fn)dlsym(h, "cuptiGetResultString");
    const char *s = NULL;
    if (!text || text(r, &s) != MT_CUPTI_SUCCESS || !s)
        s = "";
    snprintf(buf, size, "%u %s", r, s);
    return buf;
}

/* The libcupti the observer subscribed through, once it has. */
static _Atomic(void *) mt_cupti_lib;
static atomic_int mt_subscribed;

static void mt_subscribe(void) {
    char tried[1024] = "", msg[1536];
    void *h = mt_open_cupti(tried, sizeof tried);
    if (!h) {
        snprintf(msg, sizeof msg, "libcupti could not be loaded; tried %s", tried);
        mt_note("cupti", "missing", msg);
        return; /* the program runs on, unobserved */
    }
    atomic_store(&mt_cupti_lib, h);
    mt_cuptiSubscribe_fn subscribe = (mt_cuptiSubscribe_fn)dlsym(h, "cuptiSubscribe");
    mt_cuptiEnableDomain_fn enable = (mt_cuptiEnableDomain_fn)dlsym(h, "cuptiEnableDomain");
    Dl_info where;
    const char *path = subscribe && dladdr((void *)subscribe, &where) && where.dli_fname ? where.dli_fname : "libcupti";
    if (!subscribe || !enable) {
        snprintf(msg, sizeof msg, "%s lacks cuptiSubscribe or cuptiEnableDomain", path);
        mt_note("cupti", "error", msg);
        return;
    }
    mt_CUpti_SubscriberHandle sub = NULL;
    mt_CUptiResult r = subscribe(&sub, mt_cupti_callback, NULL);
    if (r != MT_CUPTI_SUCCESS) {
        char err[256];
        snprintf(msg, sizeof msg, "cuptiSubscribe in %s returned %s (another CUPTI client, such as a profiler, may hold it)",
                 path, mt_cupti_error(h, r, err, sizeof err));
        mt_note("cupti", "error", msg);
        return;
    }
    r = enable(1, sub, MT_CUPTI_CB_DOMAIN_DRIVER_API);
    if (r != MT_CUPTI_SUCCESS) {
        char err[256];
        snprintf(msg, sizeof msg, "cuptiEnableDomain(driver API) in %s returned %s", path,
                 mt_cupti_error(h, r, err, sizeof err));
        mt_note("cupti", "error", msg);
        return;
    }
    atomic_store(&mt_subscribed, 1);
    mt_sub = sub;
    mt_enable_domain = enable;
    mt_find_always(h);
    mt_scope_settle();
    mt_note("cupti", "ok", path);
}

/* The program's own injection library, which miotool's environment moved
 * from CUDA_INJECTION64_PATH to MIOTOOL_TRACE_INJECTION: loaded and
 * initialized as the driver would have, and noted either way. */
static void mt_chain_injection(void) {
    const char *user = getenv("MIOTOOL_TRACE_INJECTION");
    if (!user || !user[0])
        return;
    char msg[1536];
    void *h = dlopen(user, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(msg, sizeof msg, "the program's own CUDA_INJECTION64_PATH %s could not be loaded: %s", user, dlerror());
        mt_note("inject", "error", msg);
        return;
    }
    if (dlsym(h, "miotool_observer")) {
        snprintf(msg, sizeof msg, "the program's own CUDA_INJECTION64_PATH %s is a miotool observer: not loaded again", user);
        mt_note("inject", "skipped", msg);
        return;
    }
    int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
    if (!init) {
        snprintf(msg, sizeof msg, "the program's own CUDA_INJECTION64_PATH %s has no InitializeInjection", user);
        mt_note("inject", "error", msg);
        return;
    }
    int r = init();
    snprintf(msg, sizeof msg, "the program's own CUDA_INJECTION64_PATH %s was loaded after the observer; its InitializeInjection returned %d%s",
             user, r,
             atomic_load(&mt_subscribed) ? "; CUPTI takes one subscriber and the trace holds it, so a CUPTI subscription of its own is refused"
                                         : "");
    mt_note("inject", "chained", msg);
}

/* This copy's own entry points: inside the library, their exported names
 * are bound to the first copy's when another copy of the observer was
 * loaded first. */
static int mt_initialize(void);
MT_EXPORT int InitializeInjection(void) __attribute__((alias("mt_initialize")));
static mt_CUptiResult mt_subscribe_hook(mt_CUpti_SubscriberHandle *subscriber, mt_CUpti_CallbackFunc callback,
                                        void *userdata);
MT_EXPORT mt_CUptiResult cuptiSubscribe(mt_CUpti_SubscriberHandle *subscriber, mt_CUpti_CallbackFunc callback,
                                        void *userdata) __attribute__((alias("mt_subscribe_hook")));

static int mt_initialize(void) {
    static atomic_int done;
    if (atomic_exchange(&done, 1))
        return 1;
    mt_init_process();
    if (mt_duplicate) {
        /* The driver loaded another copy of the observer than the one the
         * program preloaded: that one reports. */
        int (*first)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
        return first && first != mt_initialize ? first() : 1;
    }
    if (mt_tracing)
        mt_subscribe();
    mt_chain_injection();
    return 1;
}

/* The program's CUPTI subscriptions (a profiler's, an injection library's)
 * reach this one first: CUPTI's answer goes back unchanged, and a refusal
 * while the trace holds CUPTI's one subscription is told to miotool, who
 * tells the user. */
static mt_CUptiResult mt_subscribe_hook(mt_CUpti_SubscriberHandle *subscriber, mt_CUpti_CallbackFunc callback,
                                        void *userdata) {
    static _Atomic(void *) real_slot;
    mt_cuptiSubscribe_fn real = (mt_cuptiSubscribe_fn)atomic_load(&real_slot);
    if (!real) {
        static const char *const sonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so.11"};
        void *h = atomic_load(&mt_cupti_lib);
        if (h)
            real = (mt_cuptiSubscribe_fn)dlsym(h, "cuptiSubscribe");
        if (!real)
            real = (mt_cuptiSubscribe_fn)dlsym(RTLD_NEXT, "cuptiSubscribe");
        for (size_t i = 0; !real && i < sizeof sonames / sizeof sonames[0]; i++)
            if ((h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD)))
                real = (mt_cuptiSubscribe_fn)dlsym(h, "cuptiSubscribe");
        if (real == mt_subscribe_hook || real == cuptiSubscribe)
            real = NULL; /* never this one, nor the first copy's */
        if (real)
            atomic_store(&real_slot, (void *)real);
    }
    if (!real)
        return MT_CUPTI_ERROR_UNKNOWN;
    mt_CUptiResult r = real(subscriber, callback, userdata);
    if (r != MT_CUPTI_SUCCESS && atomic_load(&mt_subscribed)) {
        Dl_info who;
        const char *caller = dladdr(__builtin_return_address(0), &who) && who.dli_fname ? who.dli_fname : "a library of the program";
        char msg[1536], err[256];
        void *h = atomic_load(&mt_cupti_lib);
        snprintf(msg, sizeof msg, "%s asked CUPTI for a subscription and was refused (%s): CUPTI takes one subscriber, and the trace holds it",
                 caller, h ? mt_cupti_error(h, r, err, sizeof err) : "");
        mt_note("cupti", "refused", msg);
    }
    return r;
}
