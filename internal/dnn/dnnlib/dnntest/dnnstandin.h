/*
 * What miotool's C stand-ins for the DNN libraries (libcudnn, libMIOpen)
 * share: the call log and a failure injected into the next call of a
 * function, with the controls (mock_*) the tests bind to read and steer
 * them; the objects a library hands out, which start with a kind and a
 * live flag so that a call can tell a stale or mistaken pointer: handles
 * with their stream, 4-D tensor and 2-D convolution descriptors; and
 * the host versions of the forward convolution and of tensor scaling, so
 * that the Go side's argument order is checked by results as well as by
 * the log.
 *
 * A stand-in defines STANDIN_BAD_PARAM, its library's status for a bad
 * argument, then includes this file by its path relative to the stand-in:
 * the tests build the stand-ins without include flags.
 */
#ifndef MIOTOOL_DNNSTANDIN_H
#define MIOTOOL_DNNSTANDIN_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef STANDIN_BAD_PARAM
#error "define STANDIN_BAD_PARAM, the library's status for a bad argument, before including dnnstandin.h"
#endif

/* ---- the call log and injected failures ---- */

/* mu guards the log and the injected failure. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char logbuf[1 << 18];
static size_t loglen;
static char fail_name[128];
static int fail_status;
/* compute off leaves the data alone, for addresses that are not host memory. */
static int compute = 1;

/* logf_ appends one line to the log; a full log drops further lines. */
static inline void logf_(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    pthread_mutex_lock(&mu);
    if (loglen + (size_t)n + 2 < sizeof logbuf) {
        memcpy(logbuf + loglen, line, (size_t)n);
        loglen += (size_t)n;
        logbuf[loglen++] = '\n';
        logbuf[loglen] = 0;
    }
    pthread_mutex_unlock(&mu);
}

/* take_fail returns the status queued for name, once. */
static inline int take_fail(const char *name) {
    int st = 0;
    pthread_mutex_lock(&mu);
    if (fail_name[0] && strcmp(fail_name, name) == 0) {
        st = fail_status;
        fail_name[0] = 0;
    }
    pthread_mutex_unlock(&mu);
    return st;
}

/* FAIL_POINT returns the status queued for name from the calling function. */
#define FAIL_POINT(name)                      \
    do {                                      \
        int st_ = take_fail(name);            \
        if (st_) {                            \
            logf_("%s failed=%d", name, st_); \
            return st_;                       \
        }                                     \
    } while (0)

/* mock_log copies the log, NUL-terminated, into dst of cap bytes and
 * returns how many bytes of log it copied. */
int mock_log(char *dst, int cap) {
    pthread_mutex_lock(&mu);
    int n = (int)loglen;
    if (n > cap - 1)
        n = cap - 1;
    memcpy(dst, logbuf, (size_t)n);
    dst[n] = 0;
    pthread_mutex_unlock(&mu);
    return n;
}

void mock_log_reset(void) {
    pthread_mutex_lock(&mu);
    loglen = 0;
    logbuf[0] = 0;
    pthread_mutex_unlock(&mu);
}

/* mock_fail_next makes the next call of the function name return status. */
void mock_fail_next(const char *name, int status) {
    pthread_mutex_lock(&mu);
    snprintf(fail_name, sizeof fail_name, "%s", name);
    fail_status = status;
    pthread_mutex_unlock(&mu);
}

void mock_set_compute(int on) { compute = on; }

/* ---- objects ---- */

enum { TENSOR = 1, FILTER = 2, CONV = 3, HANDLE = 4 };

/* object_t starts every handle and descriptor. */
typedef struct {
    int kind;
    int alive;
} object_t;

/* tensor_t is a 4-D descriptor, n x c x h x w (a filter's k, c, r, s);
 * a library without a format leaves it zero. */
typedef struct {
    object_t obj;
    int format, dtype, n, c, h, w;
} tensor_t;

/* conv_t is a 2-D convolution descriptor; u and v are the strides. The
 * compute type and math type are cuDNN's, zero for MIOpen. */
typedef struct {
    object_t obj;
    int mode, pad_h, pad_w, u, v, dil_h, dil_w, ctype, math;
} conv_t;

/* handle_t is a library handle: the stream its work goes to, and what it
 * was made on: the context then current (cuDNN) or the device then
 * selected (MIOpen). */
typedef struct {
    object_t obj;
    void *stream;
    void *ctx;
    int device;
} handle_t;

/* new_object allocates a live object of kind, size bytes in all. */
static inline void *new_object(int kind, size_t size) {
    object_t *o = calloc(1, size);
    o->kind = kind;
    o->alive = 1;
    return o;
}

/* live reports whether p is a live object of kind. */
static inline int live(const void *p, int kind) {
    const object_t *o = p;
    return o != NULL && o->kind == kind && o->alive;
}

/* create_desc and destroy_desc are a library's descriptor calls; name is
 * the C function, for the log and for injected failures. Destroyed objects
 * are kept, so that a later use is told from a fresh allocation. */
static inline int create_desc(void **out, int kind, size_t size, const char *name) {
    FAIL_POINT(name);
    *out = new_object(kind, size);
    logf_("%s desc=%p", name, *out);
    return 0;
}

static inline int destroy_desc(void *p, int kind, const char *name) {
    if (!live(p, kind))
        return STANDIN_BAD_PARAM;
    ((object_t *)p)->alive = 0;
    logf_("%s desc=%p", name, p);
    return 0;
}

/* set_stream, get_stream and destroy_handle are a library's handle calls;
 * name is the C function, for the log. */
static inline int set_stream(handle_t *h, void *stream, const char *name) {
    if (!live(h, HANDLE))
        return STANDIN_BAD_PARAM;
    h->stream = stream;
    logf_("%s handle=%p stream=%p", name, (void *)h, stream);
    return 0;
}

static inline int get_stream(const handle_t *h, void **stream) {
    if (!live(h, HANDLE))
        return STANDIN_BAD_PARAM;
    *stream = h->stream;
    return 0;
}

static inline int destroy_handle(handle_t *h, const char *name) {
    if (!live(h, HANDLE))
        return STANDIN_BAD_PARAM;
    h->obj.alive = 0;
    logf_("%s handle=%p", name, (void *)h);
    return 0;
}

/* ---- the convolution on the host ---- */

static inline int out_size(int in, int pad, int fil, int stride, int dil) {
    int span = dil * (fil - 1) + 1;
    int num = in + 2 * pad - span;
    return num < 0 ? 0 : num / stride + 1;
}

/* out_dims is the output shape of cv over x with filter w. */
static inline void out_dims(const conv_t *cv, const tensor_t *x, const tensor_t *w, int *dims) {
    dims[0] = x->n;
    dims[1] = w->n;
    dims[2] = out_size(x->h, cv->pad_h, w->h, cv->u, cv->dil_h);
    dims[3] = out_size(x->w, cv->pad_w, w->w, cv->v, cv->dil_w);
}

/* output_dim is a library's output-shape call; filter_kind is the kind of
 * w, FILTER or (for MIOpen) TENSOR. */
static inline int output_dim(const conv_t *cv, const tensor_t *x, const tensor_t *w, int filter_kind, int *n, int *c,
                             int *h, int *wd) {
    if (!live(cv, CONV) || !live(x, TENSOR) || !live(w, filter_kind))
        return STANDIN_BAD_PARAM;
    int d[4];
    out_dims(cv, x, w, d);
    *n = d[0], *c = d[1], *h = d[2], *wd = d[3];
    return 0;
}

/* conv_host computes y = alpha*conv(x, w) + beta*y on host memory, with
 * the filter flipped (a true convolution) when flip is set, unless compute
 * is off. */
static inline void conv_host(const conv_t *cv, int flip, const tensor_t *xd, const float *x, const tensor_t *wd,
                             const float *w, const tensor_t *yd, float *y, float alpha, float beta) {
    if (!compute)
        return;
    for (int n = 0; n < yd->n; n++)
        for (int k = 0; k < yd->c; k++)
            for (int oh = 0; oh < yd->h; oh++)
                for (int ow = 0; ow < yd->w; ow++) {
                    double acc = 0;
                    for (int c = 0; c < xd->c; c++)
                        for (int r = 0; r < wd->h; r++)
                            for (int s = 0; s < wd->w; s++) {
                                int ih = oh * cv->u - cv->pad_h + r * cv->dil_h;
                                int iw = ow * cv->v - cv->pad_w + s * cv->dil_w;
                                if (ih < 0 || ih >= xd->h || iw < 0 || iw >= xd->w)
                                    continue;
                                int rr = flip ? wd->h - 1 - r : r, ss = flip ? wd->w - 1 - s : s;
                                acc += (double)x[((n * xd->c + c) * xd->h + ih) * xd->w + iw] *
                                       (double)w[((k * wd->c + c) * wd->h + rr) * wd->w + ss];
                            }
                    float *out = &y[((n * yd->c + k) * yd->h + oh) * yd->w + ow];
                    *out = (float)(alpha * acc + (beta == 0 ? 0 : beta * *out));
                }
}

/* scale_host computes y *= alpha on host memory unless compute is off. */
static inline void scale_host(const tensor_t *yd, float *y, float alpha) {
    if (!compute)
        return;
    size_t n = (size_t)yd->n * yd->c * yd->h * yd->w;
    for (size_t i = 0; i < n; i++)
        y[i] *= alpha;
}

#endif
