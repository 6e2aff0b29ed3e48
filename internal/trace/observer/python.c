/*
 * The calling thread's Python stack, on the observer's rare paths only (a
 * capture's begin and end, a call record with callers, a crash): never per
 * call. CPython's API is looked up at run time (dlsym); nothing links
 * libpython, and a process without CPython gets no Python section at all.
 *
 * It must never deadlock or crash the program it observes, so it never
 * waits for the GIL and never runs Python code:
 *   - no thread state (PyGILState_GetThisThreadState, the thread's own
 *     slot, read without the GIL as faulthandler does): a native thread;
 *   - the thread holds the GIL (PyGILState_Check, and the attached thread
 *     state is this thread's, which holds even where the runtime turned
 *     PyGILState_Check off): the public frame API, with the collector off
 *     (no finalizer runs inside a runtime call) and the thread's exception
 *     kept; this path alone also reads the threading name;
 *   - otherwise, read-only, never allocating, taking no lock, and the
 *     threading name from the observer's own naming thread, which takes
 *     the GIL itself while the calling thread waits at most
 *     MT_PY_NAME_WAIT_NS for its answer (once a thread: the answer is
 *     kept), so that no lock the calling thread holds can deadlock it:
 *       3.10  the frame objects, at offsets pinned to 3.10's headers,
 *       3.11, 3.12  _Py_DumpTraceback (faulthandler's own writer) into a
 *             memfd, parsed back; where a build does not export it, the
 *             interpreter frames at offsets pinned to the headers,
 *       3.13  the debug offsets CPython publishes for profilers at the
 *             start of _PyRuntime;
 *     and PyCode_Addr2Line (read-only) for lines. Memory is read with
 *     process_vm_readv, which fails instead of faulting on a bad address.
 *   - any other version, a free-threaded build, an interpreter that is
 *     finalizing, a re-entry: the section says why there are no frames.
 * A crash (signal_safe) takes only the read-only paths.
 *
 * MIOTOOL_TRACE_PYTHON=held reads frames only on threads that hold the
 * GIL; =off reads none; =offsets takes the pinned offsets on 3.11 and 3.12
 * even where _Py_DumpTraceback is exported.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mt_python.h"
#include "observer.h"

#define MT_PY_MAX_FRAMES 128
#define MT_PY_MAX_DEPTH 4096 /* frames walked at most, counting the omitted */
#define MT_PY_BUDGET 6000    /* bytes of a record the Python section may take */
#define MT_PY_FILE_MAX 400
#define MT_PY_FUNC_MAX 200

static struct {
    atomic_int state; /* 0: not looked up yet, 1: CPython found, -1: none */
    int minor, major;
    int free_threaded;
    char version[24];
    mt_PyGILState_GetThisThreadState_fn this_thread_state;
    mt_PyGILState_Check_fn gil_check;
    mt_PyThreadState_UncheckedGet_fn unchecked_get;
    mt_Py_IsInitialized_fn is_initialized;
    mt_Py_IsFinalizing_fn is_finalizing;
    mt_PyCode_Addr2Line_fn addr2line;
    mt_Py_DumpTraceback_fn dump;
    mt_PyUnstable_InterpreterFrame_GetLine_fn frame_line;
    const void *code_type, *frame_type, *unicode_type;
    const struct mt_py_debug_offsets *debug;
    /* the public API */
    mt_PyEval_GetFrame_fn get_frame;
    mt_PyFrame_GetCode_fn frame_code;
    mt_PyFrame_GetBack_fn frame_back;
    mt_PyFrame_GetLineNumber_fn frame_lineno;
    mt_PyObject_GetAttrString_fn getattr;
    mt_PyObject_GenericGetAttr_fn generic_getattr;
    mt_PyUnicode_AsUTF8_fn as_utf8;
    mt_PyUnicode_FromString_fn from_string;
    mt_Py_DecRef_fn decref;
    mt_Py_IncRef_fn incref;
    mt_PyErr_Fetch_fn err_fetch;
    mt_PyErr_Restore_fn err_restore;
    mt_PyErr_Clear_fn err_clear;
    mt_PyGC_Disable_fn gc_disable;
    mt_PyGC_Enable_fn gc_enable;
    mt_PyImport_GetModuleDict_fn module_dict;
    mt_PyDict_GetItemString_fn dict_get_string;
    mt_PyDict_GetItem_fn dict_get;
    mt_PyModule_GetDict_fn module_get_dict;
    mt_PyLong_FromUnsignedLong_fn long_from_ulong;
    mt_PyThread_get_thread_ident_fn thread_ident;
    mt_PyGILState_Ensure_fn gil_ensure;
    mt_PyGILState_Release_fn gil_release;
} py;

/* MIOTOOL_TRACE_PYTHON: 0 every path, 1 only with the GIL held, 2 off,
 * 3 the pinned offsets on 3.11 and 3.12 even where faulthandler's writer
 * is exported (a check of that fallback). */
static int mt_py_mode;
static pthread_mutex_t mt_py_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set while this thread reads its stack: a runtime call the public API
 * might make meanwhile is not read again. */
static MT_TLS int mt_py_busy;

#define MT_SYM(field, name) (*(void **)&py.field = dlsym(RTLD_DEFAULT, name))

/* Looks CPython up, once it is there (a program may load it late: at
 * most once a second while it is not); never from a signal handler. */
void mt_python_resolve(void) {
    static _Atomic unsigned long long last_try;
    int state = atomic_load_explicit(&py.state, memory_order_acquire);
    if (state == 1)
        return;
    unsigned long long now = mt_now(), last = atomic_load(&last_try);
    if (state == -1 && now - last < 1000000000ull)
        return;
    atomic_store(&last_try, now);
    pthread_mutex_lock(&mt_py_lock);
    if (atomic_load(&py.state) == 1) {
        pthread_mutex_unlock(&mt_py_lock);
        return;
    }
    int saved = errno;
    const char *mode = getenv("MIOTOOL_TRACE_PYTHON");
    mt_py_mode = !mode                        ? 0
                 : strcmp(mode, "held") == 0    ? 1
                 : strcmp(mode, "off") == 0     ? 2
                 : strcmp(mode, "offsets") == 0 ? 3
                                                : 0;
    if (!MT_SYM(this_thread_state, "PyGILState_GetThisThreadState") || !MT_SYM(is_initialized, "Py_IsInitialized")) {
        atomic_store(&py.state, -1); /* looked up again on the next record */
        errno = saved;
        pthread_mutex_unlock(&mt_py_lock);
        return;
    }
    const unsigned long *hex = dlsym(RTLD_DEFAULT, "Py_Version"); /* 3.11+ */
    mt_Py_GetVersion_fn get_version = (mt_Py_GetVersion_fn)dlsym(RTLD_DEFAULT, "Py_GetVersion");
    int micro = 0;
    if (hex) {
        py.major = (int)((*hex >> 24) & 0xff);
        py.minor = (int)((*hex >> 16) & 0xff);
        micro = (int)((*hex >> 8) & 0xff);
    } else if (get_version) {
        const char *v = get_version(); /* "3.10.13 (main, ...)" */
        char *end;
        py.major = (int)strtol(v, &end, 10);
        py.minor = *end == '.' ? (int)strtol(end + 1, &end, 10) : 0;
        micro = *end == '.' ? (int)strtol(end + 1, &end, 10) : 0;
    }
    char *p = py.version;
    p += mt_fmt_u(p, (unsigned)py.major, 0);
    *p++ = '.';
    p += mt_fmt_u(p, (unsigned)py.minor, 0);
    *p++ = '.';
    p += mt_fmt_u(p, (unsigned)micro, 0);
    *p = '\0';

    MT_SYM(gil_check, "PyGILState_Check");
    if (!MT_SYM(unchecked_get, "PyThreadState_GetUnchecked")) /* 3.13 */
        MT_SYM(unchecked_get, "_PyThreadState_UncheckedGet");
    if (!MT_SYM(is_finalizing, "Py_IsFinalizing"))
        MT_SYM(is_finalizing, "_Py_IsFinalizing");
    MT_SYM(addr2line, "PyCode_Addr2Line");
    MT_SYM(dump, "_Py_DumpTraceback");
    MT_SYM(frame_line, "PyUnstable_InterpreterFrame_GetLine");
    py.code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    py.frame_type = dlsym(RTLD_DEFAULT, "PyFrame_Type");
    py.unicode_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    const struct mt_py_debug_offsets *debug = dlsym(RTLD_DEFAULT, "_PyRuntime");
    struct mt_py_debug_offsets head;
    if (py.major == 3 && py.minor >= 13 && debug && mt_peek(&head, debug, offsetof(struct mt_py_debug_offsets, runtime_state)) == 0 &&
        memcmp(head.cookie, MT_PY_DEBUG_COOKIE, 8) == 0) {
        py.free_threaded = head.free_threaded != 0;
        /* The layout is 3.13's; a later version's is another. */
        if (((head.version >> 24) & 0xff) == 3 && ((head.version >> 16) & 0xff) == 13)
            py.debug = debug;
    }
    MT_SYM(get_frame, "PyEval_GetFrame");
    MT_SYM(frame_code, "PyFrame_GetCode");
    MT_SYM(frame_back, "PyFrame_GetBack");
    MT_SYM(frame_lineno, "PyFrame_GetLineNumber");
    MT_SYM(getattr, "PyObject_GetAttrString");
    MT_SYM(generic_getattr, "PyObject_GenericGetAttr");
    MT_SYM(as_utf8, "PyUnicode_AsUTF8");
    MT_SYM(from_string, "PyUnicode_FromString");
    MT_SYM(decref, "Py_DecRef");
    MT_SYM(incref, "Py_IncRef");
    MT_SYM(err_fetch, "PyErr_Fetch");
    MT_SYM(err_restore, "PyErr_Restore");
    MT_SYM(err_clear, "PyErr_Clear");
    MT_SYM(gc_disable, "PyGC_Disable");
    MT_SYM(gc_enable, "PyGC_Enable");
    MT_SYM(module_dict, "PyImport_GetModuleDict");
    MT_SYM(dict_get_string, "PyDict_GetItemString");
    MT_SYM(dict_get, "PyDict_GetItem");
    MT_SYM(module_get_dict, "PyModule_GetDict");
    MT_SYM(long_from_ulong, "PyLong_FromUnsignedLong");
    MT_SYM(thread_ident, "PyThread_get_thread_ident");
    MT_SYM(gil_ensure, "PyGILState_Ensure");
    MT_SYM(gil_release, "PyGILState_Release");
    atomic_store_explicit(&py.state, 1, memory_order_release);
    errno = saved;
    pthread_mutex_unlock(&mt_py_lock);
}

/* ---- the section ---- */

struct mt_pyframes {
    struct mt_rec *r;
    size_t count_at, omitted_at, limit;
    unsigned count, omitted;
};

/* A fixed-width number field, written over once the count is known. */
static size_t mt_put_slot(struct mt_rec *r) {
    mt_put_bytes(r, "\t0000", 5);
    return r->n - 4;
}

static void mt_fill_slot(struct mt_rec *r, size_t at, unsigned v) {
    if (v > 9999)
        v = 9999;
    for (int i = 3; i >= 0; i--, v /= 10)
        r->b[at + (size_t)i] = (char)('0' + v % 10);
}

static void mt_py_frame(struct mt_pyframes *f, const char *file, size_t flen, int line, const char *func, size_t nlen) {
    if (flen > MT_PY_FILE_MAX)
        flen = MT_PY_FILE_MAX;
    if (nlen > MT_PY_FUNC_MAX)
        nlen = MT_PY_FUNC_MAX;
    if (f->count >= MT_PY_MAX_FRAMES || f->r->n + flen + nlen + 16 > f->limit) {
        f->omitted++;
        return;
    }
    mt_put_str(f->r, file, flen);
    mt_put_i(f->r, line < 0 ? 0 : line);
    mt_put_str(f->r, func, nlen);
    f->count++;
}

/* ---- strings without the GIL ---- */

static size_t mt_utf8(char *out, uint32_t c) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c >= 0xd800 && c < 0xe000) { /* a lone surrogate */
        out[0] = '?';
        return 1;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | ((c >> 18) & 7));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* A str's text as UTF-8 into out (cap bytes, NUL-terminated), read with
 * mt_peek: its length, "?" where it cannot be read. */
static size_t mt_py_text(const char *obj, size_t ascii_size, size_t compact_size, char *out, size_t cap) {
    const void *type = NULL;
    uint32_t state = 0;
    int64_t length = 0;
    if (!obj || mt_peek(&type, obj + MT_PY_OB_TYPE, sizeof type) || type != py.unicode_type ||
        mt_peek(&length, obj + MT_PY_UNICODE_LENGTH, sizeof length) ||
        mt_peek(&state, obj + MT_PY_UNICODE_STATE, sizeof state) || !MT_PY_UNICODE_COMPACT(state) || length < 0) {
        memcpy(out, "?", 2);
        return 1;
    }
    unsigned kind = MT_PY_UNICODE_KIND(state);
    const char *data = obj + (MT_PY_UNICODE_ASCII(state) ? ascii_size : compact_size);
    if (kind != 1 && kind != 2 && kind != 4) {
        memcpy(out, "?", 2);
        return 1;
    }
    size_t n = 0;
    unsigned char chunk[256];
    size_t per = sizeof chunk / kind;
    for (int64_t i = 0; i < length && n + 5 < cap;) {
        size_t want = (size_t)(length - i) < per ? (size_t)(length - i) : per;
        if (mt_peek(chunk, data + (size_t)i * kind, want * kind))
            break;
        for (size_t k = 0; k < want && n + 5 < cap; k++) {
            uint32_t c = kind == 1 ? chunk[k] : kind == 2 ? ((uint16_t *)(void *)chunk)[k] : ((uint32_t *)(void *)chunk)[k];
            n += mt_utf8(out + n, c);
        }
        i += (int64_t)want;
    }
    out[n] = '\0';
    return n;
}

/* ---- the paths ---- */

/* 3.10: frame objects, from the thread state's current frame. */
static const char *mt_py_walk_310(struct mt_pyframes *f, const char *ts) {
    const char *frame = NULL;
    if (mt_peek(&frame, ts + MT_PY310_TSTATE_FRAME, sizeof frame))
        return "the thread state could not be read";
    for (int depth = 0; frame && depth < MT_PY_MAX_DEPTH; depth++) {
        const void *type = NULL;
        const char *code = NULL, *back = NULL, *file = NULL, *name = NULL;
        int lasti = 0, lineno = 0;
        if (mt_peek(&type, frame + MT_PY_OB_TYPE, sizeof type) || type != py.frame_type ||
            mt_peek(&code, frame + MT_PY310_FRAME_CODE, sizeof code) ||
            mt_peek(&back, frame + MT_PY310_FRAME_BACK, sizeof back) ||
            mt_peek(&lasti, frame + MT_PY310_FRAME_LASTI, sizeof lasti) ||
            mt_peek(&lineno, frame + MT_PY310_FRAME_LINENO, sizeof lineno) ||
            mt_peek(&type, code + MT_PY_OB_TYPE, sizeof type) || type != py.code_type ||
            mt_peek(&file, code + MT_PY310_CODE_FILENAME, sizeof file) ||
            mt_peek(&name, code + MT_PY310_CODE_NAME, sizeof name))
            return f->count ? NULL : "a frame could not be read";
        char ftext[MT_PY_FILE_MAX + 8], ntext[MT_PY_FUNC_MAX + 8];
        size_t fl = mt_py_text(file, MT_PY310_ASCII_SIZE, MT_PY310_COMPACT_SIZE, ftext, sizeof ftext);
        size_t nl = mt_py_text(name, MT_PY310_ASCII_SIZE, MT_PY310_COMPACT_SIZE, ntext, sizeof ntext);
        int line = lineno;
        if (line == 0 && py.addr2line)
            line = py.addr2line((mt_PyCodeObject *)(uintptr_t)code, lasti < 0 ? -1 : lasti * MT_PY310_CODEUNIT);
        mt_py_frame(f, ftext, fl, line, ntext, nl);
        frame = back;
    }
    if (frame)
        f->omitted++;
    return NULL;
}

/* 3.11 and 3.12: interpreter frames, at offsets pinned to their headers. */
struct mt_py_layout {
    size_t tstate_cframe, cframe_current, code, previous, prev_instr, owner, filename, qualname, firsttraceable,
        adaptive, ascii, compact;
};
static const struct mt_py_layout mt_py311 = {
    MT_PY311_TSTATE_CFRAME,    MT_PY311_CFRAME_CURRENT,      MT_PY311_FRAME_CODE,    MT_PY311_FRAME_PREVIOUS,
    MT_PY311_FRAME_PREV_INSTR, MT_PY311_FRAME_OWNER,         MT_PY311_CODE_FILENAME, MT_PY311_CODE_QUALNAME,
    MT_PY311_CODE_FIRSTTRACEABLE, MT_PY311_CODE_ADAPTIVE,    MT_PY310_ASCII_SIZE,    MT_PY310_COMPACT_SIZE};
static const struct mt_py_layout mt_py312 = {
    MT_PY312_TSTATE_CFRAME,    MT_PY312_CFRAME_CURRENT,      MT_PY312_FRAME_CODE,    MT_PY312_FRAME_PREVIOUS,
    MT_PY312_FRAME_PREV_INSTR, MT_PY312_FRAME_OWNER,         MT_PY312_CODE_FILENAME, MT_PY312_CODE_QUALNAME,
    MT_PY312_CODE_FIRSTTRACEABLE, MT_PY312_CODE_ADAPTIVE,    MT_PY312_ASCII_SIZE,    MT_PY312_COMPACT_SIZE};

static const char *mt_py_walk_311(struct mt_pyframes *f, const char *ts) {
    const struct mt_py_layout *l = py.minor == 11 ? &mt_py311 : &mt_py312;
    const char *cframe = NULL, *frame = NULL;
    if (mt_peek(&cframe, ts + l->tstate_cframe, sizeof cframe) ||
        mt_peek(&frame, cframe + l->cframe_current, sizeof frame))
        return "the thread state could not be read";
    for (int depth = 0; frame && depth < MT_PY_MAX_DEPTH; depth++) {
        const char *code = NULL, *prev = NULL, *instr = NULL, *file = NULL, *name = NULL;
        const void *type = NULL;
        char owner = 0;
        int first = 0;
        if (mt_peek(&prev, frame + l->previous, sizeof prev) || mt_peek(&owner, frame + l->owner, sizeof owner))
            return f->count ? NULL : "a frame could not be read";
        if (py.minor == 12 && owner == MT_PY312_FRAME_OWNED_BY_CSTACK) {
            frame = prev;
            continue;
        }
        if (mt_peek(&code, frame + l->code, sizeof code) || mt_peek(&type, code + MT_PY_OB_TYPE, sizeof type) ||
            type != py.code_type || mt_peek(&instr, frame + l->prev_instr, sizeof instr) ||
            mt_peek(&first, code + l->firsttraceable, sizeof first) ||
            mt_peek(&file, code + l->filename, sizeof file) || mt_peek(&name, code + l->qualname, sizeof name))
            return f->count ? NULL : "a frame could not be read";
        ptrdiff_t addrq = instr - (code + l->adaptive);
        /* A frame not yet past its prologue is not one to show (as
         * CPython's own frame walk skips it). */
        if (owner != MT_PY_FRAME_OWNED_BY_GENERATOR && addrq < (ptrdiff_t)first * 2) {
            frame = prev;
            continue;
        }
        int line = 0;
        if (py.minor == 12 && py.frame_line)
            line = py.frame_line((mt_PyIFrame *)(uintptr_t)frame);
        else if (py.addr2line && addrq < (1 << 28))
            line = py.addr2line((mt_PyCodeObject *)(uintptr_t)code, addrq < 0 ? -1 : (int)addrq);
        char ftext[MT_PY_FILE_MAX + 8], ntext[MT_PY_FUNC_MAX + 8];
        size_t fl = mt_py_text(file, l->ascii, l->compact, ftext, sizeof ftext);
        size_t nl = mt_py_text(name, l->ascii, l->compact, ntext, sizeof ntext);
        mt_py_frame(f, ftext, fl, line, ntext, nl);
        frame = prev;
    }
    if (frame)
        f->omitted++;
    return NULL;
}

/* 3.13: interpreter frames, through the debug offsets. */
static const char *mt_py_walk_313(struct mt_pyframes *f, const char *ts) {
    const struct mt_py_debug_offsets *d = py.debug;
    const char *frame = NULL;
    if (mt_peek(&frame, ts + d->thread_state.current_frame, sizeof frame))
        return "the thread state could not be read";
    size_t ascii = d->unicode_object.asciiobject_size;
    for (int depth = 0; frame && depth < MT_PY_MAX_DEPTH; depth++) {
        const char *code = NULL, *prev = NULL, *instr = NULL, *file = NULL, *name = NULL;
        const void *type = NULL;
        char owner = 0;
        if (mt_peek(&prev, frame + d->interpreter_frame.previous, sizeof prev) ||
            mt_peek(&owner, frame + d->interpreter_frame.owner, sizeof owner))
            return f->count ? NULL : "a frame could not be read";
        if (owner == MT_PY313_FRAME_OWNED_BY_CSTACK) {
            frame = prev;
            continue;
        }
        if (mt_peek(&code, frame + d->interpreter_frame.executable, sizeof code) ||
            mt_peek(&type, code + d->pyobject.ob_type, sizeof type)) {
            frame = prev;
            continue;
        }
        if (type != py.code_type) { /* not a code object: no Python frame */
            frame = prev;
            continue;
        }
        if (mt_peek(&instr, frame + d->interpreter_frame.instr_ptr, sizeof instr) ||
            mt_peek(&file, code + d->code_object.filename, sizeof file) ||
            mt_peek(&name, code + d->code_object.qualname, sizeof name))
            return f->count ? NULL : "a frame could not be read";
        int line = 0;
        if (py.frame_line) {
            line = py.frame_line((mt_PyIFrame *)(uintptr_t)frame);
        } else if (py.addr2line) {
            ptrdiff_t addrq = instr - (code + d->code_object.co_code_adaptive);
            if (addrq >= 0 && addrq < (1 << 28))
                line = py.addr2line((mt_PyCodeObject *)(uintptr_t)code, (int)addrq);
        }
        char ftext[MT_PY_FILE_MAX + 8], ntext[MT_PY_FUNC_MAX + 8];
        size_t fl = mt_py_text(file, ascii, MT_PY312_COMPACT_SIZE, ftext, sizeof ftext);
        size_t nl = mt_py_text(name, ascii, MT_PY312_COMPACT_SIZE, ntext, sizeof ntext);
        mt_py_frame(f, ftext, fl, line, ntext, nl);
        frame = prev;
    }
    if (frame)
        f->omitted++;
    return NULL;
}

/* One line of _Py_DumpTraceback: '  File "F", line N in NAME'. */
static void mt_py_dump_line(struct mt_pyframes *f, const char *s, size_t n) {
    static const char head[] = "  File \"", mid[] = "\", line ", in[] = " in ";
    if (n >= 5 && memcmp(s, "  ...", 5) == 0) {
        f->omitted++; /* the writer stops at 100 frames: at least one more */
        return;
    }
    if (n < sizeof head - 1 || memcmp(s, head, sizeof head - 1) != 0)
        return;
    const char *file = s + sizeof head - 1, *end = s + n, *at = NULL;
    for (const char *p = file; p + sizeof mid - 1 <= end; p++)
        if (memcmp(p, mid, sizeof mid - 1) == 0)
            at = p; /* the last one: a file name may hold the text */
    if (!at)
        return;
    const char *num = at + sizeof mid - 1, *q = num;
    int line = 0;
    while (q < end && *q >= '0' && *q <= '9')
        line = line * 10 + (*q++ - '0');
    while (q < end && *q != ' ')
        q++; /* "???" for an unknown line */
    const char *func = "";
    size_t flen = 0;
    if ((size_t)(end - q) >= sizeof in - 1 && memcmp(q, in, sizeof in - 1) == 0) {
        func = q + sizeof in - 1;
        flen = (size_t)(end - func);
    }
    mt_py_frame(f, file, (size_t)(at - file), line, func, flen);
}

/* 3.11, 3.12: faulthandler's writer into a memfd (a pipe where there is
 * none: its reader never blocks, and a dump longer than the pipe holds
 * loses its tail), read back. */
static const char *mt_py_dump(struct mt_pyframes *f, const char *ts) {
    int fd = (int)syscall(SYS_memfd_create, "miotool-python", 1u /* MFD_CLOEXEC */);
    int rd = fd, wr = fd;
    if (fd < 0) {
        int p[2];
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
            return "no memfd or pipe to read the stack through";
        rd = p[0];
        wr = p[1];
    }
    py.dump(wr, (mt_PyThreadState *)(uintptr_t)ts);
    if (fd >= 0) {
        lseek(fd, 0, SEEK_SET);
    } else {
        close(wr);
    }
    char buf[1024], line[1200]; /* the writer cuts names at 500 characters */
    size_t len = 0;
    int skip = 0;
    ssize_t got;
    while ((got = read(rd, buf, sizeof buf)) > 0) {
        for (ssize_t k = 0; k < got; k++) {
            if (buf[k] != '\n') {
                if (len < sizeof line)
                    line[len++] = buf[k];
                else
                    skip = 1; /* a line longer than the section takes */
                continue;
            }
            if (skip)
                f->omitted++;
            else
                mt_py_dump_line(f, line, len);
            len = 0;
            skip = 0;
        }
    }
    close(rd);
    return NULL;
}

/* ---- with the GIL held: the public API ---- */

/* A str object's UTF-8 (the interpreter's own cache), or "?". */
static const char *mt_py_utf8(mt_PyObject *s) {
    const char *u = s ? py.as_utf8(s) : NULL;
    if (!u) {
        py.err_clear();
        return "?";
    }
    return u;
}

/* The thread's name in the threading module, when it has one: the
 * thread object in threading._active, its _name read without running any
 * of its code (the generic getattr: no property, no __getattr__). */
static void mt_py_threading_name(unsigned long ident, char *out, size_t cap) {
    if (!py.module_dict || !py.dict_get_string || !py.module_get_dict || !py.dict_get || !py.long_from_ulong ||
        !py.thread_ident || !py.generic_getattr || !py.from_string)
        return;
    mt_PyObject *modules = py.module_dict();
    mt_PyObject *threading = modules ? py.dict_get_string(modules, "threading") : NULL;
    if (!threading)
        return; /* never imported: no thread has a threading name */
    mt_PyObject *dict = py.module_get_dict(threading);
    mt_PyObject *active = dict ? py.dict_get_string(dict, "_active") : NULL;
    mt_PyObject *key = active ? py.long_from_ulong(ident) : NULL;
    mt_PyObject *thread = key ? py.dict_get(active, key) : NULL;
    if (key)
        py.decref(key);
    if (thread) {
        py.incref(thread);
        mt_PyObject *attr = py.from_string("_name");
        mt_PyObject *name = attr ? py.generic_getattr(thread, attr) : NULL;
        const char *u = name ? py.as_utf8(name) : NULL;
        if (u) {
            size_t n = strnlen(u, cap - 1);
            memcpy(out, u, n);
            out[n] = '\0';
        }
        if (name)
            py.decref(name);
        if (attr)
            py.decref(attr);
        py.decref(thread);
    }
    py.err_clear();
}

/* ---- the naming thread ----
 *
 * A thread that does not hold the GIL cannot read its threading name, and
 * must not wait for the GIL: a thread holding the GIL may be waiting for a
 * lock the calling thread holds (inside the runtime's call, in the
 * program). The observer's own thread takes the GIL instead, holding no
 * lock of anyone's, reads the name and hands it over through a slot; the
 * calling thread polls its slot for MT_PY_NAME_WAIT_NS at most and goes on
 * without a name after that. Slots are plain atomics (no mutex a fork
 * could leave held). */
#define MT_PY_NAME_SLOTS 16
#define MT_PY_NAME_WAIT_NS 50000000ull /* 50 ms, on a thread's first rare record only */
enum { MT_NAME_FREE, MT_NAME_CLAIMED, MT_NAME_ASKED, MT_NAME_WORKING, MT_NAME_ANSWERED, MT_NAME_ABANDONED };
static struct mt_py_name_slot {
    atomic_int state;
    unsigned long ident;
    char name[128];
} mt_py_name_slots[MT_PY_NAME_SLOTS];
static sem_t mt_py_name_sem;
static atomic_int mt_py_namer_pid;   /* the process whose naming thread runs */
static atomic_int mt_py_namer_start; /* the process that tried to start one */
/* The thread's name once answered: a thread asks until it is. */
static MT_TLS char mt_py_own_name[128];
static MT_TLS int mt_py_own_name_known;

static void *mt_py_namer(void *unused) {
    (void)unused;
    for (;;) {
        while (sem_wait(&mt_py_name_sem) != 0)
            if (errno != EINTR)
                return NULL;
        for (int i = 0; i < MT_PY_NAME_SLOTS; i++) {
            struct mt_py_name_slot *s = &mt_py_name_slots[i];
            int want = MT_NAME_ASKED;
            if (!atomic_compare_exchange_strong(&s->state, &want, MT_NAME_WORKING))
                continue;
            s->name[0] = '\0';
            /* A thread that takes the GIL once the interpreter finalizes
             * is ended (or parked) by CPython: this one holds nothing. */
            if (py.is_initialized() && !(py.is_finalizing && py.is_finalizing())) {
                unsigned gil = py.gil_ensure();
                int collector = py.gc_disable ? py.gc_disable() : 0;
                mt_py_threading_name(s->ident, s->name, sizeof s->name);
                if (collector)
                    py.gc_enable();
                py.gil_release(gil);
            }
            want = MT_NAME_WORKING;
            if (!atomic_compare_exchange_strong(&s->state, &want, MT_NAME_ANSWERED))
                atomic_store(&s->state, MT_NAME_FREE); /* the caller gave up waiting */
        }
    }
}

/* Starts the naming thread, once a process (a forked child needs its
 * own), with every signal blocked: the program's signals are not its.
 * The thread that starts it is the only one to try in its process; the
 * others get no name until it runs. */
static int mt_py_namer_running(void) {
    int pid = (int)getpid();
    if (atomic_load(&mt_py_namer_pid) == pid)
        return 1;
    int was = atomic_load(&mt_py_namer_start);
    if (was == pid || !atomic_compare_exchange_strong(&mt_py_namer_start, &was, pid))
        return 0; /* being started, or it could not be, in this process */
    for (int i = 0; i < MT_PY_NAME_SLOTS; i++)
        atomic_store(&mt_py_name_slots[i].state, MT_NAME_FREE); /* a parent's questions are not this process's */
    pthread_t t;
    pthread_attr_t attr;
    sigset_t all, old;
    int ok = sem_init(&mt_py_name_sem, 0, 0) == 0 && pthread_attr_init(&attr) == 0;
    if (ok) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        ok = pthread_create(&t, &attr, mt_py_namer, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    if (ok)
        atomic_store(&mt_py_namer_pid, pid);
    return ok;
}

static void mt_cat(char *buf, size_t cap, const char *s);

/* The calling thread's threading name when it does not hold the GIL, as
 * the naming thread reads it; "" when it cannot within the wait. */
static const char *mt_py_name_without_gil(void) {
    if (mt_py_own_name_known)
        return mt_py_own_name;
    if (!py.gil_ensure || !py.gil_release || !py.thread_ident || (mt_py_mode != 0 && mt_py_mode != 3) ||
        !mt_py_namer_running())
        return "";
    struct mt_py_name_slot *s = NULL;
    for (int i = 0; i < MT_PY_NAME_SLOTS && !s; i++) {
        int want = MT_NAME_FREE;
        if (atomic_compare_exchange_strong(&mt_py_name_slots[i].state, &want, MT_NAME_CLAIMED))
            s = &mt_py_name_slots[i]; /* claimed: its ident is written before it is asked */
    }
    if (!s)
        return ""; /* every slot busy: no name this time */
    s->ident = py.thread_ident();
    atomic_store(&s->state, MT_NAME_ASKED);
    sem_post(&mt_py_name_sem);
    unsigned long long deadline = mt_now() + MT_PY_NAME_WAIT_NS;
    struct timespec pause = {0, 100000}; /* 0.1 ms */
    for (;;) {
        int state = atomic_load(&s->state);
        if (state == MT_NAME_ANSWERED) {
            memcpy(mt_py_own_name, s->name, sizeof mt_py_own_name);
            mt_py_own_name[sizeof mt_py_own_name - 1] = '\0';
            mt_py_own_name_known = 1; /* "" too: a thread threading did not start has none */
            atomic_store(&s->state, MT_NAME_FREE);
            return mt_py_own_name;
        }
        if (mt_now() >= deadline) {
            /* Withdrawn while only asked; left to the naming thread to
             * free once it is working on it. */
            if (!atomic_compare_exchange_strong(&s->state, &state, state == MT_NAME_ASKED ? MT_NAME_FREE : MT_NAME_ABANDONED))
                continue; /* it changed meanwhile: look again */
            /* Once per thread: a GIL that stayed held elsewhere for the
             * whole wait (its holder may wait for a lock this thread
             * holds) would cost every later record of this thread the
             * same wait. It goes unnamed, and says so once. */
            mt_py_own_name[0] = '\0';
            mt_py_own_name_known = 1;
            char text[160] = "thread ";
            char num[24];
            num[mt_fmt_u(num, (unsigned long long)syscall(SYS_gettid), 0)] = '\0';
            mt_cat(text, sizeof text, num);
            mt_cat(text, sizeof text, ": its threading name was not read within 50 ms (the GIL stayed held by another thread)");
            mt_note("python", "unnamed", text);
            return "";
        }
        nanosleep(&pause, NULL);
    }
}

static struct mt_pyframes mt_py_head(struct mt_rec *r, const char *state, const char *why, const char *thread);

static void mt_py_public(struct mt_rec *r) {
    mt_PyObject *et = NULL, *ev = NULL, *etb = NULL;
    py.err_fetch(&et, &ev, &etb); /* the thread's own exception, kept */
    int collector = py.gc_disable ? py.gc_disable() : 0;
    char thread[128] = "";
    mt_py_threading_name(py.thread_ident(), thread, sizeof thread);
    struct mt_pyframes f = mt_py_head(r, "frames", "", thread);
    mt_PyFrameObject *frame = py.get_frame();
    if (frame)
        py.incref((mt_PyObject *)frame);
    for (int depth = 0; frame && depth < MT_PY_MAX_DEPTH; depth++) {
        mt_PyCodeObject *code = py.frame_code(frame);
        int line = py.frame_lineno(frame);
        mt_PyObject *file = code ? py.getattr((mt_PyObject *)code, "co_filename") : NULL;
        mt_PyObject *name = code && py.minor >= 11 ? py.getattr((mt_PyObject *)code, "co_qualname") : NULL;
        if (!name && code) {
            py.err_clear();
            name = py.getattr((mt_PyObject *)code, "co_name");
        }
        const char *fs = mt_py_utf8(file), *ns = mt_py_utf8(name);
        mt_py_frame(&f, fs, strlen(fs), line, ns, strlen(ns));
        if (file)
            py.decref(file);
        if (name)
            py.decref(name);
        if (code)
            py.decref((mt_PyObject *)code);
        mt_PyFrameObject *back = py.frame_back(frame);
        py.decref((mt_PyObject *)frame);
        frame = back;
    }
    if (frame) {
        f.omitted++;
        py.decref((mt_PyObject *)frame);
    }
    mt_fill_slot(r, f.count_at, f.count);
    mt_fill_slot(r, f.omitted_at, f.omitted);
    if (collector)
        py.gc_enable();
    py.err_restore(et, ev, etb);
}

/* ---- the section ---- */

static struct mt_pyframes mt_py_head(struct mt_rec *r, const char *state, const char *why, const char *thread) {
    struct mt_pyframes f = {.r = r};
    size_t start = r->n;
    mt_put_str(r, "p", 1);
    mt_put_str(r, state, 16);
    mt_put_str(r, why, 300);
    mt_put_str(r, thread, 64);
    mt_put_str(r, py.version, sizeof py.version);
    f.count_at = mt_put_slot(r);
    f.omitted_at = mt_put_slot(r);
    /* The native callers that follow keep some room. */
    f.limit = start + MT_PY_BUDGET;
    if (f.limit > sizeof r->b - 2 - 2000)
        f.limit = sizeof r->b - 2 - 2000;
    return f;
}

/* Appends s to buf (at most cap bytes with the NUL), as strcat would:
 * snprintf is not async-signal-safe. */
static void mt_cat(char *buf, size_t cap, const char *s) {
    size_t n = strnlen(buf, cap - 1);
    while (*s && n < cap - 1)
        buf[n++] = *s++;
    buf[n] = '\0';
}

static void mt_unavailable(struct mt_rec *r, const char *why) {
    struct mt_pyframes f = mt_py_head(r, "unavailable", why, "");
    (void)f;
}

/* Whether this thread holds the GIL. PyGILState_Check alone answers 1
 * whenever the runtime turned it off; the attached thread state is this
 * thread's only while it holds the GIL (3.10, 3.11: the GIL holder's;
 * 3.12+: this thread's own or NULL). */
static int mt_py_held(mt_PyThreadState *ts) {
    if (!py.gil_check || !py.gil_check())
        return 0;
    return !py.unchecked_get || py.unchecked_get() == ts;
}

/* Why a thread that does not hold the GIL has no frames. */
static void mt_py_not_held(char *why, size_t cap, mt_PyThreadState *ts, const char *reason) {
    mt_cat(why, cap, reason);
    /* 3.10, 3.11: the attached state is the GIL holder's. */
    if (py.minor <= 11 && py.unchecked_get) {
        mt_PyThreadState *holder = py.unchecked_get();
        if (holder && holder != ts)
            mt_cat(why, cap, "; GIL held by another thread");
    }
}

void mt_put_python(struct mt_rec *r, int signal_safe) {
    if (!signal_safe)
        mt_python_resolve();
    if (atomic_load_explicit(&py.state, memory_order_acquire) != 1)
        return; /* no CPython in this process */
    char why[256] = "", num[24];
    mt_PyThreadState *ts = NULL;
    if (!py.is_initialized()) {
        mt_py_head(r, "native", "", ""); /* no interpreter: no thread has a state */
        return;
    }
    if (py.is_finalizing && py.is_finalizing()) {
        mt_unavailable(r, "the interpreter is finalizing");
        return;
    }
    if (!(ts = py.this_thread_state())) {
        mt_py_head(r, "native", "", "");
        return;
    }
    if (py.major != 3 || py.minor < 10) {
        mt_cat(why, sizeof why, "CPython ");
        num[mt_fmt_u(num, (unsigned)py.major, 0)] = '\0';
        mt_cat(why, sizeof why, num);
        mt_cat(why, sizeof why, ".");
        num[mt_fmt_u(num, (unsigned)py.minor, 0)] = '\0';
        mt_cat(why, sizeof why, num);
        mt_cat(why, sizeof why, ": not supported (3.10 to 3.13 are)");
        mt_unavailable(r, why);
        return;
    }
    if (py.free_threaded) {
        mt_unavailable(r, "free-threaded CPython: not supported");
        return;
    }
    if (mt_py_busy) {
        mt_unavailable(r, "re-entered while reading this thread's stack");
        return;
    }
    if (mt_py_mode == 2) {
        mt_unavailable(r, "reading Python stacks is off (MIOTOOL_TRACE_PYTHON=off)");
        return;
    }
    mt_py_busy = 1;
    if (!signal_safe && py.get_frame && py.frame_code && py.frame_back && py.frame_lineno && py.getattr &&
        py.as_utf8 && py.decref && py.incref && py.err_fetch && py.err_restore && py.err_clear && mt_py_held(ts)) {
        mt_py_public(r);
        mt_py_busy = 0;
        return;
    }
    size_t mark = r->n;
    const char *failed = NULL, *name = signal_safe ? "" : mt_py_name_without_gil();
    struct mt_pyframes f;
    if (mt_py_mode == 1) {
        mt_py_not_held(why, sizeof why, ts,
                       "this thread does not hold the GIL, and MIOTOOL_TRACE_PYTHON=held reads frames only with it");
        failed = why;
    } else if (py.minor == 10) {
        f = mt_py_head(r, "frames", "", name);
        failed = mt_py_walk_310(&f, (const char *)ts);
    } else if (py.minor <= 12 && py.dump && mt_py_mode != 3) {
        f = mt_py_head(r, "frames", "", name);
        failed = mt_py_dump(&f, (const char *)ts);
    } else if (py.minor <= 12) {
        f = mt_py_head(r, "frames", "", name);
        failed = mt_py_walk_311(&f, (const char *)ts);
    } else if (py.minor == 13 && py.debug) {
        f = mt_py_head(r, "frames", "", name);
        failed = mt_py_walk_313(&f, (const char *)ts);
    } else {
        mt_cat(why, sizeof why, "CPython 3.");
        num[mt_fmt_u(num, (unsigned)py.minor, 0)] = '\0';
        mt_cat(why, sizeof why, num);
        mt_py_not_held(why, sizeof why, ts,
                       py.minor == 13 ? " has no debug offsets in _PyRuntime, and this thread does not hold the GIL"
                                      : ": frames of a thread that does not hold the GIL are read only on 3.10 to 3.13");
        failed = why;
    }
    if (failed) {
        r->n = mark;
        mt_unavailable(r, failed);
    } else {
        mt_fill_slot(r, f.count_at, f.count);
        mt_fill_slot(r, f.omitted_at, f.omitted);
    }
    mt_py_busy = 0;
}
