/*
 * Holds the MIOpen binding and its stand-in to the real miopen.h: it
 * compiles only where they agree. TestBindingMatchesMIOpenHeader compiles
 * it with g++ (miopen.h is C++ only) against the reference miopen.h beside
 * the module, on MIOpen's HIP backend as ROCm builds it (so the stream type
 * is the HIP 6.3 reference's hipStream_t), with MIOTOOL_BINDING naming a
 * file the test writes from the Go side:
 *
 *   - MIOTOOL_BOUND(name) for every symbol of the binding table: the
 *     function must be in mockmiopen_api.h's lists, whose types must be
 *     miopen.h's (checked below), so no bound function escapes the check;
 *   - MIOTOOL_NUMBER(name, value) for every enumerator the binding passes
 *     or decodes by number: the status codes, miopenFloat, the convolution
 *     mode and the forward algorithms (as miopenConvFwdAlgorithm_t and as
 *     miopenConvAlgorithm_t, which share the numbers);
 *   - MIOTOOL_SIZE(type, size) and MIOTOOL_FIELD(type, field, offset, size)
 *     for the Go mirrors of miopenConvAlgoPerf_t and miopenConvSolution_t.
 *
 * The find modes (MIOPEN_FIND_MODE, miopenConvolutionFindMode_t) are not
 * here: MIOpen declares that enum in miopen_internal.h, not in miopen.h,
 * and the binding passes no find mode; miotool reads the variable's numbers
 * for its own finder.
 *
 * The stand-in is held to the same header: its function lists (which
 * mockmiopen.c is compiled against), the enumerators it returns and tests,
 * and its copies of the two structs, field by field.
 */
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <miopen/miopen.h>

#include "mockmiopen_api.h"

#define SAME(ret, name, params)                                                  \
    static_assert(std::is_same<decltype(&name), ret(*) params>::value,          \
                  #name ": the stand-in declares another type than miopen.h"); \
    using mockmiopen_type_##name = ret(*) params;
MOCKMIOPEN_API(SAME)
MOCKMIOPEN_HIP_API(SAME)

#define STAND_IN_NUMBER(name, value) \
    static_assert(name == value, "the stand-in's " #name " is not the header's");
MOCKMIOPEN_NUMBERS(STAND_IN_NUMBER)

#define STAND_IN_FIELD(real, mock, field)                                                 \
    static_assert(offsetof(real, field) == offsetof(mock, field) &&                       \
                      sizeof(static_cast<real *>(nullptr)->field) ==                      \
                          sizeof(static_cast<mock *>(nullptr)->field),                    \
                  "the stand-in's " #real "." #field " is not where the header puts it");
static_assert(sizeof(miopenConvAlgoPerf_t) == sizeof(mockmiopen_conv_algo_perf),
              "the stand-in's miopenConvAlgoPerf_t is not the header's size");
STAND_IN_FIELD(miopenConvAlgoPerf_t, mockmiopen_conv_algo_perf, fwd_algo)
STAND_IN_FIELD(miopenConvAlgoPerf_t, mockmiopen_conv_algo_perf, time)
STAND_IN_FIELD(miopenConvAlgoPerf_t, mockmiopen_conv_algo_perf, memory)
static_assert(sizeof(miopenConvSolution_t) == sizeof(mockmiopen_conv_solution),
              "the stand-in's miopenConvSolution_t is not the header's size");
STAND_IN_FIELD(miopenConvSolution_t, mockmiopen_conv_solution, time)
STAND_IN_FIELD(miopenConvSolution_t, mockmiopen_conv_solution, workspace_size)
STAND_IN_FIELD(miopenConvSolution_t, mockmiopen_conv_solution, solution_id)
STAND_IN_FIELD(miopenConvSolution_t, mockmiopen_conv_solution, algorithm)

/* The Go side, as the test writes it. */
#define MIOTOOL_BOUND(name)                                                           \
    static_assert(std::is_same<decltype(&name), mockmiopen_type_##name>::value,      \
                  #name ": the binding calls it with another type than miopen.h's");
#define MIOTOOL_NUMBER(name, value) \
    static_assert(name == value, "the binding passes " #name " as " #value ", not the header's number");
#define MIOTOOL_SIZE(type, size) \
    static_assert(sizeof(type) == size, "the Go mirror of " #type " is " #size " bytes, not the header's size");
#define MIOTOOL_FIELD(type, field, offset, size)                                         \
    static_assert(offsetof(type, field) == offset &&                                     \
                      sizeof(static_cast<type *>(nullptr)->field) == size,               \
                  "the Go mirror of " #type "." #field " is not where the header puts it");
#ifdef MIOTOOL_BINDING
#include MIOTOOL_BINDING
#endif

#ifdef MIOTOOL_MUST_FAIL
/* The test's own check that a wrong declaration is caught. */
SAME(miopenStatus_t, miopenCreate, (miopenHandle_t * handle, int flags))
#endif
