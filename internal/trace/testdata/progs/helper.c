/* The extension module loader.c loads: a capture whose own stream is
 * queried while it captures. */
#include "../../observer/mt_abi.h"

mt_hipError_t hipStreamCreate(mt_hipStream_t *);
mt_hipError_t hipStreamQuery(mt_hipStream_t);
mt_hipError_t hipStreamBeginCapture(mt_hipStream_t, mt_hipStreamCaptureMode);
mt_hipError_t hipStreamEndCapture(mt_hipStream_t, mt_hipGraph_t *);

__attribute__((visibility("default"), noinline)) unsigned helper_capture_query(void) {
    mt_hipStream_t s;
    mt_hipGraph_t g;
    hipStreamCreate(&s);
    hipStreamBeginCapture(s, 0);
    hipStreamQuery(s);
    return hipStreamEndCapture(s, &g);
}
