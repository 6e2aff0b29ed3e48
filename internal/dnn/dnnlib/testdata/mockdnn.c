/*
 * The smallest library built on dnnstandin.h, for the tests of the header
 * itself and of package dnnlib: a handle with a stream, tensor and
 * convolution descriptors, the output shape, a forward convolution (mode 1
 * flips the filter) and tensor scaling. Its status for a bad argument is 2.
 */
#define STANDIN_BAD_PARAM 2
#include "../dnntest/dnnstandin.h"

int dnnCreate(handle_t **out) {
    FAIL_POINT("dnnCreate");
    handle_t *h = new_object(HANDLE, sizeof *h);
    *out = h;
    logf_("dnnCreate handle=%p", (void *)h);
    return 0;
}

int dnnDestroy(handle_t *h) { return destroy_handle(h, "dnnDestroy"); }

int dnnSetStream(handle_t *h, void *stream) {
    FAIL_POINT("dnnSetStream");
    return set_stream(h, stream, "dnnSetStream");
}

int dnnGetStream(handle_t *h, void **stream) { return get_stream(h, stream); }

int dnnCreateTensor(tensor_t **d) { return create_desc((void **)d, TENSOR, sizeof(tensor_t), "dnnCreateTensor"); }

int dnnDestroyTensor(tensor_t *d) { return destroy_desc(d, TENSOR, "dnnDestroyTensor"); }

int dnnSetTensor(tensor_t *d, int n, int c, int h, int w) {
    FAIL_POINT("dnnSetTensor");
    logf_("dnnSetTensor desc=%p n=%d c=%d h=%d w=%d", (void *)d, n, c, h, w);
    if (!live(d, TENSOR) || n < 1 || c < 1 || h < 1 || w < 1)
        return STANDIN_BAD_PARAM;
    d->n = n, d->c = c, d->h = h, d->w = w;
    return 0;
}

int dnnCreateConv(conv_t **d) { return create_desc((void **)d, CONV, sizeof(conv_t), "dnnCreateConv"); }

int dnnDestroyConv(conv_t *d) { return destroy_desc(d, CONV, "dnnDestroyConv"); }

int dnnSetConv(conv_t *d, int mode, int pad_h, int pad_w, int u, int v, int dil_h, int dil_w) {
    if (!live(d, CONV))
        return STANDIN_BAD_PARAM;
    d->mode = mode, d->pad_h = pad_h, d->pad_w = pad_w, d->u = u, d->v = v, d->dil_h = dil_h, d->dil_w = dil_w;
    return 0;
}

int dnnOutputDim(const conv_t *cv, const tensor_t *x, const tensor_t *w, int *n, int *c, int *h, int *wd) {
    return output_dim(cv, x, w, TENSOR, n, c, h, wd);
}

int dnnForward(handle_t *h, const conv_t *cv, const tensor_t *xd, const float *x, const tensor_t *wd, const float *w,
               const tensor_t *yd, float *y, const float *alpha, const float *beta) {
    FAIL_POINT("dnnForward");
    if (!live(h, HANDLE) || !live(cv, CONV) || !live(xd, TENSOR) || !live(wd, TENSOR) || !live(yd, TENSOR))
        return STANDIN_BAD_PARAM;
    logf_("dnnForward handle=%p alpha=%g beta=%g stream=%p", (void *)h, *alpha, *beta, h->stream);
    conv_host(cv, cv->mode == 1, xd, x, wd, w, yd, y, *alpha, *beta);
    return 0;
}

int dnnScale(handle_t *h, const tensor_t *yd, float *y, const float *alpha) {
    FAIL_POINT("dnnScale");
    if (!live(h, HANDLE) || !live(yd, TENSOR) || !y || !alpha)
        return STANDIN_BAD_PARAM;
    logf_("dnnScale handle=%p y=%p ydata=%p alpha=%g", (void *)h, (void *)yd, (void *)y, *alpha);
    scale_host(yd, y, *alpha);
    return 0;
}
