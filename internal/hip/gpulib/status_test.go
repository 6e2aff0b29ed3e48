package gpulib

import (
	"errors"
	"testing"

	"miotool/internal/hip"
)

func TestStatusMapper(t *testing.T) {
	cuda := StatusMapper{Dialect: hip.DialectCUDA, ErrorName: func(c int32) string {
		if c == 34 {
			return "CUDA_ERROR_STUB_LIBRARY"
		}
		return ""
	}}
	hipm := StatusMapper{Dialect: hip.DialectHIP}
	tests := []struct {
		m      StatusMapper
		op     string
		status int32
		code   hip.Code
		text   string
	}{
		{cuda, "StreamEndCapture", 901, hip.ErrStreamCaptureInvalidated, "cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)"},
		{cuda, "StreamQuery", 900, hip.ErrStreamCaptureUnsupported, "cuStreamQuery: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900)"},
		{cuda, "StreamQuery", 600, hip.ErrNotReady, "cuStreamQuery: CUDA_ERROR_NOT_READY (600)"},
		{cuda, "Init", 34, hip.Code(34), "cuInit: CUDA_ERROR(34) (34): CUDA_ERROR_STUB_LIBRARY"},
		{cuda, "Malloc", 2, hip.ErrOutOfMemory, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{hipm, "StreamEndCapture", 908, hip.ErrStreamCaptureWrongThread, "hipStreamEndCapture: hipErrorStreamCaptureWrongThread (908)"},
		{hipm, "Foo", 4242, hip.Code(4242), "hipFoo: hipError(4242) (4242)"},
	}
	for _, tt := range tests {
		err := tt.m.Err(tt.op, tt.status)
		var e *hip.Error
		if !errors.As(err, &e) {
			t.Fatalf("%s %d: want *hip.Error, got %T", tt.op, tt.status, err)
		}
		if e.Code != tt.code || e.Dialect != tt.m.Dialect || e.Op != tt.op {
			t.Errorf("%s %d: got %+v", tt.op, tt.status, e)
		}
		if err.Error() != tt.text {
			t.Errorf("%s %d: text %q, want %q", tt.op, tt.status, err.Error(), tt.text)
		}
		if hip.CodeOf(err) != tt.code {
			t.Errorf("CodeOf = %d", hip.CodeOf(err))
		}
	}
	if err := cuda.Err("StreamQuery", 0); err != nil {
		t.Fatalf("status 0 gave %v", err)
	}
	if !hip.IsNotReady(cuda.Err("EventQuery", 600)) {
		t.Fatal("600 is not recognised as not-ready")
	}
	e := cuda.Errorf("LaunchKernel", hip.ErrInvalidValue, "kernel argument 0 is nil")
	if e.Error() != "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1): kernel argument 0 is nil" {
		t.Fatalf("Errorf text %q", e.Error())
	}
}
