/*
 * The programs the trace tests run, one scenario per first argument,
 * written once over a few macros and built twice: against HIP
 * (libamdhip64) and, with -DUSE_CUDA, against the CUDA driver API
 * (libcuda.so.1). The functions named worker_* and query_own_stream are
 * exported (the program is linked with -rdynamic) so that the callers the
 * trace names are the program's own functions.
 *
 * Every scenario prints "<scenario>: ..." lines on stdout and one line on
 * stderr, so that the tests can hold the program's own output to what it
 * wrote.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../observer/mt_abi.h"

#define GLOBAL 0
#define THREAD_LOCAL 1
#define RELAXED 2

#ifdef USE_CUDA
typedef mt_CUstream stream_t;
typedef mt_CUevent event_t;
typedef mt_CUgraph graph_t;
typedef mt_CUresult status_t;
status_t cuInit(unsigned int);
status_t cuStreamCreate(mt_CUstream *, unsigned int);
status_t cuStreamDestroy_v2(mt_CUstream);
status_t cuEventCreate(mt_CUevent *, unsigned int);
status_t cuEventRecord(mt_CUevent, mt_CUstream);
status_t cuEventQuery(mt_CUevent);
status_t cuStreamQuery(mt_CUstream);
status_t cuCtxSynchronize(void);
status_t cuMemAlloc_v2(mt_CUdeviceptr *, size_t);
status_t cuMemFree_v2(mt_CUdeviceptr);
status_t cuLaunchKernel(mt_CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        mt_CUstream, void **, void **);
status_t cuStreamBeginCapture_v2(mt_CUstream, mt_CUstreamCaptureMode);
status_t cuStreamEndCapture(mt_CUstream, mt_CUgraph *);
status_t cuThreadExchangeStreamCaptureMode(mt_CUstreamCaptureMode *);
status_t cuGraphDestroy(mt_CUgraph);
status_t cuGraphCreate(mt_CUgraph *, unsigned int);
status_t cuStreamWaitEvent(mt_CUstream, mt_CUevent, unsigned int);
#define WAIT(s, e) cuStreamWaitEvent(s, e, 0)
status_t cuGraphAddKernelNode(mt_CUgraphNode *, mt_CUgraph, const mt_CUgraphNode *, size_t, const void *);
status_t cuGraphInstantiateWithFlags(mt_CUgraphExec *, mt_CUgraph, unsigned long long);
status_t cuGraphLaunch(mt_CUgraphExec, mt_CUstream);
status_t cuGraphExecDestroy(mt_CUgraphExec);
typedef mt_CUgraphExec exec_t;
typedef mt_CUgraphNode node_t;
#define GRAPH_CREATE(g) cuGraphCreate(g, 0)
#define GRAPH_ADD_KERNEL(n, g) cuGraphAddKernelNode(n, g, NULL, 0, NULL)
#define GRAPH_INSTANTIATE(e, g) cuGraphInstantiateWithFlags(e, g, 0)
#define GRAPH_LAUNCH(e, s) cuGraphLaunch(e, s)
#define GRAPH_EXEC_DESTROY(e) cuGraphExecDestroy(e)
#define INIT() cuInit(0)
#define STREAM(s) cuStreamCreate(s, 1)
#define EVENT(e) cuEventCreate(e, 0)
#define RECORD(e, s) cuEventRecord(e, s)
#define EVENT_QUERY(e) cuEventQuery(e)
#define QUERY(s) cuStreamQuery(s)
#define DEVICE_SYNC() cuCtxSynchronize()
#define LAUNCH(s) cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL)
#define BEGIN(s, mode) cuStreamBeginCapture_v2(s, mode)
#define END(s, g) cuStreamEndCapture(s, g)
#define EXCHANGE(m) cuThreadExchangeStreamCaptureMode(m)
#define GRAPH_DESTROY(g) cuGraphDestroy(g)
typedef mt_CUstreamCaptureMode mode_t_;
static status_t dev_malloc(void **p, size_t n) {
    mt_CUdeviceptr d = 0;
    status_t r = cuMemAlloc_v2(&d, n);
    *p = (void *)(uintptr_t)d;
    return r;
}
static status_t dev_free(void *p) { return cuMemFree_v2((mt_CUdeviceptr)(uintptr_t)p); }
#else
typedef mt_hipStream_t stream_t;
typedef mt_hipEvent_t event_t;
typedef mt_hipGraph_t graph_t;
typedef mt_hipError_t status_t;
status_t hipStreamCreate(mt_hipStream_t *);
status_t hipEventCreate(mt_hipEvent_t *);
status_t hipEventRecord(mt_hipEvent_t, mt_hipStream_t);
status_t hipEventQuery(mt_hipEvent_t);
status_t hipStreamQuery(mt_hipStream_t);
status_t hipDeviceSynchronize(void);
status_t hipMalloc(void **, size_t);
status_t hipFree(void *);
status_t hipLaunchKernel(const void *, mt_dim3, mt_dim3, void **, size_t, mt_hipStream_t);
status_t hipStreamBeginCapture(mt_hipStream_t, mt_hipStreamCaptureMode);
status_t hipStreamEndCapture(mt_hipStream_t, mt_hipGraph_t *);
status_t hipThreadExchangeStreamCaptureMode(mt_hipStreamCaptureMode *);
status_t hipGraphDestroy(mt_hipGraph_t);
status_t hipGraphCreate(mt_hipGraph_t *, unsigned int);
status_t hipStreamWaitEvent(mt_hipStream_t, mt_hipEvent_t, unsigned int);
#define WAIT(s, e) hipStreamWaitEvent(s, e, 0)
status_t hipGraphAddKernelNode(mt_hipGraphNode_t *, mt_hipGraph_t, const mt_hipGraphNode_t *, size_t, const void *);
status_t hipGraphInstantiateWithFlags(mt_hipGraphExec_t *, mt_hipGraph_t, unsigned long long);
status_t hipGraphLaunch(mt_hipGraphExec_t, mt_hipStream_t);
status_t hipGraphExecDestroy(mt_hipGraphExec_t);
typedef mt_hipGraphExec_t exec_t;
typedef mt_hipGraphNode_t node_t;
#define GRAPH_CREATE(g) hipGraphCreate(g, 0)
#define GRAPH_ADD_KERNEL(n, g) hipGraphAddKernelNode(n, g, NULL, 0, NULL)
#define GRAPH_INSTANTIATE(e, g) hipGraphInstantiateWithFlags(e, g, 0)
#define GRAPH_LAUNCH(e, s) hipGraphLaunch(e, s)
#define GRAPH_EXEC_DESTROY(e) hipGraphExecDestroy(e)
static void kernel(void) {}
#define INIT() ((void)0)
#define STREAM(s) hipStreamCreate(s)
#define EVENT(e) hipEventCreate(e)
#define RECORD(e, s) hipEventRecord(e, s)
#define EVENT_QUERY(e) hipEventQuery(e)
#define QUERY(s) hipStreamQuery(s)
#define DEVICE_SYNC() hipDeviceSynchronize()
#define LAUNCH(s) hipLaunchKernel((const void *)kernel, (mt_dim3){1, 1, 1}, (mt_dim3){1, 1, 1}, NULL, 0, s)
#define BEGIN(s, mode) hipStreamBeginCapture(s, mode)
#define END(s, g) hipStreamEndCapture(s, g)
#define EXCHANGE(m) hipThreadExchangeStreamCaptureMode(m)
#define GRAPH_DESTROY(g) hipGraphDestroy(g)
typedef mt_hipStreamCaptureMode mode_t_;
static status_t dev_malloc(void **p, size_t n) { return hipMalloc(p, n); }
static status_t dev_free(void *p) { return hipFree(p); }
#endif

#define EXPORTED __attribute__((visibility("default"), noinline))

static const char *scenario;
static stream_t a, b;

static void say(const char *what, status_t r) { printf("%s: %s %u\n", scenario, what, (unsigned)r); }

static void on_thread(void *(*fn)(void *)) {
    pthread_t t;
    pthread_create(&t, NULL, fn, NULL);
    pthread_join(t, NULL);
}

/* Named as PyTorch names its threads, so that the trace can name it. */
EXPORTED void *worker_synchronize(void *unused) {
    (void)unused;
    pthread_setname_np(pthread_self(), "syncer");
    say("device synchronize", DEVICE_SYNC());
    return NULL;
}

EXPORTED void *worker_query(void *unused) {
    (void)unused;
    say("query of another stream", QUERY(b));
    return NULL;
}

/* The relaxed-mode guard around an allocation. */
EXPORTED void *worker_malloc_relaxed(void *unused) {
    (void)unused;
    mode_t_ mode = RELAXED;
    EXCHANGE(&mode);
    void *p = NULL;
    say("relaxed malloc", dev_malloc(&p, 64));
    say("relaxed free", dev_free(p));
    EXCHANGE(&mode);
    return NULL;
}

static graph_t end_graph;
EXPORTED void *worker_end(void *unused) {
    (void)unused;
    say("end from another thread", END(a, &end_graph));
    return NULL;
}

EXPORTED status_t query_own_stream(void) { return QUERY(a); }

/* A deep stack: more callers than one record holds. */
EXPORTED status_t descend_and_query(int depth) {
    if (depth > 0) {
        status_t r = descend_and_query(depth - 1);
        return r; /* not a tail call: every frame stays */
    }
    return QUERY(a);
}

static void end_capture(void) {
    graph_t g = NULL;
    status_t r = END(a, &g);
    say("end capture", r);
    if (g)
        GRAPH_DESTROY(g);
}

static void sync_other_thread(void) {
    say("begin", BEGIN(a, GLOBAL));
    say("launch", LAUNCH(a));
    on_thread(worker_synchronize);
    say("launch after", LAUNCH(a));
    end_capture();
}

static void query_capturing(void) {
    say("begin", BEGIN(a, GLOBAL));
    say("launch", LAUNCH(a));
    say("query own stream", query_own_stream());
    end_capture();
}

/* A graph built node by node, instantiated and launched twice, with no
 * capture: a graph record for its instantiation and one for its first
 * launch. */
static void graph_without_capture(void) {
    graph_t g = NULL;
    node_t n;
    exec_t e = NULL;
    say("graph create", GRAPH_CREATE(&g));
    for (int i = 0; i < 3; i++)
        GRAPH_ADD_KERNEL(&n, g);
    say("instantiate", GRAPH_INSTANTIATE(&e, g));
    say("launch graph", GRAPH_LAUNCH(e, a));
    say("launch graph again", GRAPH_LAUNCH(e, a));
    GRAPH_EXEC_DESTROY(e);
    GRAPH_DESTROY(g);
}

/* A captured graph of two kernels, instantiated and launched three times. */
static void graph_captured(void) {
    graph_t g = NULL;
    exec_t e = NULL;
    say("begin", BEGIN(a, GLOBAL));
    LAUNCH(a);
    LAUNCH(a);
    say("end capture", END(a, &g));
    say("instantiate", GRAPH_INSTANTIATE(&e, g));
    for (int i = 0; i < 3; i++)
        GRAPH_LAUNCH(e, b);
    GRAPH_EXEC_DESTROY(e);
    GRAPH_DESTROY(g);
}

/* The program's own error check after a refused call: the SGLang and
 * hipBLASLt pattern of ending at once. how: abort, exit or kill. */
EXPORTED void refuse_then_end(const char *how) {
    say("begin", BEGIN(a, GLOBAL));
    status_t r = query_own_stream();
    say("query own stream", r);
    fflush(stdout);
    if (r != 0) {
        if (!strcmp(how, "abort"))
            abort();
        if (!strcmp(how, "kill"))
            kill(getpid(), SIGKILL);
        exit(1);
    }
}

static void clean(void) {
    say("begin", BEGIN(a, GLOBAL));
    for (int i = 0; i < 3; i++)
        LAUNCH(a);
    end_capture();
}

/* Launches outside any capture around one clean capture: the observer's
 * cost outside captures (no callback at all where CUPTI can turn them on
 * one by one), and every call of the capture still seen. */
static void launches_around_a_capture(void) {
    for (int i = 0; i < 1000; i++)
        LAUNCH(a);
    clean();
    for (int i = 0; i < 1000; i++)
        LAUNCH(a);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
        return 2;
    }
    scenario = argv[1];
    INIT();
    STREAM(&a);
    STREAM(&b);
    fprintf(stderr, "stderr: %s\n", scenario);
    if (!strcmp(scenario, "sync-other-thread")) {
        sync_other_thread();
    } else if (!strcmp(scenario, "query-capturing")) {
        query_capturing();
    } else if (!strcmp(scenario, "relaxed-other-query")) {
        say("begin", BEGIN(a, RELAXED));
        say("launch", LAUNCH(a));
        on_thread(worker_query);
        end_capture();
    } else if (!strcmp(scenario, "relaxed-thread-malloc")) {
        say("begin", BEGIN(a, GLOBAL));
        on_thread(worker_malloc_relaxed);
        end_capture();
    } else if (!strcmp(scenario, "captured-event-query")) {
        event_t e;
        EVENT(&e);
        say("begin", BEGIN(a, GLOBAL));
        say("record", RECORD(e, a));
        say("query captured event", EVENT_QUERY(e));
        end_capture();
    } else if (!strcmp(scenario, "wrong-thread-end")) {
        say("begin", BEGIN(a, GLOBAL));
        on_thread(worker_end);
        end_capture();
    } else if (!strcmp(scenario, "deep")) {
        say("begin", BEGIN(a, GLOBAL));
        say("deep query", descend_and_query(100));
        end_capture();
    } else if (!strcmp(scenario, "clean")) {
        clean();
    } else if (!strcmp(scenario, "launches-around-a-capture")) {
        launches_around_a_capture();
    } else if (!strcmp(scenario, "empty-capture")) {
        say("begin", BEGIN(a, GLOBAL));
        end_capture();
    } else if (!strcmp(scenario, "launch-outside")) {
        /* b never captures: its launch is work outside the capture. */
        say("begin", BEGIN(a, GLOBAL));
        say("launch", LAUNCH(a));
        say("launch into another stream", LAUNCH(b));
        end_capture();
    } else if (!strcmp(scenario, "launch-joined")) {
        /* b joins a's capture by waiting on an event recorded in it (a
         * fork), works, and a waits on b (the join): b's launch is inside
         * the capture, though b is not the stream it began on. */
        event_t fork_, join_;
        EVENT(&fork_);
        EVENT(&join_);
        say("begin", BEGIN(a, GLOBAL));
        RECORD(fork_, a);
        say("b joins", WAIT(b, fork_));
        say("launch into the joined stream", LAUNCH(b));
        RECORD(join_, b);
        say("a waits on b", WAIT(a, join_));
        end_capture();
    } else if (!strcmp(scenario, "graph-no-capture")) {
        graph_without_capture();
    } else if (!strcmp(scenario, "graph-captured")) {
        graph_captured();
    } else if (!strcmp(scenario, "refuse-abort") || !strcmp(scenario, "refuse-exit") ||
               !strcmp(scenario, "refuse-kill")) {
        refuse_then_end(scenario + strlen("refuse-"));
    } else if (!strcmp(scenario, "two-captures")) {
        /* A second capture begins while the first is active: what the
         * observer asks the runtime about b's device is not a call of a's. */
        graph_t g = NULL;
        say("begin", BEGIN(a, GLOBAL));
        say("begin b", BEGIN(b, GLOBAL));
        LAUNCH(a);
        LAUNCH(b);
        say("end b", END(b, &g));
        GRAPH_DESTROY(g);
        end_capture();
    } else if (!strcmp(scenario, "exit3")) {
        clean();
        return 3;
    } else if (!strcmp(scenario, "never-end")) {
        say("begin", BEGIN(a, GLOBAL));
        LAUNCH(a);
    } else if (!strcmp(scenario, "none")) {
        LAUNCH(a);
        say("query", QUERY(a));
    } else if (!strcmp(scenario, "crash")) {
        say("begin", BEGIN(a, GLOBAL));
        say("query own stream", query_own_stream());
        fflush(stdout);
        raise(SIGSEGV);
    } else if (!strcmp(scenario, "crash-after")) {
        clean();
        fflush(stdout);
        raise(SIGSEGV);
    } else if (!strcmp(scenario, "hang")) {
        say("begin", BEGIN(a, GLOBAL));
        fflush(stdout);
        for (;;)
            pause();
    } else if (!strcmp(scenario, "fork-hang")) {
        /* A capture that never ends, and a child that outlives nothing on
         * its own: both wait to be killed. The child's pid goes to stdout
         * and, when a file is named, into it. */
        say("begin", BEGIN(a, GLOBAL));
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            for (;;)
                pause();
        }
        if (argc > 2) {
            FILE *f = fopen(argv[2], "w");
            if (f) {
                fprintf(f, "%d\n", (int)child);
                fclose(f);
            }
        }
        printf("%s: child %d of %d\n", scenario, (int)child, (int)getpid());
        fflush(stdout);
        for (;;)
            pause();
    } else if (!strcmp(scenario, "fork")) {
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            scenario = "fork-child";
            sync_other_thread();
            fflush(stdout);
            _exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        say("child exited", (status_t)WEXITSTATUS(status));
    } else if (!strcmp(scenario, "exec")) {
        fflush(stdout);
        execl("/proc/self/exe", argv[0], "query-capturing", (char *)NULL);
        perror("exec");
        return 1;
    } else if (!strcmp(scenario, "closefds") && argc > 2) {
        /* Close everything inherited or opened so far, then open a file
         * of our own, which takes the lowest free number: the trace must
         * never write into it. */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        query_capturing();
        struct stat st;
        fstat(fd, &st);
        printf("%s: own file fd %d size %lld\n", scenario, fd, (long long)st.st_size);
    } else if (!strcmp(scenario, "closefds-tcp")) {
        /* The same with a connected TCP socket of the program's on the
         * observer's old number: a send there would reach the program's
         * peer. */
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        int listener = socket(AF_INET, SOCK_STREAM, 0), client = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof addr;
        if (listener < 0 || client < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) ||
            listen(listener, 1) || getsockname(listener, (struct sockaddr *)&addr, &len) ||
            connect(client, (struct sockaddr *)&addr, sizeof addr)) {
            printf("%s: no loopback TCP\n", scenario);
            return 0;
        }
        int peer = accept(listener, NULL, NULL);
        dup2(client, listener); /* the client now holds the lowest number too */
        query_capturing();
        char buf[8192];
        ssize_t n = recv(peer, buf, sizeof buf, MSG_DONTWAIT);
        printf("%s: own socket fd %d, peer received %zd\n", scenario, listener, n < 0 ? 0 : n);
    } else if (!strcmp(scenario, "echo")) {
        char buf[4096];
        ssize_t n;
        while ((n = read(0, buf, sizeof buf)) > 0)
            fwrite(buf, 1, (size_t)n, stdout);
        clean();
    } else {
        fprintf(stderr, "unknown scenario %s\n", scenario);
        return 2;
    }
    return 0;
}
