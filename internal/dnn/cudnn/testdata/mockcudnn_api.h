/*
 * What the cuDNN stand-in (mockcudnn.c) shares with the check that holds
 * it to the real cudnn.h and cuda.h (cudnn_check.c), in their own names:
 *
 *   - MOCKCUDNN_API: every cuDNN function the binding binds, one
 *     X(return type, name, parameters) each, as cuDNN 9 declares it;
 *     MOCKCUDNN_DRIVER_API the same for the CUDA driver functions Context
 *     binds. mockcudnn.c declares every entry with its own types for the
 *     headers', so the C compiler holds its definitions to the lists;
 *     cudnn_check.c holds the lists to the headers, and every symbol the Go
 *     binding tables name (cudnn_binding.h, written by the Go tests) to the
 *     lists.
 *   - MOCKCUDNN_NUMBERS (cudnn.h) and MOCKCUDNN_DRIVER_NUMBERS (cuda.h): the
 *     enumerators the stand-in tests or returns, X(name, value); the
 *     stand-in uses them as MOCK_<name>.
 *   - the stand-in's copy of cudnnConvolutionFwdAlgoPerf_t, under a name of
 *     its own so that the check can set it beside the header's.
 */
#ifndef MIOTOOL_MOCKCUDNN_API_H
#define MIOTOOL_MOCKCUDNN_API_H

#include <stddef.h>

#define MOCKCUDNN_API(X) \
    X(size_t, cudnnGetVersion, (void)) \
    X(size_t, cudnnGetCudartVersion, (void)) \
    X(const char *, cudnnGetErrorString, (cudnnStatus_t status)) \
    X(void, cudnnGetLastErrorString, (char *message, size_t max_size)) \
    X(cudnnStatus_t, cudnnCreate, (cudnnHandle_t *handle)) \
    X(cudnnStatus_t, cudnnDestroy, (cudnnHandle_t handle)) \
    X(cudnnStatus_t, cudnnSetStream, (cudnnHandle_t handle, cudaStream_t streamId)) \
    X(cudnnStatus_t, cudnnGetStream, (cudnnHandle_t handle, cudaStream_t *streamId)) \
    X(cudnnStatus_t, cudnnCreateTensorDescriptor, (cudnnTensorDescriptor_t *tensorDesc)) \
    X(cudnnStatus_t, cudnnSetTensor4dDescriptor, (cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format, \
        cudnnDataType_t dataType, int n, int c, int h, int w)) \
    X(cudnnStatus_t, cudnnDestroyTensorDescriptor, (cudnnTensorDescriptor_t tensorDesc)) \
    X(cudnnStatus_t, cudnnCreateFilterDescriptor, (cudnnFilterDescriptor_t *filterDesc)) \
    X(cudnnStatus_t, cudnnSetFilter4dDescriptor, (cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType, \
        cudnnTensorFormat_t format, int k, int c, int h, int w)) \
    X(cudnnStatus_t, cudnnDestroyFilterDescriptor, (cudnnFilterDescriptor_t filterDesc)) \
    X(cudnnStatus_t, cudnnCreateConvolutionDescriptor, (cudnnConvolutionDescriptor_t *convDesc)) \
    X(cudnnStatus_t, cudnnSetConvolution2dDescriptor, (cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w, \
        int u, int v, int dilation_h, int dilation_w, cudnnConvolutionMode_t mode, cudnnDataType_t computeType)) \
    X(cudnnStatus_t, cudnnSetConvolutionMathType, (cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType)) \
    X(cudnnStatus_t, cudnnDestroyConvolutionDescriptor, (cudnnConvolutionDescriptor_t convDesc)) \
    X(cudnnStatus_t, cudnnGetConvolution2dForwardOutputDim, (const cudnnConvolutionDescriptor_t convDesc, \
        const cudnnTensorDescriptor_t inputTensorDesc, const cudnnFilterDescriptor_t filterDesc, int *n, int *c, \
        int *h, int *w)) \
    X(cudnnStatus_t, cudnnGetConvolutionForwardAlgorithmMaxCount, (cudnnHandle_t handle, int *count)) \
    X(cudnnStatus_t, cudnnFindConvolutionForwardAlgorithm, (cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc, \
        const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc, \
        const cudnnTensorDescriptor_t yDesc, const int requestedAlgoCount, int *returnedAlgoCount, \
        cudnnConvolutionFwdAlgoPerf_t *perfResults)) \
    X(cudnnStatus_t, cudnnGetConvolutionForwardAlgorithm_v7, (cudnnHandle_t handle, \
        const cudnnTensorDescriptor_t srcDesc, const cudnnFilterDescriptor_t filterDesc, \
        const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t destDesc, \
        const int requestedAlgoCount, int *returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t *perfResults)) \
    X(cudnnStatus_t, cudnnGetConvolutionForwardWorkspaceSize, (cudnnHandle_t handle, \
        const cudnnTensorDescriptor_t xDesc, const cudnnFilterDescriptor_t wDesc, \
        const cudnnConvolutionDescriptor_t convDesc, const cudnnTensorDescriptor_t yDesc, \
        cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes)) \
    X(cudnnStatus_t, cudnnConvolutionForward, (cudnnHandle_t handle, const void *alpha, \
        const cudnnTensorDescriptor_t xDesc, const void *x, const cudnnFilterDescriptor_t wDesc, const void *w, \
        const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo, void *workSpace, \
        size_t workSpaceSizeInBytes, const void *beta, const cudnnTensorDescriptor_t yDesc, void *y)) \
    X(cudnnStatus_t, cudnnScaleTensor, (cudnnHandle_t handle, const cudnnTensorDescriptor_t yDesc, void *y, \
        const void *alpha))

#define MOCKCUDNN_DRIVER_API(X) \
    X(CUresult, cuInit, (unsigned int Flags)) \
    X(CUresult, cuDeviceGet, (CUdevice *device, int ordinal)) \
    X(CUresult, cuDevicePrimaryCtxRetain, (CUcontext *pctx, CUdevice dev)) \
    X(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice dev)) \
    X(CUresult, cuCtxSetCurrent, (CUcontext ctx))

#define MOCKCUDNN_NUMBERS(X) \
    X(CUDNN_STATUS_SUCCESS, 0) \
    X(CUDNN_STATUS_NOT_INITIALIZED, 1001) \
    X(CUDNN_STATUS_BAD_PARAM, 2000) \
    X(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, 2002) \
    X(CUDNN_STATUS_NOT_SUPPORTED, 3000) \
    X(CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER, 5001) \
    X(CUDNN_DATA_FLOAT, 0) \
    X(CUDNN_TENSOR_NCHW, 0) \
    X(CUDNN_CONVOLUTION, 0) \
    X(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, 0) \
    X(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, 1) \
    X(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, 6) \
    X(CUDNN_CONVOLUTION_FWD_ALGO_COUNT, 8) \
    X(CUDNN_NON_DETERMINISTIC, 0) \
    X(CUDNN_DETERMINISTIC, 1) \
    X(CUDNN_DEFAULT_MATH, 0) \
    X(CUDNN_FMA_MATH, 3)

#define MOCKCUDNN_DRIVER_NUMBERS(X) \
    X(CUDA_SUCCESS, 0) \
    X(CUDA_ERROR_INVALID_DEVICE, 101)

/* cudnnConvolutionFwdAlgoPerf_t of cuDNN 9 (cudnn_cnn.h). */
typedef struct {
    int algo;
    int status;
    float time;
    size_t memory;
    int determinism;
    int mathType;
    int reserved[3];
} mockcudnn_fwd_algo_perf;

#endif
