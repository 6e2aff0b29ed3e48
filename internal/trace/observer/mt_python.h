/*
 * The few CPython functions, types and struct offsets the observer uses to
 * read the calling thread's Python stack (python.c), declared under its own
 * names so that it builds with no Python header and links no libpython:
 * every function is looked up at run time with dlsym. Pointer types use
 * CPython's own struct tags, so that check/python_check.c, compiled against
 * each supported version's real headers, holds every declaration and
 * offset here to them (TestPythonDeclarationsMatchRealHeaders).
 *
 * Supported: CPython 3.10 to 3.13, default (GIL) builds.
 */
#ifndef MT_PYTHON_H
#define MT_PYTHON_H

#include <stddef.h>
#include <stdint.h>

typedef struct _object mt_PyObject;            /* PyObject */
typedef struct _ts mt_PyThreadState;           /* PyThreadState */
typedef struct _frame mt_PyFrameObject;        /* PyFrameObject */
typedef struct PyCodeObject mt_PyCodeObject;   /* PyCodeObject */
typedef struct _PyInterpreterFrame mt_PyIFrame; /* 3.12+: _PyInterpreterFrame */

/* Every version: the thread's own state, read from its thread-specific
 * slot (what faulthandler reads, no GIL needed), and whether it holds the
 * GIL. */
typedef mt_PyThreadState *(*mt_PyGILState_GetThisThreadState_fn)(void);
typedef int (*mt_PyGILState_Check_fn)(void);
/* The attached thread state (3.10, 3.11: whichever thread holds the GIL;
 * 3.12+: this thread's, NULL when detached). Only compared with the
 * thread's own state, never used as it. 3.10-3.12 _PyThreadState_UncheckedGet,
 * 3.13 PyThreadState_GetUnchecked. */
typedef mt_PyThreadState *(*mt_PyThreadState_UncheckedGet_fn)(void);
typedef int (*mt_Py_IsInitialized_fn)(void);
/* The observer's own naming thread takes the GIL with these, never a
 * thread of the program (PyGILState_STATE is an enum of two values, which
 * the C compiler keeps in an unsigned int). */
typedef unsigned (*mt_PyGILState_Ensure_fn)(void);
typedef void (*mt_PyGILState_Release_fn)(unsigned state);
typedef int (*mt_Py_IsFinalizing_fn)(void); /* 3.10-3.12 _Py_IsFinalizing, 3.13 Py_IsFinalizing */
typedef const char *(*mt_Py_GetVersion_fn)(void);
typedef int (*mt_PyCode_Addr2Line_fn)(mt_PyCodeObject *code, int addrq);

/* 3.11, 3.12: faulthandler's writer, read-only and signal-safe. */
typedef void (*mt_Py_DumpTraceback_fn)(int fd, mt_PyThreadState *tstate);

/* 3.12, 3.13: a frame's line, read-only. */
typedef int (*mt_PyUnstable_InterpreterFrame_GetLine_fn)(mt_PyIFrame *frame);

/* With the GIL held: the public API. */
typedef mt_PyFrameObject *(*mt_PyEval_GetFrame_fn)(void);
typedef mt_PyCodeObject *(*mt_PyFrame_GetCode_fn)(mt_PyFrameObject *frame);
typedef mt_PyFrameObject *(*mt_PyFrame_GetBack_fn)(mt_PyFrameObject *frame);
typedef int (*mt_PyFrame_GetLineNumber_fn)(mt_PyFrameObject *frame);
typedef mt_PyObject *(*mt_PyObject_GetAttrString_fn)(mt_PyObject *o, const char *name);
typedef mt_PyObject *(*mt_PyObject_GenericGetAttr_fn)(mt_PyObject *o, mt_PyObject *name);
typedef const char *(*mt_PyUnicode_AsUTF8_fn)(mt_PyObject *unicode);
typedef mt_PyObject *(*mt_PyUnicode_FromString_fn)(const char *u);
typedef void (*mt_Py_DecRef_fn)(mt_PyObject *o);
typedef void (*mt_Py_IncRef_fn)(mt_PyObject *o);
typedef void (*mt_PyErr_Fetch_fn)(mt_PyObject **type, mt_PyObject **value, mt_PyObject **traceback);
typedef void (*mt_PyErr_Restore_fn)(mt_PyObject *type, mt_PyObject *value, mt_PyObject *traceback);
typedef void (*mt_PyErr_Clear_fn)(void);
typedef int (*mt_PyGC_Disable_fn)(void);
typedef int (*mt_PyGC_Enable_fn)(void);
typedef mt_PyObject *(*mt_PyImport_GetModuleDict_fn)(void);
typedef mt_PyObject *(*mt_PyDict_GetItemString_fn)(mt_PyObject *dict, const char *key);
typedef mt_PyObject *(*mt_PyDict_GetItem_fn)(mt_PyObject *dict, mt_PyObject *key);
typedef mt_PyObject *(*mt_PyModule_GetDict_fn)(mt_PyObject *module);
typedef mt_PyObject *(*mt_PyLong_FromUnsignedLong_fn)(unsigned long v);
typedef unsigned long (*mt_PyThread_get_thread_ident_fn)(void);

/* Every version: where an object's type is. */
#define MT_PY_OB_TYPE 8

/* str (PyASCIIObject, PyCompactUnicodeObject): the state word and its
 * bits (interned:2, kind:3, compact:1, ascii:1), where a compact string's
 * characters start, by version. */
#define MT_PY_UNICODE_LENGTH 16
#define MT_PY_UNICODE_STATE 32
#define MT_PY_UNICODE_KIND(state) (((state) >> 2) & 7)
#define MT_PY_UNICODE_COMPACT(state) (((state) >> 5) & 1)
#define MT_PY_UNICODE_ASCII(state) (((state) >> 6) & 1)
#define MT_PY310_ASCII_SIZE 48   /* sizeof(PyASCIIObject), 3.10 and 3.11 */
#define MT_PY310_COMPACT_SIZE 72 /* sizeof(PyCompactUnicodeObject), 3.10 and 3.11 */
#define MT_PY312_ASCII_SIZE 40   /* 3.12 and 3.13 */
#define MT_PY312_COMPACT_SIZE 56 /* 3.12 and 3.13 */

/* 3.10: PyThreadState.frame, the frame object chain, the code object. */
#define MT_PY310_TSTATE_FRAME 24
#define MT_PY310_FRAME_BACK 24
#define MT_PY310_FRAME_CODE 32
#define MT_PY310_FRAME_LASTI 96
#define MT_PY310_FRAME_LINENO 100
#define MT_PY310_CODE_FIRSTLINENO 40
#define MT_PY310_CODE_FILENAME 104
#define MT_PY310_CODE_NAME 112
#define MT_PY310_CODEUNIT 2 /* sizeof(_Py_CODEUNIT) */

/* 3.11 and 3.12, where _Py_DumpTraceback is not exported (or
 * MIOTOOL_TRACE_PYTHON=offsets asks): PyThreadState.cframe, its current
 * interpreter frame, the frame chain, the code object. */
#define MT_PY311_TSTATE_CFRAME 56
#define MT_PY311_CFRAME_CURRENT 8
#define MT_PY311_FRAME_CODE 32
#define MT_PY311_FRAME_PREVIOUS 48
#define MT_PY311_FRAME_PREV_INSTR 56
#define MT_PY311_FRAME_OWNER 69
#define MT_PY311_CODE_FILENAME 112
#define MT_PY311_CODE_QUALNAME 128
#define MT_PY311_CODE_FIRSTTRACEABLE 168
#define MT_PY311_CODE_ADAPTIVE 184
#define MT_PY312_TSTATE_CFRAME 56
#define MT_PY312_CFRAME_CURRENT 0
#define MT_PY312_FRAME_CODE 0
#define MT_PY312_FRAME_PREVIOUS 8
#define MT_PY312_FRAME_PREV_INSTR 56
#define MT_PY312_FRAME_OWNER 70
#define MT_PY312_CODE_FILENAME 112
#define MT_PY312_CODE_QUALNAME 128
#define MT_PY312_CODE_FIRSTTRACEABLE 176
#define MT_PY312_CODE_ADAPTIVE 192
#define MT_PY312_FRAME_OWNED_BY_CSTACK 3 /* a shim frame, not code */
#define MT_PY_FRAME_OWNED_BY_GENERATOR 1

/* 3.13: the debug offsets CPython publishes at the start of _PyRuntime for
 * profilers (Include/internal/pycore_runtime.h), as far as the observer
 * reads them; check/python_check.c holds each field to the real struct. */
struct mt_py_debug_offsets {
    char cookie[8]; /* "xdebugpy" */
    uint64_t version;
    uint64_t free_threaded;
    struct {
        uint64_t size, finalizing, interpreters_head;
    } runtime_state;
    struct {
        uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil, gil_runtime_state,
            gil_runtime_state_enabled, gil_runtime_state_locked, gil_runtime_state_holder;
    } interpreter_state;
    struct {
        uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk, status;
    } thread_state;
    struct {
        uint64_t size, previous, executable, instr_ptr, localsplus, owner;
    } interpreter_frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames, localspluskinds,
            co_code_adaptive;
    } code_object;
    struct {
        uint64_t size, ob_type;
    } pyobject;
    struct {
        uint64_t size, tp_name, tp_repr, tp_flags;
    } type_object;
    struct {
        uint64_t size, ob_item, ob_size;
    } tuple_object;
    struct {
        uint64_t size, ob_item, ob_size;
    } list_object;
    struct {
        uint64_t size, ma_keys, ma_values;
    } dict_object;
    struct {
        uint64_t size, ob_fval;
    } float_object;
    struct {
        uint64_t size, lv_tag, ob_digit;
    } long_object;
    struct {
        uint64_t size, ob_size, ob_sval;
    } bytes_object;
    struct {
        uint64_t size, state, length, asciiobject_size;
    } unicode_object;
    struct {
        uint64_t size, collecting;
    } gc;
};
#define MT_PY_DEBUG_COOKIE "xdebugpy"
/* 3.13's frame owners: a frame owned by the C stack is a shim, not code. */
#define MT_PY313_FRAME_OWNED_BY_CSTACK 3

#endif
