/*
 * What drive.py cannot do from Python: a native thread (no Python thread
 * state) that makes a refused call, and the deadlock an observer that
 * waited for the GIL would fall into.
 *
 * The deadlock: thread B, in a ctypes.CDLL call (GIL released), holds
 * mutex m across a refused call; the main thread, in a ctypes.PyDLL call
 * (GIL held), blocks on m. Had the observer waited for the GIL inside B's
 * refused call, neither would ever go on.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

typedef unsigned int CUresult;
CUresult cuCtxSynchronize(void);

#define EXPORT __attribute__((visibility("default"), noinline))

static void nap(void) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

static CUresult native_result;

static void *native_thread(void *unused) {
    (void)unused;
    pthread_setname_np(pthread_self(), "native-sync");
    native_result = cuCtxSynchronize();
    return NULL;
}

/* A refused call from a thread Python never saw. */
EXPORT CUresult native_refuse(void) {
    pthread_t t;
    pthread_create(&t, NULL, native_thread, NULL);
    pthread_join(t, NULL);
    return native_result;
}

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static atomic_int locked, waiting;

/* Thread B, GIL released: holds m across the refused call, made once the
 * main thread holds the GIL and is about to block on m. */
EXPORT CUresult holder_refuse(void) {
    pthread_mutex_lock(&m);
    atomic_store(&locked, 1);
    while (!atomic_load(&waiting))
        nap();
    CUresult r = cuCtxSynchronize();
    /* Two more calls the capture's records carry a stack for (it is
     * invalidated: they succeed), still under m: the naming thread's GIL
     * wait is paid once, not once per record. */
    (void)cuCtxSynchronize();
    (void)cuCtxSynchronize();
    pthread_mutex_unlock(&m);
    return r;
}

/* The main thread, GIL released: until B holds m. */
EXPORT void wait_locked(void) {
    while (!atomic_load(&locked))
        nap();
}

/* The main thread, GIL held (PyDLL): blocks on m. */
EXPORT void gil_waiter(void) {
    atomic_store(&waiting, 1);
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
}
