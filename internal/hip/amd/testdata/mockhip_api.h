/*
 * The HIP runtime and hiprtc functions miotool binds, as the stand-ins
 * declare them, in HIP's own type names: one X(since, return type, name,
 * parameters) per function, in the newest headers' form. since is the
 * first major version whose header declares it so: HIP5 where 5.x already
 * does, HIP6 where the function is new in 6.0, HIP7 where 7.0 changed the
 * declaration (hipapi_check.c lists each difference and checks the older
 * form in older headers).
 *
 * mockhip.c and mockhiprtc.c declare every entry from these lists, so the
 * compiler holds their definitions to them; hipapi_check.c holds the lists
 * to the real hip_runtime_api.h and hiprtc.h. With MOCKHIP_API_LISTS_ONLY
 * defined, only the lists are given (the real headers supply the types).
 */
#ifndef MIOTOOL_MOCKHIP_API_H
#define MIOTOOL_MOCKHIP_API_H

#define MOCKHIP_RUNTIME_API(X) \
    X(HIP5, hipError_t, hipInit, (unsigned int flags)) \
    X(HIP5, hipError_t, hipDriverGetVersion, (int *driverVersion)) \
    X(HIP5, hipError_t, hipRuntimeGetVersion, (int *runtimeVersion)) \
    X(HIP5, const char *, hipGetErrorName, (hipError_t hip_error)) \
    X(HIP5, hipError_t, hipGetDeviceCount, (int *count)) \
    X(HIP5, hipError_t, hipSetDevice, (int deviceId)) \
    X(HIP5, hipError_t, hipDeviceGetName, (char *name, int len, hipDevice_t device)) \
    X(HIP5, hipError_t, hipDeviceGetAttribute, (int *pi, hipDeviceAttribute_t attr, int deviceId)) \
    X(HIP5, hipError_t, hipDeviceTotalMem, (size_t *bytes, hipDevice_t device)) \
    X(HIP6, hipError_t, hipGetDevicePropertiesR0600, (hipDeviceProp_tR0600 *prop, int deviceId)) \
    X(HIP5, hipError_t, hipDeviceSynchronize, (void)) \
    X(HIP5, hipError_t, hipMalloc, (void **ptr, size_t size)) \
    X(HIP5, hipError_t, hipFree, (void *ptr)) \
    X(HIP5, hipError_t, hipHostMalloc, (void **ptr, size_t size, unsigned int flags)) \
    X(HIP5, hipError_t, hipHostFree, (void *ptr)) \
    X(HIP5, hipError_t, hipHostRegister, (void *hostPtr, size_t sizeBytes, unsigned int flags)) \
    X(HIP5, hipError_t, hipHostUnregister, (void *hostPtr)) \
    X(HIP5, hipError_t, hipMemset, (void *dst, int value, size_t sizeBytes)) \
    X(HIP5, hipError_t, hipMemsetAsync, (void *dst, int value, size_t sizeBytes, hipStream_t stream)) \
    X(HIP7, hipError_t, hipMemcpyHtoD, (hipDeviceptr_t dst, const void *src, size_t sizeBytes)) \
    X(HIP5, hipError_t, hipMemcpyDtoH, (void *dst, hipDeviceptr_t src, size_t sizeBytes)) \
    X(HIP7, hipError_t, hipMemcpyHtoDAsync, (hipDeviceptr_t dst, const void *src, size_t sizeBytes, hipStream_t stream)) \
    X(HIP5, hipError_t, hipMemcpyDtoHAsync, (void *dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream)) \
    X(HIP5, hipError_t, hipMemcpyDtoDAsync, (hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream)) \
    X(HIP5, hipError_t, hipStreamCreateWithFlags, (hipStream_t *stream, unsigned int flags)) \
    X(HIP5, hipError_t, hipStreamDestroy, (hipStream_t stream)) \
    X(HIP5, hipError_t, hipStreamQuery, (hipStream_t stream)) \
    X(HIP5, hipError_t, hipStreamSynchronize, (hipStream_t stream)) \
    X(HIP5, hipError_t, hipStreamWaitEvent, (hipStream_t stream, hipEvent_t event, unsigned int flags)) \
    X(HIP5, hipError_t, hipStreamIsCapturing, (hipStream_t stream, hipStreamCaptureStatus *pCaptureStatus)) \
    X(HIP5, hipError_t, hipStreamGetCaptureInfo, (hipStream_t stream, hipStreamCaptureStatus *pCaptureStatus, unsigned long long *pId)) \
    X(HIP5, hipError_t, hipEventCreateWithFlags, (hipEvent_t *event, unsigned flags)) \
    X(HIP5, hipError_t, hipEventRecord, (hipEvent_t event, hipStream_t stream)) \
    X(HIP5, hipError_t, hipEventQuery, (hipEvent_t event)) \
    X(HIP5, hipError_t, hipEventSynchronize, (hipEvent_t event)) \
    X(HIP5, hipError_t, hipEventElapsedTime, (float *ms, hipEvent_t start, hipEvent_t stop)) \
    X(HIP5, hipError_t, hipEventDestroy, (hipEvent_t event)) \
    X(HIP5, hipError_t, hipModuleLoadData, (hipModule_t *module, const void *image)) \
    X(HIP5, hipError_t, hipModuleGetFunction, (hipFunction_t *function, hipModule_t module, const char *kname)) \
    X(HIP5, hipError_t, hipModuleUnload, (hipModule_t module)) \
    X(HIP5, hipError_t, hipModuleLaunchKernel, (hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY, \
        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, \
        unsigned int sharedMemBytes, hipStream_t stream, void **kernelParams, void **extra)) \
    X(HIP5, hipError_t, hipLaunchHostFunc, (hipStream_t stream, hipHostFn_t fn, void *userData)) \
    X(HIP5, hipError_t, hipStreamBeginCapture, (hipStream_t stream, hipStreamCaptureMode mode)) \
    X(HIP5, hipError_t, hipStreamEndCapture, (hipStream_t stream, hipGraph_t *pGraph)) \
    X(HIP5, hipError_t, hipThreadExchangeStreamCaptureMode, (hipStreamCaptureMode *mode)) \
    X(HIP5, hipError_t, hipGraphInstantiateWithFlags, (hipGraphExec_t *pGraphExec, hipGraph_t graph, unsigned long long flags)) \
    X(HIP5, hipError_t, hipGraphLaunch, (hipGraphExec_t graphExec, hipStream_t stream)) \
    X(HIP5, hipError_t, hipGraphExecDestroy, (hipGraphExec_t graphExec)) \
    X(HIP5, hipError_t, hipGraphDestroy, (hipGraph_t graph))

#define MOCKHIPRTC_API(X) \
    X(HIP5, hiprtcResult, hiprtcCreateProgram, (hiprtcProgram *prog, const char *src, const char *name, \
        int numHeaders, const char **headers, const char **includeNames)) \
    X(HIP5, hiprtcResult, hiprtcCompileProgram, (hiprtcProgram prog, int numOptions, const char **options)) \
    X(HIP5, hiprtcResult, hiprtcGetProgramLogSize, (hiprtcProgram prog, size_t *logSizeRet)) \
    X(HIP5, hiprtcResult, hiprtcGetProgramLog, (hiprtcProgram prog, char *log)) \
    X(HIP5, hiprtcResult, hiprtcDestroyProgram, (hiprtcProgram *prog)) \
    X(HIP5, const char *, hiprtcGetErrorString, (hiprtcResult result)) \
    X(HIP5, hiprtcResult, hiprtcVersion, (int *major, int *minor)) \
    X(HIP5, hiprtcResult, hiprtcGetCodeSize, (hiprtcProgram prog, size_t *codeSizeRet)) \
    X(HIP5, hiprtcResult, hiprtcGetCode, (hiprtcProgram prog, char *code))

#ifndef MOCKHIP_API_LISTS_ONLY
#include <stddef.h>

/* How the stand-ins spell HIP's types: status codes and enums as int (their
 * C ABI), handles as pointers to the stand-ins' own structs. */
typedef int hipError_t;
typedef int hipDevice_t;
typedef int hipDeviceAttribute_t;
typedef int hipStreamCaptureMode;
typedef int hipStreamCaptureStatus;
typedef void *hipDeviceptr_t;
typedef void (*hipHostFn_t)(void *userData);
typedef struct stream *hipStream_t;
typedef struct event *hipEvent_t;
typedef struct module *hipModule_t;
typedef struct function *hipFunction_t;
typedef struct graph *hipGraph_t;
typedef struct graph *hipGraphExec_t; /* an instantiated graph is a copy */
typedef struct props_r0600 hipDeviceProp_tR0600;
typedef int hiprtcResult;
typedef struct program *hiprtcProgram;

#define MOCKHIP_DECLARE(since, ret, name, params) ret name params;
#endif

#endif
