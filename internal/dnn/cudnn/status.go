package cudnn

import (
	"fmt"

	"miotool/internal/dnn/dnnlib"
)

// Status is a cudnnStatus_t. cuDNN 9 groups codes by thousands: 1xxx
// uncategorized, 2xxx bad parameter, 3xxx not supported, 4xxx internal
// error, 5xxx execution failed.
type Status int32

// Status codes of cuDNN 9 (cudnn_graph.h).
const (
	StatusSuccess                Status = 0
	StatusNotInitialized         Status = 1001
	StatusSublibraryMismatch     Status = 1002
	StatusSublibraryLoading      Status = 1008
	StatusBadParam               Status = 2000
	StatusBadParamNullPointer    Status = 2002
	StatusBadParamStreamMismatch Status = 2007
	StatusNotSupported           Status = 3000
	StatusInternalError          Status = 4000
	StatusExecutionFailed        Status = 5000
	StatusExecutionFailedDriver  Status = 5001
	StatusExecutionFailedCudart  Status = 5003
)

var statusNames = map[Status]string{
	0:    "CUDNN_STATUS_SUCCESS",
	1001: "CUDNN_STATUS_NOT_INITIALIZED",
	1002: "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH",
	1003: "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH",
	1004: "CUDNN_STATUS_DEPRECATED",
	1005: "CUDNN_STATUS_LICENSE_ERROR",
	1006: "CUDNN_STATUS_RUNTIME_IN_PROGRESS",
	1007: "CUDNN_STATUS_RUNTIME_FP_OVERFLOW",
	1008: "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED",
	2000: "CUDNN_STATUS_BAD_PARAM",
	2001: "CUDNN_STATUS_INVALID_VALUE",
	2002: "CUDNN_STATUS_BAD_PARAM_NULL_POINTER",
	2003: "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER",
	2004: "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED",
	2005: "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND",
	2006: "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT",
	2007: "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH",
	2008: "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH",
	2009: "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES",
	2010: "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE",
	2011: "CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH",
	2012: "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE",
	3000: "CUDNN_STATUS_NOT_SUPPORTED",
	3001: "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN",
	3002: "CUDNN_STATUS_NOT_SUPPORTED_SHAPE",
	3003: "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE",
	3004: "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT",
	3005: "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER",
	3006: "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART",
	3007: "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH",
	3008: "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING",
	3009: "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE",
	3010: "CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT",
	3011: "CUDNN_STATUS_NOT_SUPPORTED_PADDING",
	3012: "CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM",
	3013: "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API",
	4000: "CUDNN_STATUS_INTERNAL_ERROR",
	4001: "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED",
	4002: "CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE",
	4003: "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED",
	4004: "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
	4005: "CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM",
	4006: "CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED",
	5000: "CUDNN_STATUS_EXECUTION_FAILED",
	5001: "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER",
	5002: "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS",
	5003: "CUDNN_STATUS_EXECUTION_FAILED_CUDART",
	5004: "CUDNN_STATUS_EXECUTION_FAILED_CURAND",
}

// String is the code's name, e.g. CUDNN_STATUS_BAD_PARAM; a code without
// one is named by its category, e.g. CUDNN_STATUS_BAD_PARAM(2099).
func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	if cat, ok := statusNames[s/1000*1000]; ok && s >= 1000 {
		return fmt.Sprintf("%s(%d)", cat, int(s))
	}
	return fmt.Sprintf("CUDNN_STATUS(%d)", int(s))
}

// Error is a cuDNN call that returned a status other than success. Its
// Message is cuDNN's own explanation (cudnnGetLastErrorString), or the text
// of a check made before the call; it may be empty.
type Error = dnnlib.Error[Status]

// StatusOf is the status of the first *Error in err's chain: success for
// nil, StatusInternalError for an error that is not cuDNN's.
func StatusOf(err error) Status { return dnnlib.StatusOf(err, StatusInternalError) }

// badArg is an argument refused before it reaches the library.
func badArg(op, format string, args ...any) error {
	return dnnlib.BadArg(op, StatusBadParam, format, args...)
}
