/*
 * The few CUDA driver, CUPTI and HIP types, numbers and functions the
 * observer uses, declared under its own names (mt_...) so that it builds
 * with no vendor header installed. Opaque handles use the vendors' own
 * struct tags, and enums are spelled as the unsigned int the compilers give
 * them, so each mt_ type is the very type the vendor header declares:
 * check/cupti_check.c and check/hip_check.c include this file beside the
 * real cupti.h and hip_runtime_api.h and assert that sizes, offsets, enum
 * values and function types agree.
 */
#ifndef MT_ABI_H
#define MT_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ---- CUDA driver (cuda.h) ---- */

typedef unsigned int mt_CUresult; /* enum cudaError_enum */
typedef unsigned long long mt_CUdeviceptr;
typedef unsigned int mt_CUstreamCaptureMode; /* enum CUstreamCaptureMode_enum */
typedef struct CUctx_st *mt_CUcontext;
typedef struct CUstream_st *mt_CUstream;
typedef struct CUevent_st *mt_CUevent;
typedef struct CUfunc_st *mt_CUfunction;
typedef struct CUgraph_st *mt_CUgraph;
typedef struct CUgraphNode_st *mt_CUgraphNode;
typedef struct CUgraphExec_st *mt_CUgraphExec;

/* The device a capture's thread works on: its current context's device,
 * named and described by the driver. */
typedef int mt_CUdevice;                     /* CUdevice */
typedef unsigned int mt_CUdevice_attribute; /* enum CUdevice_attribute_enum */
#define MT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define MT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define MT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
typedef mt_CUresult (*mt_cuCtxGetDevice_fn)(mt_CUdevice *device);
typedef mt_CUresult (*mt_cuDeviceGetName_fn)(char *name, int len, mt_CUdevice dev);
typedef mt_CUresult (*mt_cuDeviceGetAttribute_fn)(int *pi, mt_CUdevice_attribute attrib, mt_CUdevice dev);

/* A stream's capture status (cuStreamIsCapturing), and a graph's nodes
 * (cuGraphGetNodes with no array: the count only): the observer's own
 * queries, for work launched outside every capture and a graph's size. */
typedef unsigned int mt_CUstreamCaptureStatus; /* enum CUstreamCaptureStatus_enum */
#define MT_CU_STREAM_CAPTURE_STATUS_NONE 0
typedef mt_CUresult (*mt_cuStreamIsCapturing_fn)(mt_CUstream hStream, mt_CUstreamCaptureStatus *captureStatus);
typedef mt_CUresult (*mt_cuGraphGetNodes_fn)(mt_CUgraph hGraph, mt_CUgraphNode *nodes, size_t *numNodes);

#define MT_CU_STREAM_CAPTURE_MODE_GLOBAL 0
#define MT_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL 1
#define MT_CU_STREAM_CAPTURE_MODE_RELAXED 2

/* The launch configuration cuLaunchKernelEx takes (CUlaunchConfig); only
 * its stream is read. */
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    mt_CUstream hStream;
    void *attrs;
    unsigned int numAttrs;
} mt_CUlaunchConfig;

/*
 * Parameter structs of the driver calls whose stream, event or mode the
 * observer reads (generated_cuda_meta.h, which cupti.h includes). A call's
 * _ptsz / _ptds form has the same layout as its plain one.
 */
typedef struct { mt_CUstream hStream; } mt_cuStreamQuery_params; /* also cuStreamSynchronize, cuStreamDestroy_v2 */
typedef struct { mt_CUstream hStream; } mt_cuStreamBeginCapture_params;
typedef struct { mt_CUstream hStream; mt_CUstreamCaptureMode mode; } mt_cuStreamBeginCapture_v2_params;
typedef struct {
    mt_CUstream hStream;
    mt_CUgraph hGraph;
    const mt_CUgraphNode *dependencies;
    const void *dependencyData;
    size_t numDependencies;
    mt_CUstreamCaptureMode mode;
} mt_cuStreamBeginCaptureToGraph_params;
typedef struct { mt_CUstream hStream; mt_CUgraph *phGraph; } mt_cuStreamEndCapture_params;
typedef struct { mt_CUstreamCaptureMode *mode; } mt_cuThreadExchangeStreamCaptureMode_params;
typedef struct { mt_CUevent hEvent; } mt_cuEventQuery_params; /* also cuEventSynchronize */
typedef struct { mt_CUevent hEvent; mt_CUstream hStream; } mt_cuEventRecord_params;
typedef struct { mt_CUstream hStream; mt_CUevent hEvent; unsigned int Flags; } mt_cuStreamWaitEvent_params;
typedef struct {
    mt_CUfunction f;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    mt_CUstream hStream;
    void **kernelParams;
    void **extra;
} mt_cuLaunchKernel_params;
typedef struct {
    const mt_CUlaunchConfig *config;
    mt_CUfunction f;
    void **kernelParams;
    void **extra;
} mt_cuLaunchKernelEx_params;
typedef struct { mt_CUdeviceptr dstDevice; const void *srcHost; size_t ByteCount; mt_CUstream hStream; } mt_cuMemcpyHtoDAsync_v2_params;
typedef struct { mt_CUdeviceptr dstDevice; unsigned char uc; size_t N; mt_CUstream hStream; } mt_cuMemsetD8Async_params;
typedef struct { mt_CUdeviceptr *dptr; size_t bytesize; mt_CUstream hStream; } mt_cuMemAllocAsync_params;
typedef struct { mt_CUdeviceptr dptr; mt_CUstream hStream; } mt_cuMemFreeAsync_params;
typedef struct { mt_CUgraphExec hGraph; mt_CUstream hStream; } mt_cuGraphLaunch_params;
/* Every cuGraphInstantiate form (_v2, WithFlags, WithParams) begins so. */
typedef struct { mt_CUgraphExec *phGraphExec; mt_CUgraph hGraph; } mt_cuGraphInstantiate_params;

/* ---- CUPTI (cupti_callbacks.h, cupti_result.h) ---- */

typedef unsigned int mt_CUptiResult;         /* enum CUptiResult */
typedef unsigned int mt_CUpti_CallbackDomain; /* enum CUpti_CallbackDomain */
typedef unsigned int mt_CUpti_ApiCallbackSite; /* enum CUpti_ApiCallbackSite */
typedef uint32_t mt_CUpti_CallbackId;
typedef struct CUpti_Subscriber_st *mt_CUpti_SubscriberHandle;

#define MT_CUPTI_SUCCESS 0
#define MT_CUPTI_ERROR_UNKNOWN 999
#define MT_CUPTI_API_ENTER 0
#define MT_CUPTI_API_EXIT 1
#define MT_CUPTI_CB_DOMAIN_DRIVER_API 1

typedef struct {
    mt_CUpti_ApiCallbackSite callbackSite;
    const char *functionName;
    const void *functionParams;
    void *functionReturnValue;
    const char *symbolName;
    mt_CUcontext context;
    uint32_t contextUid;
    uint64_t *correlationData;
    uint32_t correlationId;
} mt_CUpti_CallbackData;

typedef void (*mt_CUpti_CallbackFunc)(void *userdata, mt_CUpti_CallbackDomain domain, mt_CUpti_CallbackId cbid,
                                      const void *cbdata);
typedef mt_CUptiResult (*mt_cuptiSubscribe_fn)(mt_CUpti_SubscriberHandle *subscriber, mt_CUpti_CallbackFunc callback,
                                               void *userdata);
typedef mt_CUptiResult (*mt_cuptiEnableDomain_fn)(uint32_t enable, mt_CUpti_SubscriberHandle subscriber,
                                                  mt_CUpti_CallbackDomain domain);
typedef mt_CUptiResult (*mt_cuptiUnsubscribe_fn)(mt_CUpti_SubscriberHandle subscriber);
typedef mt_CUptiResult (*mt_cuptiEnableCallback_fn)(uint32_t enable, mt_CUpti_SubscriberHandle subscriber,
                                                    mt_CUpti_CallbackDomain domain, mt_CUpti_CallbackId cbid);
typedef mt_CUptiResult (*mt_cuptiGetCallbackName_fn)(mt_CUpti_CallbackDomain domain, uint32_t cbid, const char **name);
typedef mt_CUptiResult (*mt_cuptiGetResultString_fn)(mt_CUptiResult result, const char **str);

/* ---- HIP (hip_runtime_api.h, driver_types.h) ---- */

typedef unsigned int mt_hipError_t;            /* enum hipError_t */
typedef unsigned int mt_hipStreamCaptureMode;   /* enum hipStreamCaptureMode */
typedef unsigned int mt_hipStreamCaptureStatus; /* enum hipStreamCaptureStatus */
typedef unsigned int mt_hipMemcpyKind;          /* enum hipMemcpyKind */
typedef void *mt_hipDeviceptr_t;
typedef struct ihipStream_t *mt_hipStream_t;
typedef struct ihipEvent_t *mt_hipEvent_t;
typedef struct ihipModuleSymbol_t *mt_hipFunction_t;
typedef struct ihipGraph *mt_hipGraph_t;
typedef struct hipGraphNode *mt_hipGraphNode_t;
typedef struct hipGraphExec *mt_hipGraphExec_t;
typedef struct hipGraphEdgeData mt_hipGraphEdgeData; /* only pointed to */
typedef void (*mt_hipHostFn_t)(void *userData);
typedef struct mt_dim3 { uint32_t x, y, z; } mt_dim3; /* dim3 */

/* The device a capture's thread works on: its current device, named and
 * described by the runtime. HIP 6 exports hipGetDeviceProperties as
 * hipGetDevicePropertiesR0600 with the struct of that name; the observer
 * reads only its gcnArchName, at the header's offset, from a buffer of the
 * header's size. */
typedef int mt_hipDevice_t;
typedef unsigned int mt_hipDeviceAttribute_t; /* enum hipDeviceAttribute_t */
#define MT_hipDeviceAttributeMultiprocessorCount 63
#define MT_HIP_DEVICE_PROP_SIZE 1472         /* sizeof(hipDeviceProp_tR0600) */
#define MT_HIP_DEVICE_PROP_GCN_ARCH_NAME 1160 /* offsetof(hipDeviceProp_tR0600, gcnArchName) */
#define MT_HIP_DEVICE_PROP_GCN_ARCH_NAME_LEN 256
typedef mt_hipError_t (*mt_hipGetDevice_fn)(int *deviceId);
typedef mt_hipError_t (*mt_hipDeviceGetName_fn)(char *name, int len, mt_hipDevice_t device);
typedef mt_hipError_t (*mt_hipDeviceGetAttribute_fn)(int *pi, mt_hipDeviceAttribute_t attr, int deviceId);
struct hipDeviceProp_tR0600; /* only pointed to */
typedef mt_hipError_t (*mt_hipGetDevicePropertiesR0600_fn)(struct hipDeviceProp_tR0600 *prop, int deviceId);

/* The observer's own queries (the runtime's functions, not interposed). */
#define MT_hipStreamCaptureStatusNone 0
typedef mt_hipError_t (*mt_hipGraphGetNodes_fn)(mt_hipGraph_t graph, mt_hipGraphNode_t *nodes, size_t *numNodes);

#define MT_hipSuccess 0
#define MT_hipErrorNotInitialized 3
#define MT_hipErrorStreamCaptureWrongThread 908

/*
 * The HIP functions the interposer defines, as X(return type, name,
 * parameters), each type spelled T(name): the interposer gives T the mt_
 * names, hip_check.c the real header's, and holds the two to each other.
 * The declarations are HIP 6.3's.
 */
#define MT_HIP_API(X, T) \
    X(T(hipError_t), hipStreamBeginCapture, (T(hipStream_t) stream, T(hipStreamCaptureMode) mode)) \
    X(T(hipError_t), hipStreamBeginCaptureToGraph, (T(hipStream_t) stream, T(hipGraph_t) graph, \
        const T(hipGraphNode_t) *dependencies, const T(hipGraphEdgeData) *dependencyData, size_t numDependencies, \
        T(hipStreamCaptureMode) mode)) \
    X(T(hipError_t), hipStreamEndCapture, (T(hipStream_t) stream, T(hipGraph_t) *pGraph)) \
    X(T(hipError_t), hipStreamIsCapturing, (T(hipStream_t) stream, T(hipStreamCaptureStatus) *pCaptureStatus)) \
    X(T(hipError_t), hipStreamGetCaptureInfo, (T(hipStream_t) stream, T(hipStreamCaptureStatus) *pCaptureStatus, \
        unsigned long long *pId)) \
    X(T(hipError_t), hipThreadExchangeStreamCaptureMode, (T(hipStreamCaptureMode) *mode)) \
    X(T(hipError_t), hipStreamQuery, (T(hipStream_t) stream)) \
    X(T(hipError_t), hipStreamSynchronize, (T(hipStream_t) stream)) \
    X(T(hipError_t), hipStreamDestroy, (T(hipStream_t) stream)) \
    X(T(hipError_t), hipStreamWaitEvent, (T(hipStream_t) stream, T(hipEvent_t) event, unsigned int flags)) \
    X(T(hipError_t), hipEventQuery, (T(hipEvent_t) event)) \
    X(T(hipError_t), hipEventSynchronize, (T(hipEvent_t) event)) \
    X(T(hipError_t), hipEventRecord, (T(hipEvent_t) event, T(hipStream_t) stream)) \
    X(T(hipError_t), hipDeviceSynchronize, (void)) \
    X(T(hipError_t), hipMalloc, (void **ptr, size_t size)) \
    X(T(hipError_t), hipFree, (void *ptr)) \
    X(T(hipError_t), hipHostMalloc, (void **ptr, size_t size, unsigned int flags)) \
    X(T(hipError_t), hipHostFree, (void *ptr)) \
    X(T(hipError_t), hipExtHostAlloc, (void **ptr, size_t size, unsigned int flags)) \
    X(T(hipError_t), hipFreeHost, (void *ptr)) \
    X(T(hipError_t), hipMallocManaged, (void **dev_ptr, size_t size, unsigned int flags)) \
    X(T(hipError_t), hipMallocAsync, (void **dev_ptr, size_t size, T(hipStream_t) stream)) \
    X(T(hipError_t), hipFreeAsync, (void *dev_ptr, T(hipStream_t) stream)) \
    X(T(hipError_t), hipMemcpy, (void *dst, const void *src, size_t sizeBytes, T(hipMemcpyKind) kind)) \
    X(T(hipError_t), hipMemcpyWithStream, (void *dst, const void *src, size_t sizeBytes, T(hipMemcpyKind) kind, \
        T(hipStream_t) stream)) \
    X(T(hipError_t), hipMemcpyHtoD, (T(hipDeviceptr_t) dst, void *src, size_t sizeBytes)) \
    X(T(hipError_t), hipMemcpyDtoH, (void *dst, T(hipDeviceptr_t) src, size_t sizeBytes)) \
    X(T(hipError_t), hipMemcpyDtoD, (T(hipDeviceptr_t) dst, T(hipDeviceptr_t) src, size_t sizeBytes)) \
    X(T(hipError_t), hipMemcpyAsync, (void *dst, const void *src, size_t sizeBytes, T(hipMemcpyKind) kind, \
        T(hipStream_t) stream)) \
    X(T(hipError_t), hipMemcpyHtoDAsync, (T(hipDeviceptr_t) dst, void *src, size_t sizeBytes, T(hipStream_t) stream)) \
    X(T(hipError_t), hipMemcpyDtoHAsync, (void *dst, T(hipDeviceptr_t) src, size_t sizeBytes, T(hipStream_t) stream)) \
    X(T(hipError_t), hipMemcpyDtoDAsync, (T(hipDeviceptr_t) dst, T(hipDeviceptr_t) src, size_t sizeBytes, \
        T(hipStream_t) stream)) \
    X(T(hipError_t), hipMemset, (void *dst, int value, size_t sizeBytes)) \
    X(T(hipError_t), hipMemsetAsync, (void *dst, int value, size_t sizeBytes, T(hipStream_t) stream)) \
    X(T(hipError_t), hipMemsetD8, (T(hipDeviceptr_t) dest, unsigned char value, size_t count)) \
    X(T(hipError_t), hipMemsetD32, (T(hipDeviceptr_t) dest, int value, size_t count)) \
    X(T(hipError_t), hipLaunchKernel, (const void *function_address, T(dim3) numBlocks, T(dim3) dimBlocks, \
        void **args, size_t sharedMemBytes, T(hipStream_t) stream)) \
    X(T(hipError_t), hipExtLaunchKernel, (const void *function_address, T(dim3) numBlocks, T(dim3) dimBlocks, \
        void **args, size_t sharedMemBytes, T(hipStream_t) stream, T(hipEvent_t) startEvent, \
        T(hipEvent_t) stopEvent, int flags)) \
    X(T(hipError_t), hipModuleLaunchKernel, (T(hipFunction_t) f, unsigned int gridDimX, unsigned int gridDimY, \
        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, \
        unsigned int sharedMemBytes, T(hipStream_t) stream, void **kernelParams, void **extra)) \
    X(T(hipError_t), hipLaunchHostFunc, (T(hipStream_t) stream, T(hipHostFn_t) fn, void *userData)) \
    X(T(hipError_t), hipGraphLaunch, (T(hipGraphExec_t) graphExec, T(hipStream_t) stream)) \
    X(T(hipError_t), hipGraphInstantiate, (T(hipGraphExec_t) *pGraphExec, T(hipGraph_t) graph, \
        T(hipGraphNode_t) *pErrorNode, char *pLogBuffer, size_t bufferSize)) \
    X(T(hipError_t), hipGraphInstantiateWithFlags, (T(hipGraphExec_t) *pGraphExec, T(hipGraph_t) graph, \
        unsigned long long flags))

/* Every type the list names, for hip_check.c. */
#define MT_HIP_TYPES(X) \
    X(hipError_t) X(hipStreamCaptureMode) X(hipStreamCaptureStatus) X(hipMemcpyKind) X(hipDeviceptr_t) \
    X(hipStream_t) X(hipEvent_t) X(hipFunction_t) X(hipGraph_t) X(hipGraphNode_t) X(hipGraphExec_t) \
    X(hipHostFn_t)

#endif
