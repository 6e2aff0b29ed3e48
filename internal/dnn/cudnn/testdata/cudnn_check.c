/*
 * Holds the cuDNN binding and its stand-in to the real cuDNN 9 headers
 * (cudnn.h, with the CUDA runtime headers it includes) and, where it is
 * there, the CUDA driver's cuda.h: it compiles only where they agree. No
 * CUDA header is on CI's machines, so scripts/abi-check-cuda.sh compiles it
 * on a machine that has them (PyTorch's wheels carry cudnn.h); the Go
 * tests compile it where MIOTOOL_CUDNN_INCLUDE names such a folder, and
 * keep cudnn_binding.h, the Go side written out, current with the binding.
 *
 *   - Every function of the binding tables (MIOTOOL_BOUND for cuDNN,
 *     MIOTOOL_BOUND_DRIVER for Context's driver calls) must be in
 *     mockcudnn_api.h's lists, whose declarations must be the headers';
 *     the stand-in (mockcudnn.c) is compiled against the same lists.
 *   - Every number the binding passes or decodes (data type, tensor
 *     format, convolution modes, math types, forward algorithms and their
 *     count, determinism, the status codes it names) must be the header's,
 *     and so must the stand-in's. The full table of status names follows
 *     the cuDNN 9.6 headers; older cuDNN 9 headers lack some of its names,
 *     so below 9.6 only the codes the binding names as constants are
 *     checked.
 *   - The Go mirror of cudnnConvolutionFwdAlgoPerf_t and the stand-in's
 *     copy must have the header's layout.
 *   - cudnnGetVersion's number must read as ParseVersion reads it.
 *
 * MIOTOOL_MUST_FAIL adds a wrong declaration, which must fail the compile.
 */
#include <stddef.h>

#include <cudnn.h>
#if __has_include(<cuda.h>)
#include <cuda.h>
#define MIOTOOL_HAVE_CUDA_H 1
#endif

#include "mockcudnn_api.h"

_Static_assert(CUDNN_MAJOR == 9, "the binding is for cuDNN 9: Open refuses other majors");
_Static_assert(CUDNN_VERSION == CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL,
               "cudnnGetVersion is not major*10000 + minor*100 + patch, as ParseVersion reads it");

#define SAME(ret, name, params)                                                     \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret(*) params), \
                   #name ": the stand-in declares another type than the real header");
#define LISTED(ret, name, params) typedef ret(*mockcudnn_type_##name) params;
MOCKCUDNN_API(SAME)
MOCKCUDNN_API(LISTED)

#define STAND_IN_NUMBER(name, value) \
    _Static_assert(name == value, "the stand-in gives " #name " another number than the header");
MOCKCUDNN_NUMBERS(STAND_IN_NUMBER)

#ifdef MIOTOOL_HAVE_CUDA_H
MOCKCUDNN_DRIVER_API(SAME)
MOCKCUDNN_DRIVER_API(LISTED)
MOCKCUDNN_DRIVER_NUMBERS(STAND_IN_NUMBER)
#endif

#define STAND_IN_FIELD(field)                                                                                   \
    _Static_assert(offsetof(cudnnConvolutionFwdAlgoPerf_t, field) == offsetof(mockcudnn_fwd_algo_perf, field) && \
                       sizeof(((cudnnConvolutionFwdAlgoPerf_t *)0)->field) ==                                   \
                           sizeof(((mockcudnn_fwd_algo_perf *)0)->field),                                       \
                   "the stand-in copy of cudnnConvolutionFwdAlgoPerf_t." #field " is not where the header puts it");
_Static_assert(sizeof(cudnnConvolutionFwdAlgoPerf_t) == sizeof(mockcudnn_fwd_algo_perf),
               "the stand-in copy of cudnnConvolutionFwdAlgoPerf_t is another size than the header gives it");
STAND_IN_FIELD(algo)
STAND_IN_FIELD(status)
STAND_IN_FIELD(time)
STAND_IN_FIELD(memory)
STAND_IN_FIELD(determinism)
STAND_IN_FIELD(mathType)
STAND_IN_FIELD(reserved)

/* The Go side, as cudnn_binding.h writes it. */
#define MIOTOOL_BOUND(name)                                                                  \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), mockcudnn_type_##name), \
                   #name ": the binding calls it with another type than the header declares");
#ifdef MIOTOOL_HAVE_CUDA_H
#define MIOTOOL_BOUND_DRIVER(name) MIOTOOL_BOUND(name)
#else
#define MIOTOOL_BOUND_DRIVER(name) /* no cuda.h here */
#endif
#define MIOTOOL_NUMBER(name, value) \
    _Static_assert(name == value, "the binding passes " #name " as " #value ", not the number in the header");
#if CUDNN_VERSION >= 90600
#define MIOTOOL_STATUS_NAME(name, value) MIOTOOL_NUMBER(name, value)
#else
#define MIOTOOL_STATUS_NAME(name, value) /* the name table follows 9.6 */
#endif
#define MIOTOOL_SIZE(type, size) \
    _Static_assert(sizeof(type) == size, "the Go mirror of " #type " is " #size " bytes, not the size in the header");
#define MIOTOOL_FIELD(type, field, offset, size)                                                  \
    _Static_assert(offsetof(type, field) == offset && sizeof(((type *)0)->field) == size,          \
                   "the Go mirror of " #type "." #field " is not where the header puts it");
#include "cudnn_binding.h"

#ifdef MIOTOOL_MUST_FAIL
/* The check's own proof that a wrong declaration is caught. */
SAME(cudnnStatus_t, cudnnCreate, (cudnnHandle_t * handle, int flags))
#endif
