/*
 * The capture rules both stand-in runtimes apply (the H200's, which HIP's
 * rules table shares for what the stand-ins model): which captures are
 * active, and which of them a call invalidates. A stand-in defines its
 * stream struct (status, mode, nodes, owner) and STANDIN_STREAM as its
 * type, then includes this once; it locks mu around what it calls here.
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

#endif
