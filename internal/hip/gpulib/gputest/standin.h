/*
 * What miotool's C stand-ins for libcuda and libamdhip64 share: capture
 * modes and states, the registry of live streams, the guard both runtimes
 * apply to a call that is not work on a capturing stream, the per-thread
 * capture-mode exchange, and the host versions of the kernels vadd and inc.
 *
 * A stand-in defines struct stream before including this file, with the
 * capture fields this file reads:
 *
 *     int status, mode;      ST_* and MODE_* below
 *     int listed;            in the runtime's capture lists: Begin to End
 *     unsigned long long id;
 *     pthread_t owner;       the thread that began the capture
 *
 * The tests build the stand-ins with this file's folder on the include path.
 */
#ifndef MIOTOOL_STANDIN_H
#define MIOTOOL_STANDIN_H

#include <pthread.h>
#include <stdint.h>

enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };
enum { ST_NONE = 0, ST_ACTIVE = 1, ST_INVALIDATED = 2 };

/* plain maps the legacy stream's handle (CU_STREAM_LEGACY, hipStreamLegacy:
 * 1) to the null stream, which the stand-ins model as "no stream": work on
 * it runs at once and it never captures. */
static inline struct stream *plain(struct stream *s) { return s == (struct stream *)1 ? NULL : s; }

/* g_mu guards the registry and every stream's capture fields. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int t_mode = MODE_GLOBAL;

#define MAX_STREAMS 1024
static struct stream *g_streams[MAX_STREAMS];

static inline void track(struct stream *s) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (!g_streams[i]) { g_streams[i] = s; break; }
    pthread_mutex_unlock(&g_mu);
}

static inline void untrack(struct stream *s) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_STREAMS; i++)
        if (g_streams[i] == s) g_streams[i] = NULL;
    pthread_mutex_unlock(&g_mu);
}

/* tracked_locked reports whether s is a live stream; g_mu is held. */
static inline int tracked_locked(const struct stream *s) {
    for (int i = 0; i < MAX_STREAMS; i++)
        if (g_streams[i] == s) return 1;
    return 0;
}

/* capture_guard is the rule for a call that is not work on a capturing
 * stream (an allocation, a query of an idle stream): a thread in relaxed
 * mode is never refused; one in global mode is refused while any global
 * capture exists; any other is refused while it has a non-relaxed capture
 * of its own. A refusal (900) invalidates the captures it names. */
static inline int capture_guard(void) {
    if (t_mode == MODE_RELAXED) return 0;
    int r = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < MAX_STREAMS; i++) {
        struct stream *s = g_streams[i];
        if (!s || !s->listed || s->mode == MODE_RELAXED) continue;
        int own = pthread_equal(s->owner, pthread_self());
        if (own || (t_mode == MODE_GLOBAL && s->mode == MODE_GLOBAL)) {
            s->status = ST_INVALIDATED;
            r = 900;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* exchange_mode sets the calling thread's capture mode to *mode and
 * returns the previous one there; a mode outside the three is refused. */
static inline int exchange_mode(int *mode) {
    if (!mode || *mode < 0 || *mode > 2) return 1;
    int prev = t_mode;
    t_mode = *mode;
    *mode = prev;
    return 0;
}

/* host_kernel does the work of kernel 1 (vadd: a, b, c, n) or 2 (inc: x,
 * n) on the host, each argument as the low bytes of its slot; any other
 * kernel does nothing. */
static inline void host_kernel(int kernel, const uint64_t *args) {
    if (kernel == 1) {
        float *a = (float *)(uintptr_t)args[0], *b = (float *)(uintptr_t)args[1], *c = (float *)(uintptr_t)args[2];
        int n = (int)(int32_t)args[3];
        for (int i = 0; i < n; i++) c[i] = a[i] + b[i];
    } else if (kernel == 2) {
        float *x = (float *)(uintptr_t)args[0];
        int n = (int)(int32_t)args[1];
        for (int i = 0; i < n; i++) x[i] += 1.0f;
    }
}

#endif
