/*
 * The HIP side: with the library in LD_PRELOAD, the program's calls to the
 * capture-relevant HIP functions reach these definitions first. Each calls
 * the runtime's own function, resolved once, and reports what it saw. A
 * program that dlopens libamdhip64 and binds its functions with dlsym on
 * that handle bypasses them; one that links it (MIOpen, PyTorch for ROCm,
 * a HIP test) does not.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>

#include "observer.h"

#define MT_OWN(t) mt_##t
#define MT_DECLARE(ret, name, params) MT_EXPORT ret name params;
MT_HIP_API(MT_DECLARE, MT_OWN)

/* The runtime loaded by this process, for when RTLD_NEXT cannot see it: a
 * library the program dlopened with RTLD_LOCAL (a Python extension's
 * libamdhip64) is outside the global scope that RTLD_NEXT searches. */
static int mt_find_runtime(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libamdhip64.so", strlen("libamdhip64.so")) != 0)
        return 0;
    *(void **)data = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    return *(void **)data != NULL;
}

static void *mt_resolve(_Atomic(void *) *slot, const char *name) {
    void *fn = atomic_load_explicit(slot, memory_order_acquire);
    if (fn)
        return fn;
    int saved = errno;
    fn = dlsym(RTLD_NEXT, name);
    if (!fn) {
        void *h = NULL;
        dl_iterate_phdr(mt_find_runtime, &h);
        if (h)
            fn = dlsym(h, name);
    }
    if (fn)
        atomic_store_explicit(slot, fn, memory_order_release);
    errno = saved;
    return fn;
}

#define MT_REAL(name) \
    static _Atomic(void *) mt_real_##name; \
    __typeof__(&name) real = (__typeof__(&name))mt_resolve(&mt_real_##name, #name); \
    if (!real) \
        return MT_hipErrorNotInitialized;

#define MT_S(s) ((uint64_t)(uintptr_t)(s))

/* The calling thread's current device, through the runtime's own
 * functions (none of which the interposer defines). */
static void mt_hip_device(struct mt_device *d, int full) {
    static _Atomic(void *) get_device, get_name, get_attribute, get_properties;
    mt_hipGetDevice_fn device = (mt_hipGetDevice_fn)mt_resolve(&get_device, "hipGetDevice");
    int dev;
    if (!device || device(&dev) != MT_hipSuccess)
        return;
    d->ordinal = dev;
    if (!full)
        return;
    mt_hipDeviceGetName_fn name = (mt_hipDeviceGetName_fn)mt_resolve(&get_name, "hipDeviceGetName");
    if (name && name(d->name, (int)sizeof d->name, dev) != MT_hipSuccess)
        d->name[0] = '\0';
    mt_hipDeviceGetAttribute_fn attribute = (mt_hipDeviceGetAttribute_fn)mt_resolve(&get_attribute, "hipDeviceGetAttribute");
    int cus = 0;
    if (attribute && attribute(&cus, MT_hipDeviceAttributeMultiprocessorCount, dev) == MT_hipSuccess)
        d->cus = cus;
    mt_hipGetDevicePropertiesR0600_fn properties =
        (mt_hipGetDevicePropertiesR0600_fn)mt_resolve(&get_properties, "hipGetDevicePropertiesR0600");
    _Alignas(16) unsigned char prop[MT_HIP_DEVICE_PROP_SIZE];
    if (properties && properties((struct hipDeviceProp_tR0600 *)(void *)prop, dev) == MT_hipSuccess) {
        const char *arch = (const char *)prop + MT_HIP_DEVICE_PROP_GCN_ARCH_NAME;
        size_t n = strnlen(arch, MT_HIP_DEVICE_PROP_GCN_ARCH_NAME_LEN);
        if (n >= sizeof d->arch)
            n = sizeof d->arch - 1;
        memcpy(d->arch, arch, n);
        d->arch[n] = '\0';
    }
}

/* A graph's node count (-1: unknown), by the runtime's own function. */
static long mt_hip_graph_nodes(mt_hipGraph_t graph) {
    static _Atomic(void *) get_nodes;
    mt_hipGraphGetNodes_fn fn = (mt_hipGraphGetNodes_fn)mt_resolve(&get_nodes, "hipGraphGetNodes");
    size_t n = 0;
    if (!graph || !fn)
        return -1;
    return fn(graph, NULL, &n) == MT_hipSuccess ? (long)n : -1;
}

/* Whether work launched into stream escaped every capture: the stream is
 * not a capture's own and the runtime says it is not capturing. */
static int mt_hip_outside(mt_hipStream_t stream) {
    static _Atomic(void *) is_capturing;
    if (mt_capture_origin(MT_API_HIP, MT_S(stream)))
        return 0;
    __typeof__(&hipStreamIsCapturing) fn = (__typeof__(&hipStreamIsCapturing))mt_resolve(&is_capturing, "hipStreamIsCapturing");
    mt_hipStreamCaptureStatus status = 0;
    return fn && fn(stream, &status) == MT_hipSuccess && status == MT_hipStreamCaptureStatusNone;
}

/* A call that names a stream and an event; candidate: the capture rules
 * govern it, so its callers matter even when it succeeds. */
static mt_hipError_t mt_seen(const char *name, mt_hipError_t r, uint64_t stream, uint64_t event, int candidate) {
    if (mt_any_capture())
        mt_call(MT_API_HIP, name, stream, event, r, mt_hip_thread_mode, candidate, 0);
    return r;
}

/* A call that enqueues work on stream. */
static mt_hipError_t mt_work(const char *name, mt_hipError_t r, mt_hipStream_t stream) {
    if (mt_any_capture())
        mt_call(MT_API_HIP, name, MT_S(stream), 0, r, mt_hip_thread_mode, 0,
                r == MT_hipSuccess && mt_hip_outside(stream));
    return r;
}

mt_hipError_t hipStreamBeginCapture(mt_hipStream_t stream, mt_hipStreamCaptureMode mode) {
    MT_REAL(hipStreamBeginCapture)
    mt_hipError_t r = real(stream, mode);
    mt_begin(MT_API_HIP, "hipStreamBeginCapture", MT_S(stream), mode, r, mt_hip_device);
    return r;
}

mt_hipError_t hipStreamBeginCaptureToGraph(mt_hipStream_t stream, mt_hipGraph_t graph,
                                           const mt_hipGraphNode_t *dependencies,
                                           const mt_hipGraphEdgeData *dependencyData, size_t numDependencies,
                                           mt_hipStreamCaptureMode mode) {
    MT_REAL(hipStreamBeginCaptureToGraph)
    mt_hipError_t r = real(stream, graph, dependencies, dependencyData, numDependencies, mode);
    mt_begin(MT_API_HIP, "hipStreamBeginCaptureToGraph", MT_S(stream), mode, r, mt_hip_device);
    return r;
}

mt_hipError_t hipStreamEndCapture(mt_hipStream_t stream, mt_hipGraph_t *pGraph) {
    MT_REAL(hipStreamEndCapture)
    mt_hipError_t r = real(stream, pGraph);
    mt_hipGraph_t graph = r == MT_hipSuccess && pGraph ? *pGraph : NULL;
    /* HIP leaves a capture active when the wrong thread ends it. */
    mt_end(MT_API_HIP, "hipStreamEndCapture", MT_S(stream), r, r == MT_hipErrorStreamCaptureWrongThread, MT_S(graph),
           mt_tracing && graph ? mt_hip_graph_nodes(graph) : -1);
    return r;
}

mt_hipError_t hipThreadExchangeStreamCaptureMode(mt_hipStreamCaptureMode *mode) {
    MT_REAL(hipThreadExchangeStreamCaptureMode)
    mt_hipStreamCaptureMode want = mode ? *mode : mt_hip_thread_mode;
    mt_hipError_t r = real(mode);
    if (r == MT_hipSuccess)
        mt_hip_thread_mode = want;
    return mt_seen("hipThreadExchangeStreamCaptureMode", r, 0, 0, 0);
}

mt_hipError_t hipStreamDestroy(mt_hipStream_t stream) {
    MT_REAL(hipStreamDestroy)
    mt_hipError_t r = real(stream);
    if (r == MT_hipSuccess && mt_any_capture())
        mt_stream_gone(MT_API_HIP, MT_S(stream));
    return mt_seen("hipStreamDestroy", r, MT_S(stream), 0, 0);
}

mt_hipError_t hipStreamIsCapturing(mt_hipStream_t stream, mt_hipStreamCaptureStatus *pCaptureStatus) {
    MT_REAL(hipStreamIsCapturing)
    return mt_seen("hipStreamIsCapturing", real(stream, pCaptureStatus), MT_S(stream), 0, 0);
}

mt_hipError_t hipStreamGetCaptureInfo(mt_hipStream_t stream, mt_hipStreamCaptureStatus *pCaptureStatus,
                                      unsigned long long *pId) {
    MT_REAL(hipStreamGetCaptureInfo)
    return mt_seen("hipStreamGetCaptureInfo", real(stream, pCaptureStatus, pId), MT_S(stream), 0, 0);
}

mt_hipError_t hipStreamQuery(mt_hipStream_t stream) {
    MT_REAL(hipStreamQuery)
    return mt_seen("hipStreamQuery", real(stream), MT_S(stream), 0, 1);
}

mt_hipError_t hipStreamSynchronize(mt_hipStream_t stream) {
    MT_REAL(hipStreamSynchronize)
    return mt_seen("hipStreamSynchronize", real(stream), MT_S(stream), 0, 1);
}

mt_hipError_t hipStreamWaitEvent(mt_hipStream_t stream, mt_hipEvent_t event, unsigned int flags) {
    MT_REAL(hipStreamWaitEvent)
    return mt_seen("hipStreamWaitEvent", real(stream, event, flags), MT_S(stream), MT_S(event), 0);
}

mt_hipError_t hipEventQuery(mt_hipEvent_t event) {
    MT_REAL(hipEventQuery)
    return mt_seen("hipEventQuery", real(event), 0, MT_S(event), 1);
}

mt_hipError_t hipEventSynchronize(mt_hipEvent_t event) {
    MT_REAL(hipEventSynchronize)
    return mt_seen("hipEventSynchronize", real(event), 0, MT_S(event), 1);
}

mt_hipError_t hipEventRecord(mt_hipEvent_t event, mt_hipStream_t stream) {
    MT_REAL(hipEventRecord)
    return mt_seen("hipEventRecord", real(event, stream), MT_S(stream), MT_S(event), 0);
}

mt_hipError_t hipDeviceSynchronize(void) {
    MT_REAL(hipDeviceSynchronize)
    return mt_seen("hipDeviceSynchronize", real(), 0, 0, 1);
}

mt_hipError_t hipMalloc(void **ptr, size_t size) {
    MT_REAL(hipMalloc)
    return mt_seen("hipMalloc", real(ptr, size), 0, 0, 1);
}

mt_hipError_t hipFree(void *ptr) {
    MT_REAL(hipFree)
    return mt_seen("hipFree", real(ptr), 0, 0, 1);
}

mt_hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags) {
    MT_REAL(hipHostMalloc)
    return mt_seen("hipHostMalloc", real(ptr, size, flags), 0, 0, 1);
}

mt_hipError_t hipHostFree(void *ptr) {
    MT_REAL(hipHostFree)
    return mt_seen("hipHostFree", real(ptr), 0, 0, 1);
}

mt_hipError_t hipExtHostAlloc(void **ptr, size_t size, unsigned int flags) {
    MT_REAL(hipExtHostAlloc)
    return mt_seen("hipExtHostAlloc", real(ptr, size, flags), 0, 0, 1);
}

mt_hipError_t hipFreeHost(void *ptr) {
    MT_REAL(hipFreeHost)
    return mt_seen("hipFreeHost", real(ptr), 0, 0, 1);
}

mt_hipError_t hipMallocManaged(void **dev_ptr, size_t size, unsigned int flags) {
    MT_REAL(hipMallocManaged)
    return mt_seen("hipMallocManaged", real(dev_ptr, size, flags), 0, 0, 1);
}

mt_hipError_t hipMallocAsync(void **dev_ptr, size_t size, mt_hipStream_t stream) {
    MT_REAL(hipMallocAsync)
    return mt_seen("hipMallocAsync", real(dev_ptr, size, stream), MT_S(stream), 0, 0);
}

mt_hipError_t hipFreeAsync(void *dev_ptr, mt_hipStream_t stream) {
    MT_REAL(hipFreeAsync)
    return mt_seen("hipFreeAsync", real(dev_ptr, stream), MT_S(stream), 0, 0);
}

mt_hipError_t hipMemcpy(void *dst, const void *src, size_t sizeBytes, mt_hipMemcpyKind kind) {
    MT_REAL(hipMemcpy)
    return mt_seen("hipMemcpy", real(dst, src, sizeBytes, kind), 0, 0, 1);
}

mt_hipError_t hipMemcpyWithStream(void *dst, const void *src, size_t sizeBytes, mt_hipMemcpyKind kind,
                                  mt_hipStream_t stream) {
    MT_REAL(hipMemcpyWithStream)
    return mt_seen("hipMemcpyWithStream", real(dst, src, sizeBytes, kind, stream), MT_S(stream), 0, 1);
}

mt_hipError_t hipMemcpyHtoD(mt_hipDeviceptr_t dst, void *src, size_t sizeBytes) {
    MT_REAL(hipMemcpyHtoD)
    return mt_seen("hipMemcpyHtoD", real(dst, src, sizeBytes), 0, 0, 1);
}

mt_hipError_t hipMemcpyDtoH(void *dst, mt_hipDeviceptr_t src, size_t sizeBytes) {
    MT_REAL(hipMemcpyDtoH)
    return mt_seen("hipMemcpyDtoH", real(dst, src, sizeBytes), 0, 0, 1);
}

mt_hipError_t hipMemcpyDtoD(mt_hipDeviceptr_t dst, mt_hipDeviceptr_t src, size_t sizeBytes) {
    MT_REAL(hipMemcpyDtoD)
    return mt_seen("hipMemcpyDtoD", real(dst, src, sizeBytes), 0, 0, 1);
}

mt_hipError_t hipMemcpyAsync(void *dst, const void *src, size_t sizeBytes, mt_hipMemcpyKind kind,
                             mt_hipStream_t stream) {
    MT_REAL(hipMemcpyAsync)
    return mt_work("hipMemcpyAsync", real(dst, src, sizeBytes, kind, stream), stream);
}

mt_hipError_t hipMemcpyHtoDAsync(mt_hipDeviceptr_t dst, void *src, size_t sizeBytes, mt_hipStream_t stream) {
    MT_REAL(hipMemcpyHtoDAsync)
    return mt_work("hipMemcpyHtoDAsync", real(dst, src, sizeBytes, stream), stream);
}

mt_hipError_t hipMemcpyDtoHAsync(void *dst, mt_hipDeviceptr_t src, size_t sizeBytes, mt_hipStream_t stream) {
    MT_REAL(hipMemcpyDtoHAsync)
    return mt_work("hipMemcpyDtoHAsync", real(dst, src, sizeBytes, stream), stream);
}

mt_hipError_t hipMemcpyDtoDAsync(mt_hipDeviceptr_t dst, mt_hipDeviceptr_t src, size_t sizeBytes,
                                 mt_hipStream_t stream) {
    MT_REAL(hipMemcpyDtoDAsync)
    return mt_work("hipMemcpyDtoDAsync", real(dst, src, sizeBytes, stream), stream);
}

mt_hipError_t hipMemset(void *dst, int value, size_t sizeBytes) {
    MT_REAL(hipMemset)
    return mt_seen("hipMemset", real(dst, value, sizeBytes), 0, 0, 1);
}

mt_hipError_t hipMemsetAsync(void *dst, int value, size_t sizeBytes, mt_hipStream_t stream) {
    MT_REAL(hipMemsetAsync)
    return mt_work("hipMemsetAsync", real(dst, value, sizeBytes, stream), stream);
}

mt_hipError_t hipMemsetD8(mt_hipDeviceptr_t dest, unsigned char value, size_t count) {
    MT_REAL(hipMemsetD8)
    return mt_seen("hipMemsetD8", real(dest, value, count), 0, 0, 1);
}

mt_hipError_t hipMemsetD32(mt_hipDeviceptr_t dest, int value, size_t count) {
    MT_REAL(hipMemsetD32)
    return mt_seen("hipMemsetD32", real(dest, value, count), 0, 0, 1);
}

mt_hipError_t hipLaunchKernel(const void *function_address, mt_dim3 numBlocks, mt_dim3 dimBlocks, void **args,
                              size_t sharedMemBytes, mt_hipStream_t stream) {
    MT_REAL(hipLaunchKernel)
    return mt_work("hipLaunchKernel", real(function_address, numBlocks, dimBlocks, args, sharedMemBytes, stream), stream);
}

mt_hipError_t hipExtLaunchKernel(const void *function_address, mt_dim3 numBlocks, mt_dim3 dimBlocks, void **args,
                                 size_t sharedMemBytes, mt_hipStream_t stream, mt_hipEvent_t startEvent,
                                 mt_hipEvent_t stopEvent, int flags) {
    MT_REAL(hipExtLaunchKernel)
    return mt_work("hipExtLaunchKernel",
                   real(function_address, numBlocks, dimBlocks, args, sharedMemBytes, stream, startEvent, stopEvent,
                        flags), stream);
}

mt_hipError_t hipModuleLaunchKernel(mt_hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY,
                                    unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                    unsigned int blockDimZ, unsigned int sharedMemBytes, mt_hipStream_t stream,
                                    void **kernelParams, void **extra) {
    MT_REAL(hipModuleLaunchKernel)
    return mt_work("hipModuleLaunchKernel",
                   real(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, stream,
                        kernelParams, extra), stream);
}

mt_hipError_t hipLaunchHostFunc(mt_hipStream_t stream, mt_hipHostFn_t fn, void *userData) {
    MT_REAL(hipLaunchHostFunc)
    return mt_work("hipLaunchHostFunc", real(stream, fn, userData), stream);
}

mt_hipError_t hipGraphLaunch(mt_hipGraphExec_t graphExec, mt_hipStream_t stream) {
    MT_REAL(hipGraphLaunch)
    mt_hipError_t r = real(graphExec, stream);
    /* Its first launch only: a loop that replays a graph costs a lookup. */
    if (mt_graph_launch_new(MT_API_HIP, MT_S(graphExec)))
        mt_graph_launched(MT_API_HIP, "hipGraphLaunch", MT_S(graphExec), MT_S(stream), r);
    return mt_work("hipGraphLaunch", r, stream);
}

mt_hipError_t hipGraphInstantiate(mt_hipGraphExec_t *pGraphExec, mt_hipGraph_t graph, mt_hipGraphNode_t *pErrorNode,
                                  char *pLogBuffer, size_t bufferSize) {
    MT_REAL(hipGraphInstantiate)
    mt_hipError_t r = real(pGraphExec, graph, pErrorNode, pLogBuffer, bufferSize);
    if (mt_tracing)
        mt_graph_instantiated(MT_API_HIP, "hipGraphInstantiate", MT_S(graph),
                              r == MT_hipSuccess && pGraphExec ? MT_S(*pGraphExec) : 0, r, mt_hip_graph_nodes(graph));
    return mt_seen("hipGraphInstantiate", r, 0, 0, 0);
}

mt_hipError_t hipGraphInstantiateWithFlags(mt_hipGraphExec_t *pGraphExec, mt_hipGraph_t graph, unsigned long long flags) {
    MT_REAL(hipGraphInstantiateWithFlags)
    mt_hipError_t r = real(pGraphExec, graph, flags);
    if (mt_tracing)
        mt_graph_instantiated(MT_API_HIP, "hipGraphInstantiateWithFlags", MT_S(graph),
                              r == MT_hipSuccess && pGraphExec ? MT_S(*pGraphExec) : 0, r, mt_hip_graph_nodes(graph));
    return mt_seen("hipGraphInstantiateWithFlags", r, 0, 0, 0);
}
