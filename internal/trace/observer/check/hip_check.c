/*
 * Holds the interposer's HIP declarations (../mt_abi.h) to the real HIP
 * headers: it compiles only where every function the interposer defines has
 * the real header's type, every mt_ type is the header's type, and the
 * numbers the observer uses are HIP's. TestHIPDeclarationsMatchRealHeaders
 * compiles it against HIP 6.3's headers, e.g.
 *
 *   gcc -std=gnu11 -fsyntax-only -Wall -Werror -D__HIP_PLATFORM_AMD__ \
 *       -I<dir with hip/hip_version.h> -isystem <hip-6.3>/include hip_check.c
 */
#include <stddef.h>

#include <hip/hip_runtime_api.h>

#include "../mt_abi.h"

/* hipHostMalloc and hipHostFree are deprecated in 6.x and still exported. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define MT_REAL_T(t) t
#define MT_SAME_FN(ret, name, params) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret(*) params), \
                   #name ": the interposer declares another type than the real header");
MT_HIP_API(MT_SAME_FN, MT_REAL_T)

#define MT_SAME_TYPE(t) _Static_assert(__builtin_types_compatible_p(mt_##t, t), "mt_" #t " is not the header's " #t);
MT_HIP_TYPES(MT_SAME_TYPE)
_Static_assert(__builtin_types_compatible_p(mt_hipGraphEdgeData, hipGraphEdgeData), "mt_hipGraphEdgeData");

/* dim3 goes by value: its layout must be the header's. */
_Static_assert(sizeof(mt_dim3) == sizeof(dim3), "dim3 size");
_Static_assert(_Alignof(mt_dim3) == _Alignof(dim3), "dim3 alignment");
_Static_assert(offsetof(mt_dim3, x) == offsetof(dim3, x), "dim3.x");
_Static_assert(offsetof(mt_dim3, y) == offsetof(dim3, y), "dim3.y");
_Static_assert(offsetof(mt_dim3, z) == offsetof(dim3, z), "dim3.z");

/* What the observer calls to name a capture's device. */
_Static_assert(__builtin_types_compatible_p(mt_hipDevice_t, hipDevice_t), "hipDevice_t");
_Static_assert(__builtin_types_compatible_p(mt_hipDeviceAttribute_t, hipDeviceAttribute_t), "hipDeviceAttribute_t");
_Static_assert(__builtin_types_compatible_p(mt_hipGetDevice_fn, __typeof__(&hipGetDevice)), "hipGetDevice");
_Static_assert(__builtin_types_compatible_p(mt_hipDeviceGetName_fn, __typeof__(&hipDeviceGetName)), "hipDeviceGetName");
_Static_assert(__builtin_types_compatible_p(mt_hipDeviceGetAttribute_fn, __typeof__(&hipDeviceGetAttribute)),
               "hipDeviceGetAttribute");
_Static_assert(__builtin_types_compatible_p(mt_hipGetDevicePropertiesR0600_fn, __typeof__(&hipGetDevicePropertiesR0600)),
               "hipGetDevicePropertiesR0600");
_Static_assert(MT_hipDeviceAttributeMultiprocessorCount == hipDeviceAttributeMultiprocessorCount,
               "hipDeviceAttributeMultiprocessorCount");
_Static_assert(MT_HIP_DEVICE_PROP_SIZE == sizeof(hipDeviceProp_tR0600), "sizeof(hipDeviceProp_tR0600)");
_Static_assert(MT_HIP_DEVICE_PROP_GCN_ARCH_NAME == offsetof(hipDeviceProp_tR0600, gcnArchName),
               "hipDeviceProp_tR0600.gcnArchName is elsewhere");
_Static_assert(MT_HIP_DEVICE_PROP_GCN_ARCH_NAME_LEN == sizeof(((hipDeviceProp_tR0600 *)0)->gcnArchName),
               "hipDeviceProp_tR0600.gcnArchName's size");

/* What the observer asks of a graph and a stream. */
_Static_assert(__builtin_types_compatible_p(mt_hipGraphGetNodes_fn, __typeof__(&hipGraphGetNodes)), "hipGraphGetNodes");
_Static_assert(MT_hipStreamCaptureStatusNone == hipStreamCaptureStatusNone, "hipStreamCaptureStatusNone");

_Static_assert(MT_hipSuccess == hipSuccess, "hipSuccess");
_Static_assert(MT_hipErrorNotInitialized == hipErrorNotInitialized, "hipErrorNotInitialized");
_Static_assert(MT_hipErrorStreamCaptureWrongThread == hipErrorStreamCaptureWrongThread,
               "hipErrorStreamCaptureWrongThread");
_Static_assert(hipErrorStreamCaptureUnsupported == 900 && hipErrorStreamCaptureInvalidated == 901 &&
                   hipErrorCapturedEvent == 907,
               "the refusal codes the observer treats as 900..908");
_Static_assert(hipStreamCaptureModeGlobal == 0 && hipStreamCaptureModeThreadLocal == 1 &&
                   hipStreamCaptureModeRelaxed == 2,
               "capture modes as miotool numbers them");

#ifdef MIOTOOL_MUST_FAIL
/* The test's own check that a wrong declaration is caught. */
MT_SAME_FN(hipError_t, hipStreamQuery, (hipStream_t stream, int flags))
#endif
