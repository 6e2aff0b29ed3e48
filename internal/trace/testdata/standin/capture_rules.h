/*
 * The capture rules both stand-in runtimes apply (the H200's, which HIP's
 * rules table shares for what the stand-ins model): which captures are
 * active, and which of them a call invalidates. A stand-in defines its
 * stream struct (status, mode, nodes, owner) and STANDIN_STREAM as its
 * type, then includes this once; it locks mu around what it calls here.
 *
 * configs/rules/h200-cuda.yaml and configs/rules/hip.yaml are the rules;
 * this file and the checks of libcuda.c and libamdhip64.c follow them.
 * TestTraceStandInsFollowTheRulesTables (internal/rules) builds both
 * stand-ins, runs the capture-rules matrix against every call they export
 * and fails on any cell that differs from the table of its dialect.
 */
#ifndef STANDIN_CAPTURE_RULES_H
#define STANDIN_CAPTURE_RULES_H

#include <pthread.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { NONE, ACTIVE, INVALIDATED };
enum { GLOBAL, THREAD_LOCAL, RELAXED };
enum {
    OK = 0,
    INVALID_VALUE = 1,
    ILLEGAL_STATE = 401,
    UNSUPPORTED = 900,
    INVALIDATED_ERR = 901,
    IMPLICIT = 906,
    CAPTURED_EVENT = 907,
    WRONG_THREAD = 908
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
#define MAX 64
static STANDIN_STREAM *capturing[MAX]; /* Active or Invalidated, not yet ended */
static __thread int thread_mode = GLOBAL;

static pid_t me(void) { return (pid_t)syscall(SYS_gettid); }

static void add(STANDIN_STREAM *s) {
    for (int i = 0; i < MAX; i++)
        if (!capturing[i]) {
            capturing[i] = s;
            return;
        }
}

static void drop(STANDIN_STREAM *s) {
    for (int i = 0; i < MAX; i++)
        if (capturing[i] == s)
            capturing[i] = NULL;
}

/* Invalidates what the filter selects among the active captures; says
 * whether any was selected. filter: 0 all, 1 global-mode ones, 2 the
 * calling thread's non-relaxed ones. */
static int invalidate(int filter) {
    int hit = 0;
    for (int i = 0; i < MAX; i++) {
        STANDIN_STREAM *s = capturing[i];
        if (!s || s->status != ACTIVE)
            continue;
        if ((filter == 1 && s->mode != GLOBAL) || (filter == 2 && (s->owner != me() || s->mode == RELAXED)))
            continue;
        s->status = INVALIDATED;
        hit = 1;
    }
    return hit;
}

/* "Potentially unsafe" calls (allocation, free, a query of an idle
 * stream): a global-mode thread is refused while any global capture runs
 * or while it has a non-relaxed capture of its own; a thread-local one
 * only by its own. */
static int unsafe_call(void) {
    if (thread_mode == RELAXED)
        return 0;
    int hit = invalidate(2);
    if (thread_mode == GLOBAL)
        hit |= invalidate(1);
    return hit;
}

/* Pinned host memory follows the same rule in both runtimes: allocating,
 * freeing, registering and unregistering it (cuMemHostAlloc,
 * cuMemAllocHost, cuMemFreeHost, cuMemHostRegister, cuMemHostUnregister;
 * hipHostMalloc, hipHostAlloc, hipExtHostAlloc, hipHostFree, hipFreeHost,
 * hipHostRegister, hipHostUnregister: the host-alloc, host-free,
 * host-register and host-unregister rows). HIP's are read from its source;
 * CUDA's are expected, not yet measured on the H200. A stand-in that
 * exports one of these calls answers UNSUPPORTED when this says so. */
static inline int host_memory_call(void) { return unsafe_call(); }

/* Module unload (the module-unload rows) is expected to follow the same
 * rule on CUDA (cuModuleUnload; not yet measured); HIP's hipModuleUnload
 * makes no capture check. Work on the legacy or null stream (the
 * legacy-stream-launch rows) is never refused while only non-blocking
 * streams capture, which is all the stand-ins model. */
static inline int cuda_module_unload(void) { return unsafe_call(); }

#endif
