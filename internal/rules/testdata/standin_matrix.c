/*
 * Runs the capture-rules matrix against one of the trace stand-in runtimes
 * (internal/trace/testdata/standin: libcuda.c, libamdhip64.c), as
 * miotool rules runs it against a device: streams B and A, event evB
 * recorded on B, buffer p, a capture begun on A in the cell's mode with one
 * launch in it (and evA recorded into it for the captured-event actions),
 * the action on the capturing thread or on another one (which switches its
 * own mode around the call when the cell says so), then A's end on the
 * capturing thread. It prints one line per cell,
 *
 *     cell ACTION CAPTURE same|other MODE RETURNS END
 *
 * and one line per action the stand-in cannot be asked,
 *
 *     unsupported ACTION REASON
 *
 * for TestTraceStandInsFollowTheRulesTables to compare with
 * configs/rules. Usage: standin_matrix LIBRARY.so (built with -DSTANDIN_HIP
 * for libamdhip64). Nothing runs on a device: the stand-ins only keep the
 * capture state.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int res_t;
typedef void *handle;

/* The runtime's entry points, found by name; optional ones may be NULL. */
static struct {
    res_t (*stream_create)(handle *);
    res_t (*stream_destroy)(handle);
    res_t (*stream_query)(handle);
    res_t (*stream_sync)(handle);
    res_t (*event_create)(handle *);
    res_t (*event_record)(handle, handle);
    res_t (*event_query)(handle);
    res_t (*event_sync)(handle);
    res_t (*alloc)(handle *, size_t);
    res_t (*release)(handle);
    res_t (*sync_memset)(handle, size_t);
    res_t (*sync_memcpy)(handle, const void *, size_t);
    res_t (*device_sync)(void);
    res_t (*launch)(handle);
    res_t (*begin)(handle, int);
    res_t (*end)(handle, handle *);
    res_t (*exchange)(int *);
    res_t (*graph_destroy)(handle);
    res_t (*host_alloc)(handle *, size_t);
    res_t (*host_free)(handle);
    res_t (*host_register)(handle, size_t);
    res_t (*host_unregister)(handle);
    res_t (*module_unload)(handle);
} rt;

static void *lib;
static const char *missing; /* the first required symbol absent */

static void *sym(const char *name, int required) {
    void *p = dlsym(lib, name);
    if (!p && required && !missing)
        missing = name;
    return p;
}

/* The raw exports, in each runtime's own argument lists. */
#ifdef STANDIN_HIP
static res_t (*hipStreamCreate_)(handle *);
static res_t (*hipEventCreate_)(handle *);
static res_t (*hipMalloc_)(handle *, size_t);
static res_t (*hipMemset_)(handle, int, size_t);
static res_t (*hipMemcpy_)(handle, const void *, size_t, int);
static res_t (*hipModuleLaunchKernel_)(handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, handle,
                                       void **, void **);
static res_t (*hipHostMalloc_)(handle *, size_t, unsigned);
static res_t (*hipHostRegister_)(handle, size_t, unsigned);

static res_t stream_create(handle *s) { return hipStreamCreate_(s); }
static res_t event_create(handle *e) { return hipEventCreate_(e); }
static res_t memset_(handle p, size_t n) { return hipMemset_(p, 0, n); }
static res_t memcpy_(handle dst, const void *src, size_t n) { return hipMemcpy_(dst, src, n, 1 /* host to device */); }
static res_t launch(handle s) { return hipModuleLaunchKernel_(NULL, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL); }
static res_t host_alloc(handle *p, size_t n) { return hipHostMalloc_(p, n, 0); }
static res_t host_register(handle p, size_t n) { return hipHostRegister_(p, n, 0); }

static void bind(void) {
    hipStreamCreate_ = sym("hipStreamCreate", 1);
    hipEventCreate_ = sym("hipEventCreate", 1);
    hipMalloc_ = sym("hipMalloc", 1);
    hipMemset_ = sym("hipMemset", 0);
    hipMemcpy_ = sym("hipMemcpy", 0);
    hipModuleLaunchKernel_ = sym("hipModuleLaunchKernel", 1);
    hipHostMalloc_ = sym("hipHostMalloc", 0);
    hipHostRegister_ = sym("hipHostRegister", 0);
    rt.stream_create = stream_create;
    rt.stream_destroy = sym("hipStreamDestroy", 1);
    rt.stream_query = sym("hipStreamQuery", 1);
    rt.stream_sync = sym("hipStreamSynchronize", 1);
    rt.event_create = event_create;
    rt.event_record = sym("hipEventRecord", 1);
    rt.event_query = sym("hipEventQuery", 1);
    rt.event_sync = sym("hipEventSynchronize", 1);
    rt.alloc = hipMalloc_;
    rt.release = sym("hipFree", 1);
    rt.sync_memset = hipMemset_ ? memset_ : NULL;
    rt.sync_memcpy = hipMemcpy_ ? memcpy_ : NULL;
    rt.device_sync = sym("hipDeviceSynchronize", 1);
    rt.launch = launch;
    rt.begin = sym("hipStreamBeginCapture", 1);
    rt.end = sym("hipStreamEndCapture", 1);
    rt.exchange = sym("hipThreadExchangeStreamCaptureMode", 1);
    rt.graph_destroy = sym("hipGraphDestroy", 1);
    rt.host_alloc = hipHostMalloc_ ? host_alloc : NULL;
    rt.host_free = sym("hipHostFree", 0);
    rt.host_register = hipHostRegister_ ? host_register : NULL;
    rt.host_unregister = sym("hipHostUnregister", 0);
    rt.module_unload = sym("hipModuleUnload", 0);
}
#else
typedef unsigned long long devptr;
static res_t (*cuStreamCreate_)(handle *, unsigned);
static res_t (*cuEventCreate_)(handle *, unsigned);
static res_t (*cuMemAlloc_)(devptr *, size_t);
static res_t (*cuMemFree_)(devptr);
static res_t (*cuMemsetD8_)(devptr, unsigned char, size_t);
static res_t (*cuMemcpyHtoD_)(devptr, const void *, size_t);
static res_t (*cuLaunchKernel_)(handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, handle, void **,
                                void **);
static res_t (*cuMemHostAlloc_)(handle *, size_t, unsigned);
static res_t (*cuMemHostRegister_)(handle, size_t, unsigned);

static res_t stream_create(handle *s) { return cuStreamCreate_(s, 1 /* non-blocking */); }
static res_t event_create(handle *e) { return cuEventCreate_(e, 2 /* timing off */); }
static res_t malloc_(handle *p, size_t n) {
    devptr d = 0;
    res_t r = cuMemAlloc_(&d, n);
    *p = (handle)(size_t)d;
    return r;
}
static res_t free_(handle p) { return cuMemFree_((devptr)(size_t)p); }
static res_t memset_(handle p, size_t n) { return cuMemsetD8_((devptr)(size_t)p, 0, n); }
static res_t memcpy_(handle dst, const void *src, size_t n) { return cuMemcpyHtoD_((devptr)(size_t)dst, src, n); }
static res_t launch(handle s) { return cuLaunchKernel_(NULL, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL); }
static res_t host_alloc(handle *p, size_t n) { return cuMemHostAlloc_(p, n, 0); }
static res_t host_register(handle p, size_t n) { return cuMemHostRegister_(p, n, 0); }

static void bind(void) {
    cuStreamCreate_ = sym("cuStreamCreate", 1);
    cuEventCreate_ = sym("cuEventCreate", 1);
    cuMemAlloc_ = sym("cuMemAlloc_v2", 1);
    cuMemFree_ = sym("cuMemFree_v2", 1);
    cuMemsetD8_ = sym("cuMemsetD8_v2", 0);
    cuMemcpyHtoD_ = sym("cuMemcpyHtoD_v2", 0);
    cuLaunchKernel_ = sym("cuLaunchKernel", 1);
    cuMemHostAlloc_ = sym("cuMemHostAlloc", 0);
    cuMemHostRegister_ = sym("cuMemHostRegister_v2", 0);
    rt.stream_create = stream_create;
    rt.stream_destroy = sym("cuStreamDestroy_v2", 1);
    rt.stream_query = sym("cuStreamQuery", 1);
    rt.stream_sync = sym("cuStreamSynchronize", 1);
    rt.event_create = event_create;
    rt.event_record = sym("cuEventRecord", 1);
    rt.event_query = sym("cuEventQuery", 1);
    rt.event_sync = sym("cuEventSynchronize", 1);
    rt.alloc = malloc_;
    rt.release = free_;
    rt.sync_memset = cuMemsetD8_ ? memset_ : NULL;
    rt.sync_memcpy = cuMemcpyHtoD_ ? memcpy_ : NULL;
    rt.device_sync = sym("cuCtxSynchronize", 1);
    rt.launch = launch;
    rt.begin = sym("cuStreamBeginCapture_v2", 1);
    rt.end = sym("cuStreamEndCapture", 1);
    rt.exchange = sym("cuThreadExchangeStreamCaptureMode", 1);
    rt.graph_destroy = sym("cuGraphDestroy", 1);
    rt.host_alloc = cuMemHostAlloc_ ? host_alloc : NULL;
    rt.host_free = sym("cuMemFreeHost", 0);
    rt.host_register = cuMemHostRegister_ ? host_register : NULL;
    rt.host_unregister = sym("cuMemHostUnregister", 0);
    rt.module_unload = sym("cuModuleUnload", 0);
}
#endif

enum { GLOBAL, THREAD_LOCAL, RELAXED };
static const char *const mode_names[] = {"global", "thread-local", "relaxed"};
#define BUFFER (1 << 20)

/* One cell's state, shared with the acting thread (joined before use). */
struct cell {
    const struct action *act;
    int capture, other, mode;
    handle a, b, evA, evB, p, h, m, graph;
    int p_freed, h_freed, m_registered;
    res_t returns;
};

struct action {
    const char *name;
    /* why it cannot be asked of this stand-in, or NULL */
    const char *(*unsupported)(void);
    int captured_event;
    res_t (*call)(struct cell *);
};

static const char *always(void) { return NULL; }
static const char *no_memset(void) { return rt.sync_memset ? NULL : "the stand-in exports no synchronous memset"; }
static const char *no_memcpy(void) { return rt.sync_memcpy ? NULL : "the stand-in exports no synchronous copy"; }
static const char *no_host_alloc(void) { return rt.host_alloc ? NULL : "the stand-in exports no pinned host allocation"; }
static const char *no_host_free(void) {
    return rt.host_alloc && rt.host_free ? NULL : "the stand-in exports no pinned host allocation and free";
}
static const char *no_host_register(void) {
    return rt.host_register && rt.host_unregister ? NULL : "the stand-in exports no host registration";
}
static const char *no_module(void) { return "the stand-ins load no module"; }
static const char *no_blocking(void) { return "the stand-ins model captures on non-blocking streams only"; }

static res_t query_a(struct cell *c) { return rt.stream_query(c->a); }
static res_t sync_a(struct cell *c) { return rt.stream_sync(c->a); }
static res_t query_b(struct cell *c) { return rt.stream_query(c->b); }
static res_t sync_b(struct cell *c) { return rt.stream_sync(c->b); }
static res_t query_evA(struct cell *c) { return rt.event_query(c->evA); }
static res_t sync_evA(struct cell *c) { return rt.event_sync(c->evA); }
static res_t query_evB(struct cell *c) { return rt.event_query(c->evB); }
static res_t sync_evB(struct cell *c) { return rt.event_sync(c->evB); }
static res_t do_malloc(struct cell *c) {
    handle q = NULL;
    res_t r = rt.alloc(&q, BUFFER);
    if (r == 0)
        rt.release(q); /* outside the rules: nothing captures after the join */
    (void)c;
    return r;
}
static res_t do_free(struct cell *c) {
    res_t r = rt.release(c->p);
    c->p_freed = r == 0;
    return r;
}
static res_t do_memset(struct cell *c) { return rt.sync_memset(c->p, BUFFER); }
static char host_data[BUFFER];
static res_t do_memcpy(struct cell *c) { return rt.sync_memcpy(c->p, host_data, BUFFER); }
static res_t do_device_sync(struct cell *c) {
    (void)c;
    return rt.device_sync();
}
static res_t do_end(struct cell *c) {
    handle g = NULL;
    res_t r = rt.end(c->a, &g);
    if (g)
        rt.graph_destroy(g);
    return r;
}
static res_t do_host_alloc(struct cell *c) {
    handle q = NULL;
    res_t r = rt.host_alloc(&q, BUFFER);
    if (r == 0)
        rt.host_free(q);
    (void)c;
    return r;
}
static res_t do_host_free(struct cell *c) {
    res_t r = rt.host_free(c->h);
    c->h_freed = r == 0;
    return r;
}
static char pages[BUFFER] __attribute__((aligned(4096)));
static res_t do_host_register(struct cell *c) {
    res_t r = rt.host_register(pages, BUFFER);
    c->m_registered = r == 0;
    return r;
}
static res_t do_host_unregister(struct cell *c) {
    res_t r = rt.host_unregister(pages);
    c->m_registered = r != 0;
    return r;
}
static res_t do_legacy_launch(struct cell *c) {
    (void)c;
    return rt.launch(NULL); /* stream 0: the legacy stream in a default build */
}
static res_t unreachable(struct cell *c) {
    (void)c;
    return -1;
}

static const struct action actions[] = {
    {"query-capturing-stream", always, 0, query_a},
    {"sync-capturing-stream", always, 0, sync_a},
    {"query-other-stream", always, 0, query_b},
    {"sync-other-stream", always, 0, sync_b},
    {"query-captured-event", always, 1, query_evA},
    {"sync-captured-event", always, 1, sync_evA},
    {"query-uncaptured-event", always, 0, query_evB},
    {"sync-uncaptured-event", always, 0, sync_evB},
    {"malloc", always, 0, do_malloc},
    {"free", always, 0, do_free},
    {"sync-memset", no_memset, 0, do_memset},
    {"sync-memcpy", no_memcpy, 0, do_memcpy},
    {"device-sync", always, 0, do_device_sync},
    {"end-capture-other-thread", always, 0, do_end},
    {"host-alloc", no_host_alloc, 0, do_host_alloc},
    {"host-free", no_host_free, 0, do_host_free},
    {"host-register", no_host_register, 0, do_host_register},
    {"host-unregister", no_host_register, 0, do_host_unregister},
    {"module-unload", no_module, 0, unreachable},
    {"legacy-stream-launch", always, 0, do_legacy_launch},
    {"legacy-stream-launch-blocking-capture", no_blocking, 0, unreachable},
};

static void act(struct cell *c) {
    int prev = c->mode;
    if (c->mode != GLOBAL)
        rt.exchange(&prev);
    c->returns = c->act->call(c);
    if (c->mode != GLOBAL)
        rt.exchange(&prev);
}

static void *acting_thread(void *arg) {
    act(arg);
    return NULL;
}

static int check(const char *what, res_t r) {
    if (r != 0) {
        fprintf(stderr, "set-up: %s returned %d\n", what, r);
        exit(3);
    }
    return r;
}

static void run_cell(const struct action *a, int capture, int other, int mode) {
    struct cell c = {.act = a, .capture = capture, .other = other, .mode = mode};
    check("creating B", rt.stream_create(&c.b));
    check("creating A", rt.stream_create(&c.a));
    check("creating evB", rt.event_create(&c.evB));
    if (a->captured_event)
        check("creating evA", rt.event_create(&c.evA));
    check("allocating p", rt.alloc(&c.p, BUFFER));
    if (a->call == do_host_free)
        check("allocating h", rt.host_alloc(&c.h, BUFFER));
    if (a->call == do_host_unregister) {
        check("registering m", rt.host_register(pages, BUFFER));
        c.m_registered = 1;
    }
    check("recording evB on B", rt.event_record(c.evB, c.b));
    check("beginning the capture", rt.begin(c.a, capture));
    check("launching into the capture", rt.launch(c.a));
    if (a->captured_event)
        check("recording evA in the capture", rt.event_record(c.evA, c.a));
    if (other) {
        pthread_t t;
        if (pthread_create(&t, NULL, acting_thread, &c) != 0 || pthread_join(t, NULL) != 0) {
            fprintf(stderr, "the acting thread did not run\n");
            exit(3);
        }
    } else {
        act(&c);
    }
    handle g = NULL;
    res_t end = rt.end(c.a, &g);
    if (g)
        rt.graph_destroy(g);
    printf("cell %s %s %s %s %d %d\n", a->name, mode_names[capture], other ? "other" : "same", mode_names[mode], c.returns,
           end);
    /* Clean-up: the stand-ins drop a capture with its stream. */
    if (c.m_registered)
        rt.host_unregister(pages);
    if (c.h && !c.h_freed)
        rt.host_free(c.h);
    if (!c.p_freed)
        rt.release(c.p);
    rt.stream_destroy(c.a);
    rt.stream_destroy(c.b);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBRARY.so\n", argv[0]);
        return 2;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    bind();
    if (missing) {
        fprintf(stderr, "%s lacks %s\n", argv[1], missing);
        return 2;
    }
    for (size_t i = 0; i < sizeof actions / sizeof actions[0]; i++) {
        const struct action *a = &actions[i];
        const char *why = a->unsupported();
        if (why) {
            printf("unsupported %s %s\n", a->name, why);
            continue;
        }
        for (int capture = GLOBAL; capture <= RELAXED; capture++)
            for (int other = 0; other <= 1; other++) {
                if (a->call == do_end && !other)
                    continue;
                for (int mode = GLOBAL; mode <= RELAXED; mode++)
                    run_cell(a, capture, other, mode);
            }
    }
    return fflush(stdout) == 0 ? 0 : 3;
}
