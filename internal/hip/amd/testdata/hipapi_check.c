/*
 * Holds the stand-ins' declarations (mockhip_api.h) to the real HIP
 * headers: it compiles only where every function miotool binds has the
 * type the stand-ins give it. TestStandInDeclarationsMatchRealHeaders
 * compiles it against an installed hip_runtime_api.h and hiprtc.h (HIP 5.x
 * or later) and against the HIP 6.3 headers kept as reference data beside
 * the module, with the MIOTOOL_* numbers below set from the backend's
 * constants.
 *
 * The stand-ins follow the newest declarations; an entry's mark in
 * mockhip_api.h is the first major version whose header declares it so.
 * Where an older header differs, its own form is checked below instead:
 *   - HIP7 hipMemcpyHtoD, hipMemcpyHtoDAsync: src is const void * from
 *     HIP 7.0; the 5.x and 6.x headers (5.2 and 6.3 checked) declare
 *     void *src. The ABI is the same.
 *   - HIP6 hipGetDevicePropertiesR0600 and hipDeviceProp_tR0600 are new in
 *     6.0 and unchanged in 7.x; 5.x's hipGetDeviceProperties fills the
 *     older hipDeviceProp_t, whose gcnArchName sits at byte 396 of 792
 *     (HIP 5.2) rather than 1160 of 1472 (6.3), so binding it by the 6.x
 *     offsets would read the wrong bytes.
 *   - HIP5 hipLaunchHostFunc: the 5.2 header declares it as 6.x and 7.x
 *     do, but libamdhip64.so.5 does not export it (TestRealHIP5Runtime
 *     checks the library), so HIP 5 cannot run host functions for miotool.
 *   - hiprtc lives inside libamdhip64.so.5; libhiprtc.so is its own library
 *     from 6.0 (the declarations are the same).
 * A mark that is too new is caught too: an entry marked HIP7 must differ
 * from the stand-in's declaration in a header older than 7.0, or it would
 * be HIP5 or HIP6.
 *
 * The layout the backend reads hipDeviceProp_tR0600 with
 * (MIOTOOL_GCN_ARCH_NAME_OFFSET, MIOTOOL_GCN_ARCH_NAME_LEN,
 * MIOTOOL_PROPS_SIZE, MIOTOOL_PROPS_BUFFER) is checked against 6.x and
 * later headers. The status codes miotool names, the capture modes and
 * states and the device attributes it passes by number are checked for
 * every version: the test writes them from the Go side's tables into the
 * file MIOTOOL_HIP_CODES names.
 */
#include <stddef.h>

#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#define MOCKHIP_API_LISTS_ONLY
#include "mockhip_api.h"

#define SAME(ret, name, params) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret(*) params), \
                   #name ": the stand-in declares another type than the real header");
#define NEWER(ret, name, params) \
    _Static_assert(!__builtin_types_compatible_p(__typeof__(&name), ret(*) params), \
                   #name ": this header already declares it as the stand-ins do: mark it by an older version");
#define CHECK(since, ret, name, params) CHECK_##since(ret, name, params)
#define CHECK_HIP5(ret, name, params) SAME(ret, name, params)
#if HIP_VERSION_MAJOR >= 6
#define CHECK_HIP6(ret, name, params) SAME(ret, name, params)
#else
#define CHECK_HIP6(ret, name, params) /* absent from 5.x; its 5.x counterpart is checked below */
#endif
#if HIP_VERSION_MAJOR >= 7
#define CHECK_HIP7(ret, name, params) SAME(ret, name, params)
#else
#define CHECK_HIP7(ret, name, params) NEWER(ret, name, params) /* its older form is checked below */
#endif

/* The check is of types. hipHostMalloc and hipHostFree are deprecated in
 * the 6.x headers (for hipExtHostAlloc and hipFreeHost; 5.x deprecates
 * hipFreeHost instead, and the 7.x line neither): naming them must not
 * fail it. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
MOCKHIP_RUNTIME_API(CHECK)
MOCKHIPRTC_API(CHECK)
#pragma GCC diagnostic pop

#if HIP_VERSION_MAJOR < 7
SAME(hipError_t, hipMemcpyHtoD, (hipDeviceptr_t dst, void *src, size_t sizeBytes))
SAME(hipError_t, hipMemcpyHtoDAsync, (hipDeviceptr_t dst, void *src, size_t sizeBytes, hipStream_t stream))
#endif

#if HIP_VERSION_MAJOR >= 6
_Static_assert(offsetof(hipDeviceProp_tR0600, gcnArchName) == MIOTOOL_GCN_ARCH_NAME_OFFSET,
               "the backend reads gcnArchName at another offset than the header puts it");
_Static_assert(sizeof(((hipDeviceProp_tR0600 *)0)->gcnArchName) == MIOTOOL_GCN_ARCH_NAME_LEN,
               "the backend reads another length of gcnArchName than the header gives it");
_Static_assert(sizeof(hipDeviceProp_tR0600) == MIOTOOL_PROPS_SIZE,
               "hipDeviceProp_tR0600 is not the size the backend knows");
_Static_assert(sizeof(hipDeviceProp_tR0600) <= MIOTOOL_PROPS_BUFFER,
               "hipDeviceProp_tR0600 does not fit the buffer the backend hands hipGetDevicePropertiesR0600");
#else
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

#ifdef MIOTOOL_MUST_FAIL_MARK
/* The test's own check that a mark too new for the header is caught. */
CHECK(HIP7, hipError_t, hipStreamSynchronize, (hipStream_t stream))
#endif
