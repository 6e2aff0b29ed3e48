/*
 * Holds the observer's CUDA and CUPTI declarations (../mt_abi.h) to the
 * real cupti.h (which includes cuda.h and generated_cuda_meta.h; including
 * the latter again fails): it compiles only where every mt_ type is the
 * header's type, every field the observer reads sits at the header's offset
 * in every form of the call (plain and _ptsz), and the numbers it uses are
 * CUDA's. On a machine with the CUDA toolkit:
 *
 *   gcc -std=gnu11 -fsyntax-only -Wall -Werror \
 *       -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include \
 *       internal/trace/observer/check/cupti_check.c
 *
 * and with -DMIOTOOL_MUST_FAIL it must fail, naming cuStreamQuery_params.
 */
#include <stddef.h>

#include <cupti.h>

#include "../mt_abi.h"

#define SAME_TYPE(mine, theirs) \
    _Static_assert(__builtin_types_compatible_p(mine, theirs), #mine " is not the header's " #theirs);

SAME_TYPE(mt_CUresult, CUresult)
SAME_TYPE(mt_CUdeviceptr, CUdeviceptr)
SAME_TYPE(mt_CUstreamCaptureMode, CUstreamCaptureMode)
SAME_TYPE(mt_CUcontext, CUcontext)
SAME_TYPE(mt_CUstream, CUstream)
SAME_TYPE(mt_CUevent, CUevent)
SAME_TYPE(mt_CUfunction, CUfunction)
SAME_TYPE(mt_CUgraph, CUgraph)
SAME_TYPE(mt_CUgraphNode, CUgraphNode)
SAME_TYPE(mt_CUgraphExec, CUgraphExec)

SAME_TYPE(mt_CUdevice, CUdevice)
SAME_TYPE(mt_CUdevice_attribute, CUdevice_attribute)
SAME_TYPE(mt_cuCtxGetDevice_fn, __typeof__(&cuCtxGetDevice))
SAME_TYPE(mt_cuDeviceGetName_fn, __typeof__(&cuDeviceGetName))
SAME_TYPE(mt_cuDeviceGetAttribute_fn, __typeof__(&cuDeviceGetAttribute))

SAME_TYPE(mt_CUstreamCaptureStatus, CUstreamCaptureStatus)
SAME_TYPE(mt_cuStreamIsCapturing_fn, __typeof__(&cuStreamIsCapturing))
SAME_TYPE(mt_cuGraphGetNodes_fn, __typeof__(&cuGraphGetNodes))
_Static_assert(MT_CU_STREAM_CAPTURE_STATUS_NONE == CU_STREAM_CAPTURE_STATUS_NONE, "CU_STREAM_CAPTURE_STATUS_NONE");

SAME_TYPE(mt_CUptiResult, CUptiResult)
SAME_TYPE(mt_CUpti_CallbackDomain, CUpti_CallbackDomain)
SAME_TYPE(mt_CUpti_ApiCallbackSite, CUpti_ApiCallbackSite)
SAME_TYPE(mt_CUpti_CallbackId, CUpti_CallbackId)
SAME_TYPE(mt_CUpti_SubscriberHandle, CUpti_SubscriberHandle)
SAME_TYPE(mt_CUpti_CallbackFunc, CUpti_CallbackFunc)
SAME_TYPE(mt_cuptiSubscribe_fn, __typeof__(&cuptiSubscribe))
SAME_TYPE(mt_cuptiEnableDomain_fn, __typeof__(&cuptiEnableDomain))
SAME_TYPE(mt_cuptiEnableCallback_fn, __typeof__(&cuptiEnableCallback))
SAME_TYPE(mt_cuptiGetCallbackName_fn, __typeof__(&cuptiGetCallbackName))
SAME_TYPE(mt_cuptiUnsubscribe_fn, __typeof__(&cuptiUnsubscribe))
SAME_TYPE(mt_cuptiGetResultString_fn, __typeof__(&cuptiGetResultString))

#define SAME_SIZE(mine, theirs) _Static_assert(sizeof(mine) == sizeof(theirs), "size of " #theirs);
#define SAME_AT(mine, theirs, field) \
    _Static_assert(offsetof(mine, field) == offsetof(theirs, field), #theirs "." #field " is elsewhere");
/* The same byte offset under another field name. */
#define SAME_AT_AS(mine, mfield, theirs, tfield) \
    _Static_assert(offsetof(mine, mfield) == offsetof(theirs, tfield), #theirs "." #tfield " is elsewhere");

SAME_SIZE(mt_CUpti_CallbackData, CUpti_CallbackData)
SAME_AT(mt_CUpti_CallbackData, CUpti_CallbackData, callbackSite)
SAME_AT(mt_CUpti_CallbackData, CUpti_CallbackData, functionName)
SAME_AT(mt_CUpti_CallbackData, CUpti_CallbackData, functionParams)
SAME_AT(mt_CUpti_CallbackData, CUpti_CallbackData, functionReturnValue)
SAME_AT(mt_CUpti_CallbackData, CUpti_CallbackData, symbolName)
SAME_AT(mt_CUpti_CallbackData, CUpti_CallbackData, context)
SAME_AT(mt_CUpti_CallbackData, CUpti_CallbackData, contextUid)
SAME_AT(mt_CUpti_CallbackData, CUpti_CallbackData, correlationData)
SAME_AT(mt_CUpti_CallbackData, CUpti_CallbackData, correlationId)

SAME_SIZE(mt_CUlaunchConfig, CUlaunchConfig)
SAME_AT(mt_CUlaunchConfig, CUlaunchConfig, sharedMemBytes)
SAME_AT(mt_CUlaunchConfig, CUlaunchConfig, hStream)
SAME_AT(mt_CUlaunchConfig, CUlaunchConfig, attrs)
SAME_AT(mt_CUlaunchConfig, CUlaunchConfig, numAttrs)

/* The stream first. */
#define STREAM_FIRST(p) SAME_AT(mt_cuStreamQuery_params, p, hStream)
STREAM_FIRST(cuStreamQuery_params)
STREAM_FIRST(cuStreamQuery_ptsz_params)
STREAM_FIRST(cuStreamSynchronize_params)
STREAM_FIRST(cuStreamSynchronize_ptsz_params)
STREAM_FIRST(cuStreamDestroy_v2_params)
STREAM_FIRST(cuStreamBeginCapture_params)
STREAM_FIRST(cuStreamBeginCapture_ptsz_params)
STREAM_FIRST(cuStreamIsCapturing_params)
STREAM_FIRST(cuStreamIsCapturing_ptsz_params)
STREAM_FIRST(cuStreamGetCaptureInfo_params)
STREAM_FIRST(cuStreamUpdateCaptureDependencies_params)
STREAM_FIRST(cuLaunchHostFunc_params)
STREAM_FIRST(cuLaunchHostFunc_ptsz_params)
STREAM_FIRST(cuStreamAddCallback_params)
STREAM_FIRST(cuStreamAddCallback_ptsz_params)

SAME_SIZE(mt_cuStreamBeginCapture_v2_params, cuStreamBeginCapture_v2_params)
SAME_AT(mt_cuStreamBeginCapture_v2_params, cuStreamBeginCapture_v2_params, hStream)
SAME_AT(mt_cuStreamBeginCapture_v2_params, cuStreamBeginCapture_v2_params, mode)
SAME_AT(mt_cuStreamBeginCapture_v2_params, cuStreamBeginCapture_v2_ptsz_params, hStream)
SAME_AT(mt_cuStreamBeginCapture_v2_params, cuStreamBeginCapture_v2_ptsz_params, mode)
SAME_TYPE(__typeof__(((mt_cuStreamBeginCapture_v2_params *)0)->mode), __typeof__(((cuStreamBeginCapture_v2_params *)0)->mode))

SAME_AT(mt_cuStreamBeginCaptureToGraph_params, cuStreamBeginCaptureToGraph_params, hStream)
SAME_AT(mt_cuStreamBeginCaptureToGraph_params, cuStreamBeginCaptureToGraph_params, mode)
SAME_AT(mt_cuStreamBeginCaptureToGraph_params, cuStreamBeginCaptureToGraph_ptsz_params, hStream)
SAME_AT(mt_cuStreamBeginCaptureToGraph_params, cuStreamBeginCaptureToGraph_ptsz_params, mode)

SAME_AT(mt_cuStreamEndCapture_params, cuStreamEndCapture_params, hStream)
SAME_AT(mt_cuStreamEndCapture_params, cuStreamEndCapture_ptsz_params, hStream)

SAME_AT(mt_cuThreadExchangeStreamCaptureMode_params, cuThreadExchangeStreamCaptureMode_params, mode)
SAME_TYPE(__typeof__(((mt_cuThreadExchangeStreamCaptureMode_params *)0)->mode),
          __typeof__(((cuThreadExchangeStreamCaptureMode_params *)0)->mode))

SAME_AT(mt_cuEventQuery_params, cuEventQuery_params, hEvent)
SAME_AT(mt_cuEventQuery_params, cuEventSynchronize_params, hEvent)

#define EVENT_THEN_STREAM(p) SAME_AT(mt_cuEventRecord_params, p, hEvent) SAME_AT(mt_cuEventRecord_params, p, hStream)
EVENT_THEN_STREAM(cuEventRecord_params)
EVENT_THEN_STREAM(cuEventRecord_ptsz_params)
EVENT_THEN_STREAM(cuEventRecordWithFlags_params)
EVENT_THEN_STREAM(cuEventRecordWithFlags_ptsz_params)

SAME_AT(mt_cuStreamWaitEvent_params, cuStreamWaitEvent_params, hStream)
SAME_AT(mt_cuStreamWaitEvent_params, cuStreamWaitEvent_params, hEvent)
SAME_AT(mt_cuStreamWaitEvent_params, cuStreamWaitEvent_ptsz_params, hStream)
SAME_AT(mt_cuStreamWaitEvent_params, cuStreamWaitEvent_ptsz_params, hEvent)

/* The stream after a function and seven unsigned ints (byte 40). */
#define LAUNCH(p) SAME_AT(mt_cuLaunchKernel_params, p, hStream)
LAUNCH(cuLaunchKernel_params)
LAUNCH(cuLaunchKernel_ptsz_params)
LAUNCH(cuLaunchCooperativeKernel_params)
LAUNCH(cuLaunchCooperativeKernel_ptsz_params)
SAME_SIZE(mt_cuLaunchKernel_params, cuLaunchKernel_params)
SAME_AT(mt_cuLaunchKernelEx_params, cuLaunchKernelEx_params, config)
SAME_AT(mt_cuLaunchKernelEx_params, cuLaunchKernelEx_ptsz_params, config)

/* Asynchronous copies and sets: the stream after three 8-byte fields
 * (byte 24). */
#define ASYNC24(p) SAME_AT(mt_cuMemcpyHtoDAsync_v2_params, p, hStream)
ASYNC24(cuMemcpyHtoDAsync_v2_params)
ASYNC24(cuMemcpyHtoDAsync_v2_ptsz_params)
ASYNC24(cuMemcpyDtoHAsync_v2_params)
ASYNC24(cuMemcpyDtoHAsync_v2_ptsz_params)
ASYNC24(cuMemcpyDtoDAsync_v2_params)
ASYNC24(cuMemcpyDtoDAsync_v2_ptsz_params)
ASYNC24(cuMemcpyAsync_params)
ASYNC24(cuMemcpyAsync_ptsz_params)
SAME_AT(mt_cuMemsetD8Async_params, cuMemsetD8Async_params, hStream)
SAME_AT(mt_cuMemsetD8Async_params, cuMemsetD8Async_ptsz_params, hStream)
SAME_AT_AS(mt_cuMemsetD8Async_params, hStream, cuMemsetD16Async_params, hStream)
SAME_AT_AS(mt_cuMemsetD8Async_params, hStream, cuMemsetD16Async_ptsz_params, hStream)
SAME_AT_AS(mt_cuMemsetD8Async_params, hStream, cuMemsetD32Async_params, hStream)
SAME_AT_AS(mt_cuMemsetD8Async_params, hStream, cuMemsetD32Async_ptsz_params, hStream)
_Static_assert(offsetof(mt_cuMemcpyHtoDAsync_v2_params, hStream) == 24, "the observer reads byte 24");

/* The stream second (byte 8). */
#define SECOND(p) SAME_AT(mt_cuGraphLaunch_params, p, hStream)
SECOND(cuGraphLaunch_params)
SECOND(cuGraphLaunch_ptsz_params)
SECOND(cuGraphUpload_params)
SECOND(cuGraphUpload_ptsz_params)
SECOND(cuMemFreeAsync_params)
SECOND(cuMemFreeAsync_ptsz_params)
SECOND(cuMemcpy2DAsync_v2_params)
SECOND(cuMemcpy2DAsync_v2_ptsz_params)
SECOND(cuMemcpy3DAsync_v2_params)
SECOND(cuMemcpy3DAsync_v2_ptsz_params)

/* Every instantiation: the executable graph's pointer, then the graph. */
#define INSTANTIATE(p) \
    SAME_AT(mt_cuGraphInstantiate_params, p, phGraphExec) SAME_AT(mt_cuGraphInstantiate_params, p, hGraph) \
    SAME_TYPE(__typeof__(((mt_cuGraphInstantiate_params *)0)->phGraphExec), __typeof__(((p *)0)->phGraphExec))
INSTANTIATE(cuGraphInstantiateWithFlags_params)
INSTANTIATE(cuGraphInstantiateWithParams_params)
INSTANTIATE(cuGraphInstantiateWithParams_ptsz_params)
SAME_AT(mt_cuGraphLaunch_params, cuGraphLaunch_params, hGraph)
SAME_AT(mt_cuStreamEndCapture_params, cuStreamEndCapture_params, phGraph)

SAME_AT(mt_cuMemAllocAsync_params, cuMemAllocAsync_params, hStream)
SAME_AT(mt_cuMemAllocAsync_params, cuMemAllocAsync_ptsz_params, hStream)

_Static_assert(MT_CUPTI_SUCCESS == CUPTI_SUCCESS, "CUPTI_SUCCESS");
_Static_assert(MT_CUPTI_ERROR_UNKNOWN == CUPTI_ERROR_UNKNOWN, "CUPTI_ERROR_UNKNOWN");
_Static_assert(MT_CUPTI_API_ENTER == CUPTI_API_ENTER, "CUPTI_API_ENTER");
_Static_assert(MT_CUPTI_API_EXIT == CUPTI_API_EXIT, "CUPTI_API_EXIT");
_Static_assert(MT_CUPTI_CB_DOMAIN_DRIVER_API == CUPTI_CB_DOMAIN_DRIVER_API, "CUPTI_CB_DOMAIN_DRIVER_API");
_Static_assert(MT_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
               "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT");
_Static_assert(MT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
               "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR");
_Static_assert(MT_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
               "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR");
_Static_assert(MT_CU_STREAM_CAPTURE_MODE_GLOBAL == CU_STREAM_CAPTURE_MODE_GLOBAL, "global");
_Static_assert(MT_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, "thread-local");
_Static_assert(MT_CU_STREAM_CAPTURE_MODE_RELAXED == CU_STREAM_CAPTURE_MODE_RELAXED, "relaxed");
_Static_assert(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED == 900 && CUDA_ERROR_STREAM_CAPTURE_INVALIDATED == 901 &&
                   CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD == 908,
               "the refusal codes the observer treats as 900..908");

#ifdef MIOTOOL_MUST_FAIL
/* The check's own proof that a misplaced field is caught. */
SAME_AT_AS(mt_cuStreamBeginCapture_v2_params, mode, cuStreamQuery_params, hStream)
#endif
