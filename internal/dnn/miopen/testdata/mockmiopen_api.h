/*
 * What the MIOpen stand-in (mockmiopen.c) shares with the check that holds
 * it to the real miopen.h (miopen_check.cpp), in miopen.h's own names:
 *
 *   - MOCKMIOPEN_API: every MIOpen function the binding calls, one
 *     X(return type, name, parameters) each, as miopen.h declares it;
 *     MOCKMIOPEN_HIP_API the same for the HIP runtime function that
 *     DeviceSelector binds. mockmiopen.c declares every entry with its own
 *     types for miopen.h's, so the C compiler holds its definitions to the
 *     lists; miopen_check.cpp holds the lists to the header, and every
 *     symbol the Go binding table names to the lists.
 *   - MOCKMIOPEN_NUMBERS: the enumerators the stand-in tests or returns,
 *     X(name, value); the stand-in uses them as MOCK_<name>.
 *   - the stand-in's copies of the two structs MIOpen fills for the
 *     binding, under names of their own so that the check can set them
 *     beside the header's.
 *
 * It compiles as C (the stand-in) and as C++ (the check).
 */
#ifndef MIOTOOL_MOCKMIOPEN_API_H
#define MIOTOOL_MOCKMIOPEN_API_H

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#define MOCKMIOPEN_API(X) \
    X(miopenStatus_t, miopenGetVersion, (size_t *major, size_t *minor, size_t *patch)) \
    X(const char *, miopenGetErrorString, (miopenStatus_t error)) \
    X(miopenStatus_t, miopenCreateWithStream, (miopenHandle_t *handle, miopenAcceleratorQueue_t stream)) \
    X(miopenStatus_t, miopenSetStream, (miopenHandle_t handle, miopenAcceleratorQueue_t streamID)) \
    X(miopenStatus_t, miopenGetStream, (miopenHandle_t handle, miopenAcceleratorQueue_t *streamID)) \
    X(miopenStatus_t, miopenDestroy, (miopenHandle_t handle)) \
    X(miopenStatus_t, miopenCreateTensorDescriptor, (miopenTensorDescriptor_t *tensorDesc)) \
    X(miopenStatus_t, miopenSet4dTensorDescriptor, (miopenTensorDescriptor_t tensorDesc, miopenDataType_t dataType, \
        int n, int c, int h, int w)) \
    X(miopenStatus_t, miopenDestroyTensorDescriptor, (miopenTensorDescriptor_t tensorDesc)) \
    X(miopenStatus_t, miopenCreateConvolutionDescriptor, (miopenConvolutionDescriptor_t *convDesc)) \
    X(miopenStatus_t, miopenInitConvolutionDescriptor, (miopenConvolutionDescriptor_t convDesc, \
        miopenConvolutionMode_t c_mode, int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h, \
        int dilation_w)) \
    X(miopenStatus_t, miopenDestroyConvolutionDescriptor, (miopenConvolutionDescriptor_t convDesc)) \
    X(miopenStatus_t, miopenGetConvolutionForwardOutputDim, (miopenConvolutionDescriptor_t convDesc, \
        const miopenTensorDescriptor_t inputTensorDesc, const miopenTensorDescriptor_t filterDesc, int *n, int *c, \
        int *h, int *w)) \
    X(miopenStatus_t, miopenConvolutionForwardGetWorkSpaceSize, (miopenHandle_t handle, \
        const miopenTensorDescriptor_t wDesc, const miopenTensorDescriptor_t xDesc, \
        const miopenConvolutionDescriptor_t convDesc, const miopenTensorDescriptor_t yDesc, size_t *workSpaceSize)) \
    X(miopenStatus_t, miopenFindConvolutionForwardAlgorithm, (miopenHandle_t handle, \
        const miopenTensorDescriptor_t xDesc, const void *x, const miopenTensorDescriptor_t wDesc, const void *w, \
        const miopenConvolutionDescriptor_t convDesc, const miopenTensorDescriptor_t yDesc, void *y, \
        const int requestAlgoCount, int *returnedAlgoCount, miopenConvAlgoPerf_t *perfResults, void *workSpace, \
        size_t workSpaceSize, bool exhaustiveSearch)) \
    X(miopenStatus_t, miopenConvolutionForward, (miopenHandle_t handle, const void *alpha, \
        const miopenTensorDescriptor_t xDesc, const void *x, const miopenTensorDescriptor_t wDesc, const void *w, \
        const miopenConvolutionDescriptor_t convDesc, miopenConvFwdAlgorithm_t algo, const void *beta, \
        const miopenTensorDescriptor_t yDesc, void *y, void *workSpace, size_t workSpaceSize)) \
    X(miopenStatus_t, miopenConvolutionForwardGetSolutionCount, (miopenHandle_t handle, \
        const miopenTensorDescriptor_t wDesc, const miopenTensorDescriptor_t xDesc, \
        const miopenConvolutionDescriptor_t convDesc, const miopenTensorDescriptor_t yDesc, size_t *solutionCount)) \
    X(miopenStatus_t, miopenConvolutionForwardGetSolution, (miopenHandle_t handle, \
        const miopenTensorDescriptor_t wDesc, const miopenTensorDescriptor_t xDesc, \
        const miopenConvolutionDescriptor_t convDesc, const miopenTensorDescriptor_t yDesc, \
        const size_t maxSolutionCount, size_t *solutionCount, miopenConvSolution_t *solutions)) \
    X(miopenStatus_t, miopenConvolutionForwardGetSolutionWorkspaceSize, (miopenHandle_t handle, \
        const miopenTensorDescriptor_t wDesc, const miopenTensorDescriptor_t xDesc, \
        const miopenConvolutionDescriptor_t convDesc, const miopenTensorDescriptor_t yDesc, \
        const uint64_t solution_id, size_t *workSpaceSize)) \
    X(miopenStatus_t, miopenConvolutionForwardCompileSolution, (miopenHandle_t handle, \
        const miopenTensorDescriptor_t wDesc, const miopenTensorDescriptor_t xDesc, \
        const miopenConvolutionDescriptor_t convDesc, const miopenTensorDescriptor_t yDesc, \
        const uint64_t solution_id)) \
    X(miopenStatus_t, miopenConvolutionForwardImmediate, (miopenHandle_t handle, \
        const miopenTensorDescriptor_t wDesc, const void *w, const miopenTensorDescriptor_t xDesc, const void *x, \
        const miopenConvolutionDescriptor_t convDesc, const miopenTensorDescriptor_t yDesc, void *y, \
        void *workSpace, size_t workSpaceSize, const uint64_t solution_id)) \
    X(miopenStatus_t, miopenScaleTensor, (miopenHandle_t handle, const miopenTensorDescriptor_t yDesc, void *y, \
        const void *alpha))

#define MOCKMIOPEN_HIP_API(X) \
    X(hipError_t, hipSetDevice, (int deviceId))

#define MOCKMIOPEN_NUMBERS(X) \
    X(miopenStatusSuccess, 0) \
    X(miopenStatusBadParm, 3) \
    X(miopenStatusInternalError, 5) \
    X(miopenStatusUnknownError, 7) \
    X(miopenFloat, 1) \
    X(miopenConvolution, 0) \
    X(miopenConvolutionFwdAlgoGEMM, 0) \
    X(miopenConvolutionFwdAlgoDirect, 1) \
    X(miopenConvolutionAlgoGEMM, 0) \
    X(miopenConvolutionAlgoDirect, 1) \
    X(hipErrorInvalidDevice, 101)

/* miopenConvAlgoPerf_t: the algorithm union, the time and the workspace. */
typedef struct {
    union {
        int fwd_algo;
        int bwd_weights_algo;
        int bwd_data_algo;
    };
    float time;
    size_t memory;
} mockmiopen_conv_algo_perf;

/* miopenConvSolution_t: one immediate-mode solution. */
typedef struct {
    float time;
    size_t workspace_size;
    uint64_t solution_id;
    int algorithm;
} mockmiopen_conv_solution;

#endif
