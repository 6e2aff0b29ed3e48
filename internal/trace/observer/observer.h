/*
 * What the observer's parts share: observer.c owns the event transport,
 * the record format, the table of active captures and the callers' stacks;
 * cuda.c is the CUPTI injection library and hip.c the HIP interposer. They
 * only observe: every call goes on to the runtime unchanged, what was seen
 * goes to miotool, which does all the analysis, and the only calls of their
 * own are the read-only queries that name a capture's device (which device,
 * its name, architecture and compute units), made at a capture's begin.
 */
#ifndef MT_OBSERVER_H
#define MT_OBSERVER_H

#include <stdatomic.h>
#include <stdint.h>

#include "mt_abi.h"

#define MT_EXPORT __attribute__((visibility("default")))
/* Thread-locals in the initial-exec model: no allocation on first use in a
 * thread, so reading them is safe anywhere (the CUDA path is dlopened, and
 * glibc keeps static TLS room for a few words of such a library). */
#define MT_TLS __thread __attribute__((tls_model("initial-exec")))

enum mt_api { MT_API_CUDA = 0, MT_API_HIP = 1 };

/* How many captures are active in this process, in either runtime. Zero
 * means a call costs one relaxed load of this counter. */
extern atomic_int mt_active;

static inline int mt_any_capture(void) { return atomic_load_explicit(&mt_active, memory_order_relaxed) > 0; }

/* Each runtime's per-thread capture interaction mode, as the thread last
 * exchanged it (global until it does). */
extern MT_TLS unsigned mt_cuda_thread_mode;
extern MT_TLS unsigned mt_hip_thread_mode;

/* Where a capture-related result is a refusal worth the callers' stack. */
static inline int mt_refused(unsigned result) { return result >= 900 && result <= 908; }

void mt_init_process(void);

/* The device a capture's thread works on, as its runtime names it.
 * ordinal < 0: the runtime did not say; cus 0 and arch "" likewise. */
struct mt_device {
    int ordinal;
    int cus;
    char arch[64];
    char name[128];
};
/* A runtime's query of the calling thread's device: the ordinal only, or
 * (full) its name, architecture and compute units too. */
typedef void (*mt_device_fn)(struct mt_device *d, int full);

/* Set while the observer itself calls the runtime (a device query): those
 * calls are the observer's, never the program's, and are not reported. */
extern MT_TLS int mt_own_call;

/* A capture began (or failed to): always reported, with the device of the
 * calling thread (device: its runtime's query, or NULL), described once per
 * process; a successful begin makes the stream active, so calls are
 * reported from then on. */
void mt_begin(int api, const char *name, uint64_t stream, unsigned mode, unsigned result, mt_device_fn device);
/* A capture ended (or failed to): always reported. keep leaves the capture
 * active (HIP's end from the wrong thread). */
void mt_end(int api, const char *name, uint64_t stream, unsigned result, int keep);
/* A stream was destroyed: a capture on it is gone. */
void mt_stream_gone(int api, uint64_t stream);
/* A call made while some capture is active: name, the stream and event it
 * names (0: none), its result, the thread's mode. callers: send the native
 * callers (a refused call always has them). */
void mt_call(int api, const char *name, uint64_t stream, uint64_t event, unsigned result, unsigned thread_mode,
             int callers);
/* Something miotool should know about the observer itself. */
void mt_note(const char *topic, const char *status, const char *text);

#endif
