/*
 * Holds the stand-ins' declarations (mockhip_api.h) to the real HIP
 * headers: it compiles only where every function miotool binds has the
 * type the stand-ins give it. TestStandInDeclarationsMatchRealHeaders
 * compiles it against an installed hip_runtime_api.h and hiprtc.h (HIP 5.x
 * or later), with MIOTOOL_GCN_ARCH_NAME_OFFSET and MIOTOOL_PROPS_SIZE set
 * to the offsets the backend reads hipDeviceProp_tR0600 with.
 *
 * Known differences of HIP 5.x from the 6.x declarations the stand-ins
 * follow (entries marked HIP6 in mockhip_api.h), each checked below in its
 * 5.x form when the header is 5.x:
 *   - hipMemcpyHtoD, hipMemcpyHtoDAsync: src is void * in 5.x, const void *
 *     from 6.0 (the same ABI).
 *   - hipGetDevicePropertiesR0600 and hipDeviceProp_tR0600 are new in 6.0;
 *     5.x's hipGetDeviceProperties fills the older hipDeviceProp_t, whose
 *     gcnArchName sits at byte 396 of 792 (HIP 5.2) rather than 1160 of
 *     1472, so binding it by the 6.x offsets would read the wrong bytes.
 *   - hipLaunchHostFunc: the 5.2 header declares it as 6.x does, but
 *     libamdhip64.so.5 does not export it (TestRealHIP5Runtime checks the
 *     library), so HIP 5 cannot run host functions for miotool.
 *   - hiprtc lives inside libamdhip64.so.5; libhiprtc.so is its own library
 *     from 6.0 (the declarations are the same).
 * The status codes miotool names and the capture modes and states it passes
 * by number are checked for both: the test writes them from the Go side's
 * tables into the file MIOTOOL_HIP_CODES names.
 */
#include <stddef.h>

#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#define MOCKHIP_API_LISTS_ONLY
#include "mockhip_api.h"

#define SAME(ret, name, params) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret(*) params), \
                   #name ": the stand-in declares another type than the real header");
#define CHECK(since, ret, name, params) CHECK_##since(ret, name, params)
#define CHECK_HIP5(ret, name, params) SAME(ret, name, params)
#if HIP_VERSION_MAJOR >= 6
#define CHECK_HIP6(ret, name, params) SAME(ret, name, params)
#else
#define CHECK_HIP6(ret, name, params) /* its 5.x form is checked below */
#endif

MOCKHIP_RUNTIME_API(CHECK)
MOCKHIPRTC_API(CHECK)

#if HIP_VERSION_MAJOR >= 6
_Static_assert(offsetof(hipDeviceProp_tR0600, gcnArchName) == MIOTOOL_GCN_ARCH_NAME_OFFSET,
               "the backend reads gcnArchName at another offset than the header puts it");
_Static_assert(sizeof(hipDeviceProp_tR0600) <= MIOTOOL_PROPS_SIZE,
               "hipDeviceProp_tR0600 outgrew the size the backend knows");
#else
SAME(hipError_t, hipMemcpyHtoD, (hipDeviceptr_t dst, void *src, size_t sizeBytes))
SAME(hipError_t, hipMemcpyHtoDAsync, (hipDeviceptr_t dst, void *src, size_t sizeBytes, hipStream_t stream))
SAME(hipError_t, hipGetDeviceProperties, (hipDeviceProp_t *prop, int deviceId))
_Static_assert(offsetof(hipDeviceProp_t, gcnArchName) != MIOTOOL_GCN_ARCH_NAME_OFFSET,
               "HIP 5's hipDeviceProp_t was expected to differ from hipDeviceProp_tR0600");
#endif

#ifdef MIOTOOL_HIP_CODES
#include MIOTOOL_HIP_CODES
#endif

#ifdef MIOTOOL_MUST_FAIL
/* The test's own check that a wrong declaration is caught. */
SAME(hipError_t, hipStreamQuery, (hipStream_t stream, int flags))
#endif
