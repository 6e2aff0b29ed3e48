/*
 * What the observer's parts share: observer.c owns the event transport,
 * the record format, the table of active captures and the callers' stacks;
 * python.c reads the calling thread's Python stack, crash.c is the crash
 * handler; cuda.c is the CUPTI injection library and hip.c the HIP
 * interposer. They only observe: every call goes on to the runtime
 * unchanged, what was seen goes to miotool, which does all the analysis,
 * and the only calls of their own are read-only queries: the device a
 * capture began on (at its begin), a captured graph's node count (at its
 * end and at an instantiation), and whether a stream captures (a launch
 * into a stream that is no active capture's own, while a capture is
 * active).
 */
#ifndef MT_OBSERVER_H
#define MT_OBSERVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "mt_abi.h"

#define MT_EXPORT __attribute__((visibility("default")))
/* Thread-locals in the initial-exec model: no allocation on first use in a
 * thread, so reading them is safe anywhere (the CUDA path is dlopened, and
 * glibc keeps static TLS room for a few words of such a library). */
#define MT_TLS __thread __attribute__((tls_model("initial-exec")))

/* The record format's version: miotool reads only records of its own
 * version (events.go's observerWire), and checks an observer library's
 * marker for it before a run. */
#define MT_WIRE "2"
/* Which source the library was built from: miotool passes the SHA-256 of
 * the embedded source when it builds it; a build by hand says "unknown". */
#ifndef MT_SOURCE_ID
#define MT_SOURCE_ID "unknown"
#endif

enum mt_api { MT_API_CUDA = 0, MT_API_HIP = 1 };

/* How many captures are active in this process, in either runtime. Zero
 * means a call costs one relaxed load of this counter. */
extern atomic_int mt_active;

static inline int mt_any_capture(void) { return atomic_load_explicit(&mt_active, memory_order_relaxed) > 0; }

/* Whether this copy of the observer reports trace records: a trace asked
 * for them (MIOTOOL_TRACE_SOCKET), and no other copy of the observer was
 * loaded into the process first (a nested trace's). */
extern int mt_tracing;
/* Another copy of the observer was loaded into the process first. */
extern int mt_duplicate;

/* Each runtime's per-thread capture interaction mode, as the thread last
 * exchanged it (global until it does). */
extern MT_TLS unsigned mt_cuda_thread_mode;
extern MT_TLS unsigned mt_hip_thread_mode;

/* Where a capture-related result is a refusal worth the callers' stack. */
static inline int mt_refused(unsigned result) { return result >= 900 && result <= 908; }

void mt_init_process(void);

/* ---- records ---- */

/* A record is one datagram. Unix datagram sockets take far more than this;
 * it bounds the stack a record takes in the program's thread. */
#define MT_RECORD_MAX 12000

struct mt_rec {
    char b[MT_RECORD_MAX];
    size_t n;
};

void mt_start(struct mt_rec *r, const char *kind, unsigned long long t);
void mt_put_bytes(struct mt_rec *r, const char *s, size_t len);
/* A field: a tab, then at most max bytes of s, control bytes as '?'. */
void mt_put_str(struct mt_rec *r, const char *s, size_t max);
void mt_put_u(struct mt_rec *r, unsigned long long v);
void mt_put_i(struct mt_rec *r, long long v);
void mt_put_x(struct mt_rec *r, unsigned long long v);
size_t mt_fmt_u(char *out, unsigned long long v, int hex);
unsigned long long mt_now(void);
/* Sends to the trace's socket(s). */
void mt_send(struct mt_rec *r);
/* Room left in the record for fields. */
static inline size_t mt_room(const struct mt_rec *r) { return sizeof r->b - 2 - r->n; }

/* The sections that close a record that names its thread (begin, end, a
 * call with callers, a crash), in this order:
 *   t NAME                          the thread's OS name
 *   p STATE WHY NAME VERSION N OMITTED (FILE LINE FUNCTION)*N
 *                                   its Python stack (python.c), absent
 *                                   in a process without CPython
 *   c (MODULE SYMBOL OFFSET)* [+N]  its native callers, innermost first:
 *                                   the rest of the record
 * signal_safe: only what is async-signal-safe (the crash handler). */
void mt_put_thread(struct mt_rec *r, int signal_safe);
void mt_put_callers(struct mt_rec *r);
/* Native callers from pcs (a crash's), by /proc/self/maps, which takes no
 * lock of the dynamic loader. */
void mt_put_callers_from(struct mt_rec *r, void *const *pcs, int n);

/* python.c: the p section, when the process runs CPython. */
void mt_python_resolve(void);
void mt_put_python(struct mt_rec *r, int signal_safe);

/* crash.c: installs the crash handler when MIOTOOL_CRASH_SOCKET asks. */
void mt_crash_init(void);

/* Reads n bytes at src without faulting on a bad address: 0 when read. */
int mt_peek(void *dst, const void *src, size_t n);

/* ---- events ---- */

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

/* Set while the observer itself calls the runtime (a device or graph
 * query): those calls are the observer's, never the program's, and are
 * not reported. */
extern MT_TLS int mt_own_call;

/* A capture began (or failed to): always reported, with the device of the
 * calling thread (device: its runtime's query, or NULL), described once per
 * process; a successful begin makes the stream active, so calls are
 * reported from then on. */
void mt_begin(int api, const char *name, uint64_t stream, unsigned mode, unsigned result, mt_device_fn device);
/* A capture ended (or failed to): always reported, with the graph it made
 * (0: none) and that graph's node count (-1: unknown). keep leaves the
 * capture active (HIP's end from the wrong thread). */
void mt_end(int api, const char *name, uint64_t stream, unsigned result, int keep, uint64_t graph, long nodes);
/* A stream was destroyed: a capture on it is gone. */
void mt_stream_gone(int api, uint64_t stream);
/* Whether stream is an active capture's own stream (the one it began on). */
int mt_capture_origin(int api, uint64_t stream);
/* A call made while some capture is active: name, the stream and event it
 * names (0: none), its result, the thread's mode. callers: send the
 * thread's name, Python stack and native callers (a refused call always
 * has them). outside: the call enqueued work into a stream that was not
 * capturing. */
void mt_call(int api, const char *name, uint64_t stream, uint64_t event, unsigned result, unsigned thread_mode,
             int callers, int outside);
/* A graph was instantiated (exec made from graph) or launched (exec into
 * stream): reported whether or not a capture is active, a launch only the
 * first time each executable graph is launched. nodes: -1 unknown. */
void mt_graph_instantiated(int api, const char *name, uint64_t graph, uint64_t exec, unsigned result, long nodes);
void mt_graph_launched(int api, const char *name, uint64_t exec, uint64_t stream, unsigned result);
/* Whether exec's launch is yet to be reported; cheap, for the hot path. */
int mt_graph_launch_new(int api, uint64_t exec);
/* Something miotool should know about the observer itself. */
void mt_note(const char *topic, const char *status, const char *text);

#endif
