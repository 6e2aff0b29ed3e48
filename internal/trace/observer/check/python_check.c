/*
 * Holds the observer's CPython declarations and offsets (../mt_python.h) to
 * one CPython version's real headers: it compiles only where every mt_
 * type is the header's type, every function the observer looks up has the
 * header's type, and every offset it reads at is the header's.
 * TestPythonDeclarationsMatchRealHeaders compiles it against each
 * supported version the machine has, e.g.
 *
 *   gcc -std=gnu11 -fsyntax-only -Wall -Werror \
 *       -I ~/.pyenv/versions/3.13.0/include/python3.13 python_check.c
 *
 * and with -DMIOTOOL_MUST_FAIL it must fail, naming a misplaced offset of
 * the version's frames.
 */
#include <Python.h>
#include <frameobject.h>
#include <stddef.h>

/* The internal headers: _Py_DumpTraceback (3.11, 3.12), the frame owners
 * and the debug offsets (3.13). */
#define Py_BUILD_CORE 1
#if PY_MINOR_VERSION >= 11 && PY_MINOR_VERSION <= 12
#include <internal/pycore_traceback.h>
#endif
#if PY_MINOR_VERSION >= 13
#include <internal/pycore_frame.h>
#include <internal/pycore_runtime.h>
#endif

#include "../mt_python.h"

#if PY_MAJOR_VERSION != 3 || PY_MINOR_VERSION < 10 || PY_MINOR_VERSION > 13
#error "the observer reads CPython 3.10 to 3.13"
#endif

#define SAME_TYPE(mine, theirs) \
    _Static_assert(__builtin_types_compatible_p(mine, theirs), #mine " is not the header's " #theirs);
#define SAME_FN(mine, fn) SAME_TYPE(mine, __typeof__(&fn))
#define AT(value, where) _Static_assert((value) == (where), #value " is not " #where);

SAME_TYPE(mt_PyObject, PyObject)
SAME_TYPE(mt_PyThreadState, PyThreadState)
SAME_TYPE(mt_PyFrameObject, PyFrameObject)
SAME_TYPE(mt_PyCodeObject, PyCodeObject)

SAME_FN(mt_PyGILState_GetThisThreadState_fn, PyGILState_GetThisThreadState)
SAME_FN(mt_PyGILState_Check_fn, PyGILState_Check)
SAME_FN(mt_PyGILState_Ensure_fn, PyGILState_Ensure)
SAME_FN(mt_PyGILState_Release_fn, PyGILState_Release)
SAME_FN(mt_Py_IsInitialized_fn, Py_IsInitialized)
SAME_FN(mt_Py_GetVersion_fn, Py_GetVersion)
SAME_FN(mt_PyCode_Addr2Line_fn, PyCode_Addr2Line)
SAME_FN(mt_PyEval_GetFrame_fn, PyEval_GetFrame)
SAME_FN(mt_PyFrame_GetCode_fn, PyFrame_GetCode)
SAME_FN(mt_PyFrame_GetBack_fn, PyFrame_GetBack)
SAME_FN(mt_PyFrame_GetLineNumber_fn, PyFrame_GetLineNumber)
SAME_FN(mt_PyObject_GetAttrString_fn, PyObject_GetAttrString)
SAME_FN(mt_PyObject_GenericGetAttr_fn, PyObject_GenericGetAttr)
SAME_FN(mt_PyUnicode_AsUTF8_fn, PyUnicode_AsUTF8)
SAME_FN(mt_PyUnicode_FromString_fn, PyUnicode_FromString)
SAME_FN(mt_Py_DecRef_fn, Py_DecRef)
SAME_FN(mt_Py_IncRef_fn, Py_IncRef)
SAME_FN(mt_PyErr_Fetch_fn, PyErr_Fetch)
SAME_FN(mt_PyErr_Restore_fn, PyErr_Restore)
SAME_FN(mt_PyErr_Clear_fn, PyErr_Clear)
SAME_FN(mt_PyGC_Disable_fn, PyGC_Disable)
SAME_FN(mt_PyGC_Enable_fn, PyGC_Enable)
SAME_FN(mt_PyImport_GetModuleDict_fn, PyImport_GetModuleDict)
SAME_FN(mt_PyDict_GetItemString_fn, PyDict_GetItemString)
SAME_FN(mt_PyDict_GetItem_fn, PyDict_GetItem)
SAME_FN(mt_PyModule_GetDict_fn, PyModule_GetDict)
SAME_FN(mt_PyLong_FromUnsignedLong_fn, PyLong_FromUnsignedLong)
SAME_FN(mt_PyThread_get_thread_ident_fn, PyThread_get_thread_ident)

#if PY_MINOR_VERSION <= 12
SAME_FN(mt_PyThreadState_UncheckedGet_fn, _PyThreadState_UncheckedGet)
SAME_FN(mt_Py_IsFinalizing_fn, _Py_IsFinalizing)
#else
SAME_FN(mt_PyThreadState_UncheckedGet_fn, PyThreadState_GetUnchecked)
SAME_FN(mt_Py_IsFinalizing_fn, Py_IsFinalizing)
#endif
#if PY_MINOR_VERSION >= 11
SAME_TYPE(const unsigned long, __typeof__(Py_Version))
#endif
#if PY_MINOR_VERSION >= 11 && PY_MINOR_VERSION <= 12
SAME_FN(mt_Py_DumpTraceback_fn, _Py_DumpTraceback)
#endif
#if PY_MINOR_VERSION >= 12
SAME_TYPE(mt_PyIFrame, struct _PyInterpreterFrame)
SAME_FN(mt_PyUnstable_InterpreterFrame_GetLine_fn, PyUnstable_InterpreterFrame_GetLine)
#endif

/* Every version: an object's type, a str's length and state word. */
AT(MT_PY_OB_TYPE, offsetof(PyObject, ob_type))
AT(MT_PY_UNICODE_LENGTH, offsetof(PyASCIIObject, length))
AT(MT_PY_UNICODE_STATE, offsetof(PyASCIIObject, state))
_Static_assert(sizeof(((PyASCIIObject *)0)->state) == 4, "the state word is 4 bytes");
#if PY_MINOR_VERSION <= 11
AT(MT_PY310_ASCII_SIZE, sizeof(PyASCIIObject))
AT(MT_PY310_COMPACT_SIZE, sizeof(PyCompactUnicodeObject))
#else
AT(MT_PY312_ASCII_SIZE, sizeof(PyASCIIObject))
AT(MT_PY312_COMPACT_SIZE, sizeof(PyCompactUnicodeObject))
#endif

#if PY_MINOR_VERSION == 10
AT(MT_PY310_TSTATE_FRAME, offsetof(PyThreadState, frame))
SAME_TYPE(__typeof__(((PyThreadState *)0)->frame), PyFrameObject *)
AT(MT_PY310_FRAME_BACK, offsetof(PyFrameObject, f_back))
AT(MT_PY310_FRAME_CODE, offsetof(PyFrameObject, f_code))
AT(MT_PY310_FRAME_LASTI, offsetof(PyFrameObject, f_lasti))
AT(MT_PY310_FRAME_LINENO, offsetof(PyFrameObject, f_lineno))
SAME_TYPE(__typeof__(((PyFrameObject *)0)->f_lasti), int)
SAME_TYPE(__typeof__(((PyFrameObject *)0)->f_lineno), int)
AT(MT_PY310_CODE_FIRSTLINENO, offsetof(PyCodeObject, co_firstlineno))
AT(MT_PY310_CODE_FILENAME, offsetof(PyCodeObject, co_filename))
AT(MT_PY310_CODE_NAME, offsetof(PyCodeObject, co_name))
AT(MT_PY310_CODEUNIT, sizeof(_Py_CODEUNIT))
#ifdef MIOTOOL_MUST_FAIL
AT(MT_PY310_FRAME_BACK, offsetof(PyFrameObject, f_code))
#endif
#endif

#if PY_MINOR_VERSION == 11 || PY_MINOR_VERSION == 12
#include <internal/pycore_frame.h>
#if PY_MINOR_VERSION == 11
#define V(name) MT_PY311_##name
#else
#define V(name) MT_PY312_##name
#endif
AT(V(TSTATE_CFRAME), offsetof(PyThreadState, cframe))
AT(V(CFRAME_CURRENT), offsetof(_PyCFrame, current_frame))
AT(V(FRAME_CODE), offsetof(_PyInterpreterFrame, f_code))
AT(V(FRAME_PREVIOUS), offsetof(_PyInterpreterFrame, previous))
AT(V(FRAME_PREV_INSTR), offsetof(_PyInterpreterFrame, prev_instr))
AT(V(FRAME_OWNER), offsetof(_PyInterpreterFrame, owner))
AT(V(CODE_FILENAME), offsetof(PyCodeObject, co_filename))
AT(V(CODE_QUALNAME), offsetof(PyCodeObject, co_qualname))
AT(V(CODE_FIRSTTRACEABLE), offsetof(PyCodeObject, _co_firsttraceable))
AT(V(CODE_ADAPTIVE), offsetof(PyCodeObject, co_code_adaptive))
SAME_TYPE(__typeof__(((_PyInterpreterFrame *)0)->owner), char)
SAME_TYPE(__typeof__(((PyCodeObject *)0)->_co_firsttraceable), int)
AT(sizeof(_Py_CODEUNIT), 2)
AT(MT_PY_FRAME_OWNED_BY_GENERATOR, FRAME_OWNED_BY_GENERATOR)
#if PY_MINOR_VERSION == 12
AT(MT_PY312_FRAME_OWNED_BY_CSTACK, FRAME_OWNED_BY_CSTACK)
#endif
#endif

#if PY_MINOR_VERSION == 13
/* The debug offsets, field by field, and where they are. */
_Static_assert(offsetof(_PyRuntimeState, debug_offsets) == 0, "_PyRuntime begins with its debug offsets");
AT(sizeof(struct mt_py_debug_offsets), sizeof(_Py_DebugOffsets))
#define DEBUG(group, field) \
    AT(offsetof(struct mt_py_debug_offsets, group.field), offsetof(_Py_DebugOffsets, group.field))
AT(offsetof(struct mt_py_debug_offsets, version), offsetof(_Py_DebugOffsets, version))
AT(offsetof(struct mt_py_debug_offsets, free_threaded), offsetof(_Py_DebugOffsets, free_threaded))
DEBUG(runtime_state, finalizing)
DEBUG(thread_state, current_frame)
DEBUG(thread_state, native_thread_id)
DEBUG(interpreter_frame, previous)
DEBUG(interpreter_frame, executable)
DEBUG(interpreter_frame, instr_ptr)
DEBUG(interpreter_frame, owner)
DEBUG(code_object, filename)
DEBUG(code_object, qualname)
DEBUG(code_object, co_code_adaptive)
DEBUG(pyobject, ob_type)
DEBUG(unicode_object, state)
DEBUG(unicode_object, length)
DEBUG(unicode_object, asciiobject_size)
DEBUG(gc, collecting)
AT(MT_PY313_FRAME_OWNED_BY_CSTACK, FRAME_OWNED_BY_CSTACK)
SAME_TYPE(__typeof__(((_PyInterpreterFrame *)0)->owner), char)
#ifdef MIOTOOL_MUST_FAIL
AT(offsetof(struct mt_py_debug_offsets, thread_state.current_frame), offsetof(_Py_DebugOffsets, thread_state.interp))
#endif
#endif

#if defined(MIOTOOL_MUST_FAIL) && PY_MINOR_VERSION != 10 && PY_MINOR_VERSION != 13
AT(V(FRAME_PREVIOUS), offsetof(_PyInterpreterFrame, prev_instr))
#endif
