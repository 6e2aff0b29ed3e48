/*
 * The observer's core: how events reach miotool, what a record looks like,
 * which captures are active in this process, and who called.
 *
 * Transport: each process sends each record as one datagram to the Unix
 * datagram socket whose path is in MIOTOOL_TRACE_SOCKET (a trace inside a
 * trace lists its own first, then the outer one's, separated by ':', and
 * each record goes to every one of them: both traces see the program). A
 * socket was chosen over a FIFO or an inherited descriptor because it
 * survives what real programs do:
 *   - a fork: the child shares the unconnected socket and sends as itself;
 *   - an exec: the environment carries the path and the new image's
 *     observer opens its own socket;
 *   - a program that closes the descriptors it inherited, or ours later: an
 *     inherited descriptor would be gone for good, while a socket of our own
 *     is made again on the next record. Before each send the descriptor is
 *     checked to still be that socket, so a number the program reused for a
 *     file of its own is never written to;
 *   - a program that dies right after a call: each record is sent before
 *     the call returns to the program, and a datagram, once sent, waits in
 *     miotool's queue whatever becomes of its sender.
 * A datagram is delivered whole and alone (no record interleaves with
 * another thread's or process's), sendto with MSG_NOSIGNAL never raises
 * SIGPIPE in the program when miotool has gone, and a full receive queue
 * makes the sender wait rather than lose the record.
 *
 * Record: one line of tab-separated fields,
 *   MT1 kind pid tid time-ns fields...
 * with kind hello, fork, note, device, begin, end, gone, call, graph or crash
 * (see the Go reader, events.go); begin, end, crash and the call records
 * that carry callers close with the sections observer.h describes: the
 * thread's name, its Python stack, its native callers.
 *
 * Everything that runs while the program makes calls allocates nothing: a
 * stack buffer, atomics, and the system calls clock_gettime, gettid,
 * prctl, fstat and sendto. The unwinder is loaded at start-up so that
 * backtrace() does not load it in a callback.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "observer.h"

#define MT_MAX_FRAMES 64 /* native callers a record keeps */
#define MT_MAX_DEPTH 256 /* frames walked, to count the ones not kept */
#define MT_MAX_CAPTURES 256
#define MT_MAX_SOCKETS 4

/* What miotool looks for in a library before it runs a program with it (an
 * allocated section survives strip), and what a second copy of the
 * observer in the same process finds first (see mt_init_process). The
 * exported name is an alias: inside this library, the exported name would
 * be bound to the first copy's, the hidden one is this copy's own. */
static const char mt_marker[] __attribute__((section(".miotool_observer"), used)) =
    "miotool-observer wire=" MT_WIRE " source=" MT_SOURCE_ID;
extern const char miotool_observer[sizeof mt_marker] __attribute__((alias("mt_marker"), visibility("default")));

atomic_int mt_active;
int mt_tracing;
int mt_duplicate;
MT_TLS unsigned mt_cuda_thread_mode;
MT_TLS unsigned mt_hip_thread_mode;

static atomic_int mt_inited;
static struct sockaddr_un mt_addr[MT_MAX_SOCKETS];
static socklen_t mt_addr_len[MT_MAX_SOCKETS];
static int mt_naddr;
/* The socket as (inode low 32 bits) << 32 | descriptor; 0 when none. */
static _Atomic uint64_t mt_sock;
static pid_t mt_pid;
static MT_TLS pid_t mt_tid;
static const void *mt_self_base; /* where this library is mapped */
static const void *mt_main_base; /* where the program's executable is mapped */
static char mt_exe[1024];        /* the program's executable, from /proc/self/exe */

/* ---- records ---- */

void mt_put_bytes(struct mt_rec *r, const char *s, size_t len) {
    if (r->n + len > sizeof r->b - 2) /* room for the newline */
        len = sizeof r->b - 2 - r->n;
    memcpy(r->b + r->n, s, len);
    r->n += len;
}

void mt_put_str(struct mt_rec *r, const char *s, size_t max) {
    mt_put_bytes(r, "\t", 1);
    for (size_t i = 0; s && s[i] && i < max && r->n < sizeof r->b - 2; i++) {
        unsigned char c = (unsigned char)s[i];
        r->b[r->n++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
}

size_t mt_fmt_u(char *out, unsigned long long v, int hex) {
    char tmp[24];
    size_t n = 0, k = 0;
    do {
        unsigned d = (unsigned)(hex ? v & 15 : v % 10);
        tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v = hex ? v >> 4 : v / 10;
    } while (v);
    if (hex) {
        out[k++] = '0';
        out[k++] = 'x';
    }
    while (n)
        out[k++] = tmp[--n];
    return k;
}

void mt_put_u(struct mt_rec *r, unsigned long long v) {
    char buf[24];
    buf[0] = '\t';
    mt_put_bytes(r, buf, 1 + mt_fmt_u(buf + 1, v, 0));
}

void mt_put_x(struct mt_rec *r, unsigned long long v) {
    char buf[24];
    buf[0] = '\t';
    mt_put_bytes(r, buf, 1 + mt_fmt_u(buf + 1, v, 1));
}

void mt_put_i(struct mt_rec *r, long long v) {
    if (v >= 0) {
        mt_put_u(r, (unsigned long long)v);
        return;
    }
    char buf[24];
    buf[0] = '\t';
    buf[1] = '-';
    mt_put_bytes(r, buf, 2 + mt_fmt_u(buf + 2, (unsigned long long)(-(v + 1)) + 1, 0));
}

static pid_t mt_gettid(void) {
    if (mt_tid == 0)
        mt_tid = (pid_t)syscall(SYS_gettid);
    return mt_tid;
}

unsigned long long mt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

void mt_start(struct mt_rec *r, const char *kind, unsigned long long t) {
    r->n = 0;
    mt_put_bytes(r, "MT1", 3);
    mt_put_str(r, kind, 16);
    /* The pid as the kernel says now: a crash handler may run in a child
     * forked without the atfork handlers (vfork, clone). */
    mt_put_u(r, (unsigned long long)(mt_pid ? mt_pid : getpid()));
    mt_put_u(r, (unsigned long long)mt_gettid());
    mt_put_u(r, t);
}

static const char *mt_api_name(int api) { return api == MT_API_HIP ? "hip" : "cuda"; }

/* ---- transport ---- */

static uint64_t mt_sock_key(int fd, const struct stat *st) {
    return ((uint64_t)(uint32_t)st->st_ino << 32) | (uint32_t)fd;
}

/* The socket, made anew when there is none or the program closed it. */
static int mt_socket(void) {
    for (;;) {
        uint64_t key = atomic_load_explicit(&mt_sock, memory_order_acquire);
        if (key) {
            int fd = (int)(uint32_t)key;
            struct stat st;
            if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && mt_sock_key(fd, &st) == key)
                return fd;
            /* Closed, or the number now names something of the program's:
             * forget it without touching it. */
            atomic_compare_exchange_strong(&mt_sock, &key, 0);
        }
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        struct stat st;
        if (fstat(fd, &st) != 0) {
            close(fd);
            return -1;
        }
        uint64_t mine = mt_sock_key(fd, &st), none = 0;
        if (atomic_compare_exchange_strong(&mt_sock, &none, mine))
            return fd;
        close(fd); /* another thread made one first: use it */
    }
}

/* Sends the record, newline-terminated, to addr. patience: how many 10 ms
 * waits a full queue gets before the record is given up (-1: waits as
 * long as it takes). */
static void mt_send_to(struct mt_rec *r, const struct sockaddr_un *addr, socklen_t len, int patience) {
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = mt_socket();
        if (fd < 0)
            return;
        ssize_t w;
        int waited = 0;
        for (;;) {
            w = sendto(fd, r->b, r->n, MSG_NOSIGNAL | (patience >= 0 ? MSG_DONTWAIT : 0), (const struct sockaddr *)addr,
                       len);
            if (w >= 0)
                break;
            if (errno == EINTR)
                continue;
            if ((errno != EAGAIN && errno != EWOULDBLOCK) || patience < 0 || waited++ >= patience)
                break;
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        if (w >= 0 || (errno != EBADF && errno != ENOTSOCK))
            return; /* sent, or miotool is not listening: nothing to do */
        uint64_t key = atomic_load(&mt_sock);
        atomic_compare_exchange_strong(&mt_sock, &key, 0);
    }
}

static void mt_terminate(struct mt_rec *r) {
    if (r->n >= sizeof r->b)
        r->n = sizeof r->b - 1;
    r->b[r->n++] = '\n';
}

void mt_send(struct mt_rec *r) {
    if (mt_naddr == 0)
        return;
    mt_terminate(r);
    for (int i = 0; i < mt_naddr; i++)
        mt_send_to(r, &mt_addr[i], mt_addr_len[i], -1);
}

/* The crash handler's socket (MIOTOOL_CRASH_SOCKET): one address. A
 * crash record waits for a full queue 2 s at most: a process must never
 * hang in its crash because a reader stopped reading. */
static struct sockaddr_un mt_crash_addr;
static socklen_t mt_crash_addr_len;

void mt_send_crash(struct mt_rec *r);
void mt_send_crash(struct mt_rec *r) {
    mt_terminate(r);
    if (mt_crash_addr_len)
        mt_send_to(r, &mt_crash_addr, mt_crash_addr_len, 200);
}

static socklen_t mt_set_addr(struct sockaddr_un *a, const char *path, size_t len) {
    if (len == 0 || len >= sizeof a->sun_path)
        return 0;
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path, path, len);
    a->sun_path[len] = '\0';
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
}

int mt_crash_address(const char *path);
int mt_crash_address(const char *path) {
    mt_crash_addr_len = path ? mt_set_addr(&mt_crash_addr, path, strlen(path)) : 0;
    return mt_crash_addr_len != 0;
}

/* ---- reading memory that may not be there ---- */

static atomic_int mt_peek_syscall = 1; /* process_vm_readv works here */

int mt_peek(void *dst, const void *src, size_t n) {
    if (!src)
        return -1;
    if (atomic_load_explicit(&mt_peek_syscall, memory_order_relaxed)) {
        struct iovec local = {dst, n}, remote = {(void *)(uintptr_t)src, n};
        int saved = errno;
        ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        int err = errno;
        errno = saved;
        if (got == (ssize_t)n)
            return 0;
        if (got >= 0 || err == EFAULT || err == ESRCH)
            return -1;
        /* ENOSYS, EPERM (a seccomp filter): read directly from now on,
         * trusting the offsets the checks hold to the real headers. */
        atomic_store(&mt_peek_syscall, 0);
    }
    memcpy(dst, src, n);
    return 0;
}

/* ---- the thread and its callers ---- */

void mt_put_thread(struct mt_rec *r, int signal_safe) {
    char name[17] = "";
    if (prctl(PR_GET_NAME, name, 0, 0, 0) != 0)
        name[0] = '\0';
    name[16] = '\0';
    mt_put_str(r, "t", 1);
    mt_put_str(r, name, 16);
    mt_put_python(r, signal_safe);
}

/* Frames of these libraries are the runtime's and the observer's own
 * machinery, not the program's callers. */
static int mt_skipped_module(const char *path) {
    static const char *const skip[] = {"libcupti.so", "libcuda.so", "libamdhip64.so", "libc.so", "ld-linux",
                                       "libpthread.so", "libdl.so", "libgcc_s.so"};
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strncmp(base, skip[i], strlen(skip[i])) == 0)
            return 1;
    return 0;
}

/* One caller triple, whole, while it fits with room for "+N". */
static int mt_put_frame(struct mt_rec *r, const char *path, const char *sym, unsigned long long off) {
    size_t plen = strnlen(path, 512), slen = strnlen(sym, 1024);
    if (plen + slen + 3 + 20 + 8 > mt_room(r))
        return 0;
    mt_put_str(r, path, plen);
    mt_put_str(r, sym, slen);
    mt_put_x(r, off);
    return 1;
}

static void mt_put_more(struct mt_rec *r, unsigned more) {
    if (more) {
        char buf[24];
        buf[0] = '\t';
        buf[1] = '+';
        mt_put_bytes(r, buf, 2 + mt_fmt_u(buf + 2, more, 0));
    }
}

void mt_put_callers(struct mt_rec *r) {
    void *pcs[MT_MAX_DEPTH];
    int n = backtrace(pcs, MT_MAX_DEPTH);
    unsigned more = 0, kept = 0;
    mt_put_str(r, "c", 1);
    for (int i = 0; i < n; i++) {
        Dl_info info;
        const char *path = "?", *sym = "";
        unsigned long long off = (unsigned long long)(uintptr_t)pcs[i];
        if (dladdr(pcs[i], &info) && info.dli_fname) {
            if (info.dli_fbase == mt_self_base)
                continue;
            path = info.dli_fbase == mt_main_base && mt_exe[0] ? mt_exe : info.dli_fname;
            if (mt_skipped_module(path))
                continue;
            if (info.dli_sname)
                sym = info.dli_sname;
            off -= (unsigned long long)(uintptr_t)info.dli_fbase;
        }
        /* Whole triples, innermost first; the rest are counted. */
        if (more || kept >= MT_MAX_FRAMES || !mt_put_frame(r, path, sym, off))
            more++;
        else
            kept++;
    }
    mt_put_more(r, more);
}

/* /proc/self/maps, read a chunk at a time: each pc's module is the
 * mapping that holds it, its offset counted from that file's first
 * mapping (offset 0), as dladdr counts from dli_fbase. Every frame is
 * kept, the observer's own excepted: a crash's consumer decides what to
 * skip. One caller at a time (the crash handler sends one report at a
 * time): its tables are static, for a signal stack may be small. */
void mt_put_callers_from(struct mt_rec *r, void *const *pcs, int n) {
    static struct {
        uintptr_t base; /* the module's load address; 0 while not found */
        char path[256];
    } found[MT_MAX_FRAMES];
    static char buf[4096], line[1024];
    if (n > MT_MAX_FRAMES)
        n = MT_MAX_FRAMES;
    for (int i = 0; i < n; i++)
        found[i].base = 0;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char cur_path[256] = "";
        size_t len = 0;
        uintptr_t cur_base = 0;
        ssize_t got;
        while ((got = read(fd, buf, sizeof buf)) > 0) {
            for (ssize_t k = 0; k < got; k++) {
                if (buf[k] != '\n') {
                    if (len < sizeof line - 1)
                        line[len++] = buf[k];
                    continue;
                }
                line[len] = '\0';
                len = 0;
                /* start-end perms offset dev inode path */
                char *p = line, *end;
                uintptr_t lo = (uintptr_t)strtoull(p, &end, 16);
                if (*end != '-')
                    continue;
                uintptr_t hi = (uintptr_t)strtoull(end + 1, &end, 16);
                while (*end == ' ')
                    end++;
                while (*end && *end != ' ')
                    end++; /* perms */
                unsigned long long offset = strtoull(end, &end, 16);
                for (int field = 0; field < 2; field++) { /* dev, inode */
                    while (*end == ' ')
                        end++;
                    while (*end && *end != ' ')
                        end++;
                }
                while (*end == ' ')
                    end++;
                const char *path = end;
                if (path[0] != '/')
                    continue;
                if (offset == 0 || strncmp(path, cur_path, sizeof cur_path) != 0) {
                    cur_base = offset == 0 ? lo : lo - (uintptr_t)offset;
                    strncpy(cur_path, path, sizeof cur_path - 1);
                    cur_path[sizeof cur_path - 1] = '\0';
                }
                for (int i = 0; i < n; i++) {
                    uintptr_t pc = (uintptr_t)pcs[i];
                    if (!found[i].base && pc >= lo && pc < hi) {
                        found[i].base = cur_base;
                        memcpy(found[i].path, cur_path, sizeof cur_path);
                    }
                }
            }
        }
        close(fd);
    }
    unsigned more = 0;
    mt_put_str(r, "c", 1);
    for (int i = 0; i < n; i++) {
        uintptr_t pc = (uintptr_t)pcs[i];
        if (found[i].base && found[i].base == (uintptr_t)mt_self_base)
            continue;
        const char *path = found[i].base ? found[i].path : "?";
        unsigned long long off = found[i].base ? pc - found[i].base : pc;
        if (more || !mt_put_frame(r, path, "", off))
            more++;
    }
    mt_put_more(r, more);
}

/* ---- active captures ---- */

/* Each active capture's stream, tagged with its runtime so that the two
 * handle spaces never meet and no key is zero. */
static _Atomic uint64_t mt_captures[MT_MAX_CAPTURES];
static atomic_int mt_captures_used; /* slots below this may hold a capture */
static atomic_int mt_overflow;      /* begun while the table was full */

static uint64_t mt_key(int api, uint64_t stream) { return stream | (api == MT_API_HIP ? 1ull << 62 : 1ull << 63); }

static void mt_add_capture(int api, uint64_t stream) {
    uint64_t key = mt_key(api, stream);
    int placed = 0;
    for (int i = 0; i < MT_MAX_CAPTURES && !placed; i++) {
        uint64_t none = 0;
        placed = atomic_compare_exchange_strong(&mt_captures[i], &none, key);
        if (placed) {
            int used = atomic_load(&mt_captures_used);
            while (used < i + 1 && !atomic_compare_exchange_weak(&mt_captures_used, &used, i + 1))
                ;
        }
    }
    if (!placed)
        atomic_fetch_add(&mt_overflow, 1);
    atomic_fetch_add(&mt_active, 1);
}

/* Forgets the capture on stream; says whether there was one. */
static int mt_remove_capture(int api, uint64_t stream) {
    uint64_t key = mt_key(api, stream);
    for (int i = 0; i < MT_MAX_CAPTURES; i++) {
        uint64_t k = key;
        if (atomic_load_explicit(&mt_captures[i], memory_order_relaxed) == key &&
            atomic_compare_exchange_strong(&mt_captures[i], &k, 0)) {
            atomic_fetch_sub(&mt_active, 1);
            return 1;
        }
    }
    int over = atomic_load(&mt_overflow);
    while (over > 0) {
        if (atomic_compare_exchange_weak(&mt_overflow, &over, over - 1)) {
            atomic_fetch_sub(&mt_active, 1);
            return 1;
        }
    }
    return 0;
}

int mt_capture_origin(int api, uint64_t stream) {
    uint64_t key = mt_key(api, stream);
    int used = atomic_load_explicit(&mt_captures_used, memory_order_relaxed);
    for (int i = 0; i < used; i++)
        if (atomic_load_explicit(&mt_captures[i], memory_order_relaxed) == key)
            return 1;
    return 0;
}

/* ---- events ---- */

MT_TLS int mt_own_call;

/* Which device ordinals (below 64) of each runtime this process has
 * described; a forked child describes its own again. */
static _Atomic uint64_t mt_described[2];

/* The calling thread's device ordinal, after sending its description the
 * first time this process names it. */
static int mt_device(int api, mt_device_fn query) {
    if (!query)
        return -1;
    struct mt_device d = {.ordinal = -1};
    mt_own_call = 1;
    query(&d, 0);
    int ordinal = d.ordinal;
    uint64_t bit = ordinal >= 0 && ordinal < 64 ? 1ull << ordinal : 0;
    if (bit && !(atomic_load(&mt_described[api & 1]) & bit)) {
        query(&d, 1);
        atomic_fetch_or(&mt_described[api & 1], bit);
        struct mt_rec r;
        mt_start(&r, "device", mt_now());
        mt_put_str(&r, mt_api_name(api), 8);
        mt_put_i(&r, ordinal);
        mt_put_str(&r, d.name, sizeof d.name);
        mt_put_str(&r, d.arch, sizeof d.arch);
        mt_put_i(&r, d.cus);
        mt_send(&r);
    }
    mt_own_call = 0;
    return ordinal;
}

void mt_begin(int api, const char *name, uint64_t stream, unsigned mode, unsigned result, mt_device_fn device) {
    if (!mt_tracing)
        return;
    int saved = errno;
    int ordinal = mt_device(api, device);
    struct mt_rec r;
    mt_start(&r, "begin", mt_now());
    mt_put_str(&r, mt_api_name(api), 8);
    mt_put_str(&r, name, 128);
    mt_put_x(&r, stream);
    mt_put_u(&r, mode);
    mt_put_u(&r, result);
    mt_put_i(&r, ordinal);
    mt_put_thread(&r, 0);
    mt_put_callers(&r);
    /* Sent before the capture counts as active, so that every call record
     * this capture lets through follows its begin. */
    mt_send(&r);
    if (result == 0)
        mt_add_capture(api, stream);
    errno = saved;
}

void mt_end(int api, const char *name, uint64_t stream, unsigned result, int keep, uint64_t graph, long nodes) {
    if (!mt_tracing)
        return;
    int saved = errno;
    unsigned long long t = mt_now();
    if (!keep)
        mt_remove_capture(api, stream);
    struct mt_rec r;
    mt_start(&r, "end", t);
    mt_put_str(&r, mt_api_name(api), 8);
    mt_put_str(&r, name, 128);
    mt_put_x(&r, stream);
    mt_put_u(&r, result);
    mt_put_x(&r, graph);
    mt_put_i(&r, nodes);
    mt_put_thread(&r, 0);
    mt_put_callers(&r);
    mt_send(&r);
    errno = saved;
}

void mt_stream_gone(int api, uint64_t stream) {
    if (!mt_tracing)
        return;
    int saved = errno;
    unsigned long long t = mt_now();
    if (mt_remove_capture(api, stream)) {
        struct mt_rec r;
        mt_start(&r, "gone", t);
        mt_put_str(&r, mt_api_name(api), 8);
        mt_put_x(&r, stream);
        mt_send(&r);
    }
    errno = saved;
}

void mt_call(int api, const char *name, uint64_t stream, uint64_t event, unsigned result, unsigned thread_mode,
             int callers, int outside) {
    if (mt_own_call || !mt_tracing)
        return;
    int saved = errno;
    struct mt_rec r;
    mt_start(&r, "call", mt_now());
    mt_put_str(&r, mt_api_name(api), 8);
    mt_put_str(&r, name, 128);
    mt_put_x(&r, stream);
    mt_put_x(&r, event);
    mt_put_u(&r, result);
    mt_put_u(&r, thread_mode);
    mt_put_u(&r, outside ? 1 : 0);
    if (callers || mt_refused(result)) {
        mt_put_thread(&r, 0);
        mt_put_callers(&r);
    }
    mt_send(&r);
    errno = saved;
}

/* ---- graphs ---- */

/* Executable graphs this process instantiated or launched: the graph each
 * was made from and whether its launch was reported. Open addressing,
 * never shrinking; when it is full, every launch of an executable graph
 * not in it is reported. */
#define MT_GRAPHS 4096
static struct {
    _Atomic uint64_t key; /* mt_key(api, exec); 0: free */
    _Atomic uint64_t graph;
    atomic_int launched;
} mt_graphs[MT_GRAPHS];

static unsigned mt_graph_hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (unsigned)key & (MT_GRAPHS - 1);
}

/* The slot of exec, claimed when add; NULL when absent (or no room). */
static int mt_graph_slot(uint64_t key, int add) {
    unsigned h = mt_graph_hash(key);
    for (unsigned probe = 0; probe < 64; probe++) {
        unsigned i = (h + probe) & (MT_GRAPHS - 1);
        uint64_t k = atomic_load_explicit(&mt_graphs[i].key, memory_order_acquire);
        if (k == key)
            return (int)i;
        if (k == 0) {
            if (!add)
                return -1;
            uint64_t none = 0;
            if (atomic_compare_exchange_strong(&mt_graphs[i].key, &none, key) || none == key)
                return (int)i;
        }
    }
    return -1;
}

int mt_graph_launch_new(int api, uint64_t exec) {
    if (!mt_tracing)
        return 0;
    int i = mt_graph_slot(mt_key(api, exec), 0);
    return i < 0 || !atomic_load_explicit(&mt_graphs[i].launched, memory_order_relaxed);
}

static void mt_graph_record(int api, const char *name, uint64_t graph, uint64_t exec, uint64_t stream, unsigned result,
                            long nodes) {
    struct mt_rec r;
    mt_start(&r, "graph", mt_now());
    mt_put_str(&r, mt_api_name(api), 8);
    mt_put_str(&r, name, 128);
    mt_put_x(&r, graph);
    mt_put_x(&r, exec);
    mt_put_x(&r, stream);
    mt_put_u(&r, result);
    mt_put_i(&r, nodes);
    mt_send(&r);
}

void mt_graph_instantiated(int api, const char *name, uint64_t graph, uint64_t exec, unsigned result, long nodes) {
    if (!mt_tracing)
        return;
    int saved = errno;
    if (result == 0 && exec) {
        int i = mt_graph_slot(mt_key(api, exec), 1);
        if (i >= 0) {
            /* A handle the runtime reuses is a new executable graph: its
             * first launch is reported again. */
            atomic_store(&mt_graphs[i].graph, graph);
            atomic_store(&mt_graphs[i].launched, 0);
        }
    }
    mt_graph_record(api, name, graph, exec, 0, result, nodes);
    errno = saved;
}

void mt_graph_launched(int api, const char *name, uint64_t exec, uint64_t stream, unsigned result) {
    if (!mt_tracing)
        return;
    int saved = errno;
    uint64_t graph = 0;
    int i = mt_graph_slot(mt_key(api, exec), 1);
    if (i >= 0) {
        if (atomic_exchange(&mt_graphs[i].launched, 1)) {
            errno = saved;
            return; /* another thread reported it first */
        }
        graph = atomic_load(&mt_graphs[i].graph);
    }
    mt_graph_record(api, name, graph, exec, stream, result, -1);
    errno = saved;
}

void mt_note(const char *topic, const char *status, const char *text) {
    int saved = errno;
    struct mt_rec r;
    mt_start(&r, "note", mt_now());
    mt_put_str(&r, topic, 32);
    mt_put_str(&r, status, 32);
    mt_put_str(&r, text, 2048);
    mt_send(&r);
    errno = saved;
}

/* ---- start-up ---- */

static void mt_hello(const char *kind) {
    struct mt_rec r;
    mt_start(&r, kind, mt_now());
    mt_put_u(&r, (unsigned long long)getppid());
    mt_put_str(&r, mt_exe, sizeof mt_exe);
    mt_put_str(&r, mt_marker, 256);
    mt_send(&r);
}

/* In a forked child: it is a process of its own, with one thread. */
static void mt_after_fork_child(void) {
    int saved = errno;
    mt_pid = getpid();
    mt_tid = 0;
    atomic_store(&mt_described[0], 0);
    atomic_store(&mt_described[1], 0);
    if (mt_tracing)
        mt_hello("fork");
    errno = saved;
}

static int mt_find_main(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    /* The first object is the program itself: its mapping starts at the
     * page of its lowest loaded segment, which dladdr reports as the
     * program's dli_fbase. */
    uintptr_t lowest = UINTPTR_MAX, page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && info->dlpi_phdr[i].p_vaddr < lowest)
            lowest = info->dlpi_phdr[i].p_vaddr;
    if (lowest != UINTPTR_MAX)
        mt_main_base = (const void *)(info->dlpi_addr + (lowest & ~(page - 1)));
    return 1;
}

/* The trace's sockets: MIOTOOL_TRACE_SOCKET, paths separated by ':'. */
static void mt_trace_addresses(const char *list) {
    mt_naddr = 0;
    while (list && *list && mt_naddr < MT_MAX_SOCKETS) {
        const char *colon = strchr(list, ':');
        size_t len = colon ? (size_t)(colon - list) : strlen(list);
        socklen_t l = mt_set_addr(&mt_addr[mt_naddr], list, len);
        if (l)
            mt_addr_len[mt_naddr++] = l;
        list = colon ? colon + 1 : NULL;
    }
}

void mt_init_process(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&mt_inited, &expected, 1))
        return;
    int saved = errno;
    mt_pid = getpid();
    Dl_info self;
    if (dladdr((void *)&mt_init_process, &self))
        mt_self_base = self.dli_fbase;
    dl_iterate_phdr(mt_find_main, NULL);
    ssize_t n = readlink("/proc/self/exe", mt_exe, sizeof mt_exe - 1);
    mt_exe[n > 0 ? n : 0] = '\0';
    /* Another copy of the observer (another file: a nested trace of
     * another miotool) loaded first does the reporting; this one stays
     * silent, so that no call is reported twice. */
    const void *first = dlsym(RTLD_DEFAULT, "miotool_observer");
    mt_duplicate = first && first != (const void *)mt_marker;
    mt_trace_addresses(mt_duplicate ? NULL : getenv("MIOTOOL_TRACE_SOCKET"));
    mt_tracing = mt_naddr > 0;
    /* Load the unwinder now, not inside the first refused call. */
    void *warm[2];
    (void)backtrace(warm, 2);
    mt_python_resolve();
    pthread_atfork(NULL, NULL, mt_after_fork_child);
    if (!mt_duplicate)
        mt_crash_init();
    if (mt_tracing)
        mt_hello("hello");
    errno = saved;
}

__attribute__((constructor)) static void mt_constructor(void) { mt_init_process(); }
