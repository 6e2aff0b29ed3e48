/*
 * The observer's core: how events reach miotool, what a record looks like,
 * which captures are active in this process, and who called.
 *
 * Transport: each process sends each record as one datagram to the Unix
 * datagram socket whose path is in MIOTOOL_TRACE_SOCKET. A socket was chosen
 * over a FIFO or an inherited descriptor because it survives what real
 * programs do:
 *   - a fork: the child shares the unconnected socket and sends as itself;
 *   - an exec: the environment carries the path and the new image's
 *     observer opens its own socket;
 *   - a program that closes the descriptors it inherited, or ours later: an
 *     inherited descriptor would be gone for good, while a socket of our own
 *     is made again on the next record. Before each send the descriptor is
 *     checked to still be that socket, so a number the program reused for a
 *     file of its own is never written to.
 * A datagram is delivered whole and alone (no record interleaves with
 * another thread's or process's), sendto with MSG_NOSIGNAL never raises
 * SIGPIPE in the program when miotool has gone, and a full receive queue
 * makes the sender wait rather than lose the record. Records stay below
 * PIPE_BUF all the same.
 *
 * Record: one line of tab-separated fields,
 *   MT1 kind pid tid time-ns fields...
 * with kind hello, fork, note, device, begin, end, gone or call (see the Go reader,
 * events.go); the native callers close begin, end and call records as
 * (module path, symbol or empty, offset) triples, then "+N" when N more
 * frames did not fit.
 *
 * Everything that runs while the program makes calls is async-signal-safe
 * in practice and allocates nothing: a stack buffer, atomics, and the
 * system calls clock_gettime, gettid, fstat and sendto. The unwinder is
 * loaded at start-up so that backtrace() does not load it in a callback.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "observer.h"

#define MT_RECORD_MAX 4000 /* below PIPE_BUF (4096), with room to spare */
#define MT_MAX_FRAMES 64
#define MT_MAX_CAPTURES 256

atomic_int mt_active;
MT_TLS unsigned mt_cuda_thread_mode;
MT_TLS unsigned mt_hip_thread_mode;

static atomic_int mt_inited;
static struct sockaddr_un mt_addr;
static socklen_t mt_addr_len;
/* The socket as (inode low 32 bits) << 32 | descriptor; 0 when none. */
static _Atomic uint64_t mt_sock;
static pid_t mt_pid;
static MT_TLS pid_t mt_tid;
static const void *mt_self_base; /* where this library is mapped */
static const void *mt_main_base; /* where the program's executable is mapped */
static char mt_exe[1024];        /* the program's executable, from /proc/self/exe */

/* ---- records ---- */

struct mt_rec {
    char b[MT_RECORD_MAX];
    size_t n;
};

static void mt_put_bytes(struct mt_rec *r, const char *s, size_t len) {
    if (r->n + len > sizeof r->b - 2) /* room for the newline */
        len = sizeof r->b - 2 - r->n;
    memcpy(r->b + r->n, s, len);
    r->n += len;
}

/* A field: a tab, then s with any tab, newline or control byte replaced, at
 * most max bytes of it. */
static void mt_put_str(struct mt_rec *r, const char *s, size_t max) {
    mt_put_bytes(r, "\t", 1);
    for (size_t i = 0; s && s[i] && i < max && r->n < sizeof r->b - 2; i++) {
        unsigned char c = (unsigned char)s[i];
        r->b[r->n++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
}

static size_t mt_fmt_u(char *out, unsigned long long v, int hex) {
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

static void mt_put_u(struct mt_rec *r, unsigned long long v) {
    char buf[24];
    buf[0] = '\t';
    mt_put_bytes(r, buf, 1 + mt_fmt_u(buf + 1, v, 0));
}

static void mt_put_x(struct mt_rec *r, unsigned long long v) {
    char buf[24];
    buf[0] = '\t';
    mt_put_bytes(r, buf, 1 + mt_fmt_u(buf + 1, v, 1));
}

static pid_t mt_gettid(void) {
    if (mt_tid == 0)
        mt_tid = (pid_t)syscall(SYS_gettid);
    return mt_tid;
}

static unsigned long long mt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void mt_start(struct mt_rec *r, const char *kind, unsigned long long t) {
    r->n = 0;
    mt_put_bytes(r, "MT1", 3);
    mt_put_str(r, kind, 16);
    mt_put_u(r, (unsigned long long)mt_pid);
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
    if (!atomic_compare_exchange_strong(&mt_sock, &none, mine)) {
        close(fd); /* another thread made one first */
        return mt_socket();
    }
    return fd;
}

static void mt_send(struct mt_rec *r) {
    if (mt_addr_len == 0)
        return;
    r->b[r->n++] = '\n';
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = mt_socket();
        if (fd < 0)
            return;
        ssize_t w;
        do
            w = sendto(fd, r->b, r->n, MSG_NOSIGNAL, (const struct sockaddr *)&mt_addr, mt_addr_len);
        while (w < 0 && errno == EINTR);
        if (w >= 0 || (errno != EBADF && errno != ENOTSOCK))
            return; /* sent, or miotool is not listening: nothing to do */
        uint64_t key = atomic_load(&mt_sock);
        atomic_compare_exchange_strong(&mt_sock, &key, 0);
    }
}

/* ---- callers ---- */

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

static void mt_put_callers(struct mt_rec *r) {
    void *pcs[MT_MAX_FRAMES];
    int n = backtrace(pcs, MT_MAX_FRAMES);
    unsigned more = 0;
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
        /* Whole triples, innermost first, while they fit with room for
         * "+N"; the rest are counted. */
        size_t plen = strnlen(path, 512), slen = strnlen(sym, 1024);
        if (more || r->n + plen + slen + 3 + 20 + 8 > sizeof r->b - 2) {
            more++;
            continue;
        }
        mt_put_str(r, path, plen);
        mt_put_str(r, sym, slen);
        mt_put_x(r, off);
    }
    if (more) {
        char buf[24];
        buf[0] = '\t';
        buf[1] = '+';
        mt_put_bytes(r, buf, 2 + mt_fmt_u(buf + 2, more, 0));
    }
}

/* ---- active captures ---- */

/* Each active capture's stream, tagged with its runtime so that the two
 * handle spaces never meet and no key is zero. */
static _Atomic uint64_t mt_captures[MT_MAX_CAPTURES];
static atomic_int mt_overflow; /* begun while the table was full */

static uint64_t mt_key(int api, uint64_t stream) { return stream | (api == MT_API_HIP ? 1ull << 62 : 1ull << 63); }

static void mt_add_capture(int api, uint64_t stream) {
    uint64_t key = mt_key(api, stream);
    int placed = 0;
    for (int i = 0; i < MT_MAX_CAPTURES && !placed; i++) {
        uint64_t none = 0;
        placed = atomic_compare_exchange_strong(&mt_captures[i], &none, key);
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

/* ---- events ---- */

MT_TLS int mt_own_call;

/* Which device ordinals (below 64) of each runtime this process has
 * described; a forked child describes its own again. */
static _Atomic uint64_t mt_described[2];

/* A signed number field. */
static void mt_put_i(struct mt_rec *r, long long v) {
    if (v >= 0) {
        mt_put_u(r, (unsigned long long)v);
        return;
    }
    char buf[24];
    buf[0] = '\t';
    buf[1] = '-';
    mt_put_bytes(r, buf, 2 + mt_fmt_u(buf + 2, (unsigned long long)(-(v + 1)) + 1, 0));
}

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
    mt_put_callers(&r);
    /* Sent before the capture counts as active, so that every call record
     * this capture lets through follows its begin. */
    mt_send(&r);
    if (result == 0)
        mt_add_capture(api, stream);
    errno = saved;
}

void mt_end(int api, const char *name, uint64_t stream, unsigned result, int keep) {
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
    mt_put_callers(&r);
    mt_send(&r);
    errno = saved;
}

void mt_stream_gone(int api, uint64_t stream) {
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
             int callers) {
    if (mt_own_call)
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
    if (callers || mt_refused(result))
        mt_put_callers(&r);
    mt_send(&r);
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
    mt_send(&r);
}

/* In a forked child: it is a process of its own, with one thread. */
static void mt_after_fork_child(void) {
    int saved = errno;
    mt_pid = getpid();
    mt_tid = 0;
    atomic_store(&mt_described[0], 0);
    atomic_store(&mt_described[1], 0);
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
    const char *path = getenv("MIOTOOL_TRACE_SOCKET");
    if (path && path[0] && strlen(path) < sizeof mt_addr.sun_path) {
        mt_addr.sun_family = AF_UNIX;
        memcpy(mt_addr.sun_path, path, strlen(path) + 1);
        mt_addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
    }
    /* Load the unwinder now, not inside the first refused call. */
    void *warm[2];
    (void)backtrace(warm, 2);
    pthread_atfork(NULL, NULL, mt_after_fork_child);
    mt_hello("hello");
    errno = saved;
}

__attribute__((constructor)) static void mt_constructor(void) { mt_init_process(); }
