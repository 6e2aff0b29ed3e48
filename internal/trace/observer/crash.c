/*
 * The crash handler, installed only when the environment asks for it
 * (MIOTOOL_CRASH_SOCKET names the socket crash records go to;
 * MIOTOOL_CRASH_RUN is the run token every process of a run inherits).
 *
 * On SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP or SIGSYS it sends one
 * crash record (the signal, its code and address, the thread's name, its
 * Python stack by the signal-safe paths only, its native stack) and then
 * does what the program would have done without it:
 *   - the program's own handler, installed before the observer loaded or
 *     after (sigaction, signal, bsd_signal and sysv_signal are interposed:
 *     the program sees and sets its own disposition, the observer's handler
 *     stays in place), is called as the kernel would call it: with its
 *     mask, SA_SIGINFO, SA_RESETHAND and SA_NODEFER honoured;
 *   - the default action is taken by restoring it and raising the signal
 *     again, so the exit status (and its core dump) is the program's own;
 *   - a signal the program ignores stays ignored, unless it is a fault the
 *     kernel would not let it ignore.
 *
 * It is async-signal-safe: static buffers (one report at a time), system
 * calls, the unwinder loaded at start-up, /proc/self/maps rather than the
 * dynamic loader's locks. A fault while it reports (a corrupt stack or
 * interpreter) ends the report early, never the program's own outcome: the
 * handler runs with SA_NODEFER, and a fault inside the report jumps back
 * out of it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "observer.h"

void mt_send_crash(struct mt_rec *r);
int mt_crash_address(const char *path);

#define MT_CRASH_REPORTS 8 /* records a process sends at most */

static const int mt_crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP, SIGSYS};

typedef int (*mt_sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*mt_signal_fn)(int, sighandler_t);

static _Atomic(mt_sigaction_fn) mt_real_sigaction;
/* Signals whose handler is the observer's. */
static atomic_int mt_watched[NSIG];
/* The disposition the program asked for, per signal: two copies and the
 * index of the current one, so that the handler never reads one half
 * written. */
static struct sigaction mt_program[NSIG][2];
static atomic_int mt_program_at[NSIG];
static char mt_run[256];

static atomic_int mt_reports;
static atomic_int mt_reporting;
static MT_TLS int mt_reporter; /* this thread is writing a report */
static MT_TLS int mt_reported; /* this thread reported its crash already */
static sigjmp_buf mt_report_jmp;
static struct mt_rec mt_crash_rec;

static mt_sigaction_fn mt_sigaction_real(void) {
    mt_sigaction_fn fn = atomic_load_explicit(&mt_real_sigaction, memory_order_acquire);
    if (!fn) {
        fn = (mt_sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
        atomic_store_explicit(&mt_real_sigaction, fn, memory_order_release);
    }
    return fn;
}

static struct sigaction mt_program_action(int sig) {
    return mt_program[sig][atomic_load_explicit(&mt_program_at[sig], memory_order_acquire) & 1];
}

static void mt_set_program_action(int sig, const struct sigaction *act) {
    int next = (atomic_load(&mt_program_at[sig]) + 1) & 1;
    mt_program[sig][next] = *act;
    atomic_store_explicit(&mt_program_at[sig], next, memory_order_release);
}

static int mt_is_handler(const struct sigaction *a) {
    return (a->sa_flags & SA_SIGINFO) ? a->sa_sigaction != NULL
                                      : (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN);
}

/* ---- the report ---- */

static void mt_crash_report(int sig, const siginfo_t *si) {
    struct mt_rec *r = &mt_crash_rec;
    void *pcs[64];
    int n = backtrace(pcs, 64);
    mt_start(r, "crash", mt_now());
    mt_put_u(r, (unsigned)sig);
    mt_put_i(r, si ? si->si_code : 0);
    int addressed = sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
    mt_put_x(r, addressed && si ? (unsigned long long)(uintptr_t)si->si_addr : 0);
    mt_put_str(r, mt_run, sizeof mt_run);
    size_t mark = r->n;
    if (sigsetjmp(mt_report_jmp, 1) == 0) {
        mt_put_thread(r, 1);
    } else {
        r->n = mark; /* the Python stack could not be read: name the thread only */
        mt_put_str(r, "t", 1);
        mt_put_str(r, "", 1);
        mt_put_str(r, "p", 1);
        mt_put_str(r, "unavailable", 16);
        mt_put_str(r, "reading the stack faulted", 64);
        mt_put_str(r, "", 1);
        mt_put_str(r, "", 1);
        mt_put_u(r, 0);
        mt_put_u(r, 0);
    }
    mark = r->n;
    if (sigsetjmp(mt_report_jmp, 1) == 0)
        mt_put_callers_from(r, pcs, n);
    else
        r->n = mark;
    mt_send_crash(r);
}

/* ---- the handler ---- */

static void mt_crash_handler(int sig, siginfo_t *si, void *context) {
    int saved = errno;
    if (mt_reporter)
        siglongjmp(mt_report_jmp, 1); /* a fault inside the report */
    struct sigaction prog = mt_program_action(sig);
    /* A fault the kernel raised (si_code > 0) cannot be ignored. */
    int from_kernel = si && si->si_code > 0;
    if (!mt_is_handler(&prog) && !(prog.sa_flags & SA_SIGINFO) && prog.sa_handler == SIG_IGN && !from_kernel) {
        errno = saved;
        return;
    }
    if (!mt_reported && atomic_fetch_add(&mt_reports, 1) < MT_CRASH_REPORTS) {
        int none = 0;
        if (atomic_compare_exchange_strong(&mt_reporting, &none, 1)) {
            mt_reporter = 1;
            mt_crash_report(sig, si);
            mt_reporter = 0;
            atomic_store(&mt_reporting, 0);
        }
        mt_reported = 1;
    }
    if (mt_is_handler(&prog)) {
        /* As the kernel calls it: its mask (and the signal, unless
         * SA_NODEFER) blocked while it runs; SA_RESETHAND first. */
        sigset_t mask = prog.sa_mask, old;
        if (!(prog.sa_flags & SA_NODEFER))
            sigaddset(&mask, sig);
        if (prog.sa_flags & SA_RESETHAND) {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            mt_set_program_action(sig, &dfl);
        }
        pthread_sigmask(SIG_BLOCK, &mask, &old);
        errno = saved;
        if (prog.sa_flags & SA_SIGINFO)
            prog.sa_sigaction(sig, si, context);
        else
            prog.sa_handler(sig);
        saved = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        errno = saved;
        return;
    }
    /* The default action: restored, and the signal raised again; it is
     * delivered as this handler returns (a fault would recur anyway). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    mt_sigaction_fn real = atomic_load(&mt_real_sigaction);
    if (real)
        real(sig, &dfl, NULL);
    atomic_store(&mt_watched[sig], 0);
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, sig);
    pthread_sigmask(SIG_UNBLOCK, &unblock, NULL);
    raise(sig);
    errno = saved;
}

/* The real signal functions, resolved at start-up: the program may call
 * them from a signal handler, where dlsym is not safe. */
static _Atomic(mt_signal_fn) mt_real_signal, mt_real_bsd_signal, mt_real_sysv_signal;

void mt_crash_init(void) {
    mt_sigaction_real();
    atomic_store(&mt_real_signal, (mt_signal_fn)dlsym(RTLD_NEXT, "signal"));
    atomic_store(&mt_real_bsd_signal, (mt_signal_fn)dlsym(RTLD_NEXT, "bsd_signal"));
    atomic_store(&mt_real_sysv_signal, (mt_signal_fn)dlsym(RTLD_NEXT, "sysv_signal"));
    const char *socket = getenv("MIOTOOL_CRASH_SOCKET");
    if (!socket || !socket[0] || !mt_crash_address(socket))
        return;
    const char *run = getenv("MIOTOOL_CRASH_RUN");
    if (run) {
        strncpy(mt_run, run, sizeof mt_run - 1);
        mt_run[sizeof mt_run - 1] = '\0';
    }
    mt_sigaction_fn real = mt_sigaction_real();
    if (!real)
        return;
    for (size_t i = 0; i < sizeof mt_crash_signals / sizeof mt_crash_signals[0]; i++) {
        int sig = mt_crash_signals[i];
        struct sigaction old, mine;
        if (real(sig, NULL, &old) != 0)
            continue;
        mt_set_program_action(sig, &old); /* one installed before ours */
        memset(&mine, 0, sizeof mine);
        mine.sa_sigaction = mt_crash_handler;
        mine.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTART;
        sigemptyset(&mine.sa_mask);
        if (real(sig, &mine, NULL) == 0)
            atomic_store(&mt_watched[sig], 1);
    }
}

/* ---- the program's view of its signals ---- */

MT_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (sig > 0 && sig < NSIG && atomic_load_explicit(&mt_watched[sig], memory_order_acquire)) {
        if (old)
            *old = mt_program_action(sig);
        if (act)
            mt_set_program_action(sig, act);
        return 0;
    }
    mt_sigaction_fn real = mt_sigaction_real();
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    return real(sig, act, old);
}

/* signal() and its variants as glibc defines them, through the sigaction
 * above (glibc's own call sigaction inside libc, out of reach). */
static sighandler_t mt_signal_as(int sig, sighandler_t handler, int flags, _Atomic(mt_signal_fn) *slot,
                                 const char *name) {
    if (sig > 0 && sig < NSIG && atomic_load_explicit(&mt_watched[sig], memory_order_acquire)) {
        struct sigaction act, old;
        memset(&act, 0, sizeof act);
        act.sa_handler = handler;
        act.sa_flags = flags;
        sigemptyset(&act.sa_mask);
        if (!(flags & SA_NODEFER))
            sigaddset(&act.sa_mask, sig);
        sigaction(sig, &act, &old);
        return (old.sa_flags & SA_SIGINFO) ? (sighandler_t)(void *)old.sa_sigaction : old.sa_handler;
    }
    mt_signal_fn real = atomic_load(slot);
    if (!real) {
        real = (mt_signal_fn)dlsym(RTLD_NEXT, name);
        atomic_store(slot, real);
    }
    if (!real) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    return real(sig, handler);
}

MT_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
    return mt_signal_as(sig, handler, SA_RESTART, &mt_real_signal, "signal");
}

MT_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) {
    return mt_signal_as(sig, handler, SA_RESTART, &mt_real_bsd_signal, "bsd_signal");
}

MT_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) {
    return mt_signal_as(sig, handler, SA_RESETHAND | SA_NODEFER, &mt_real_sysv_signal, "sysv_signal");
}
