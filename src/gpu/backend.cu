/* The GPU plugin's device management: registration (PLUMB_BACKEND_SYMBOL),
 * device discovery with clear reasons when there is none, device memory
 * (plain cudaMalloc, never managed memory; the caching allocator in
 * dev/alloc.c sits above raw_alloc/raw_free), pinned host memory, async
 * copies, streams with their own GEMM workspace, events, device info with
 * datasheet peaks, and the determinism description. */
#include "gpu/gpu.h"
#include "gpu/train_gpu.h"
#include <stdlib.h>
#include <string.h>

/* ---- discovery ---- */

static int gpu_device_count(int *count, plumb_err *e)
{
    int n = 0;
    *count = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc == cudaErrorNoDevice)
        return gpu_err(e, PLUMB_EDEVICE, "%s: no GPU present (%s: %s)", PLUMB_VENDOR,
                       cudaGetErrorName(rc), cudaGetErrorString(rc));
    if (rc == cudaErrorInsufficientDriver) {
        int drv = 0, rt = 0;
        (void)cudaDriverGetVersion(&drv);
        (void)cudaRuntimeGetVersion(&rt);
        if (drv == 0)
            return gpu_err(e, PLUMB_EDEVICE,
                           "%s: no driver: the driver library (libcuda.so.1 / the kernel driver) is not "
                           "installed or not loadable (%s; runtime %d.%d)", PLUMB_VENDOR,
                           cudaGetErrorName(rc), rt / 1000, rt % 1000 / 10);
        return gpu_err(e, PLUMB_EDEVICE,
                       "%s: driver missing or too old for this runtime (%s: %s; driver API %d.%d, "
                       "runtime %d.%d)", PLUMB_VENDOR, cudaGetErrorName(rc), cudaGetErrorString(rc),
                       drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
    }
    if (rc != cudaSuccess)
        return gpu_err(e, PLUMB_EDEVICE, "%s: cudaGetDeviceCount failed: %s (%s)", PLUMB_VENDOR,
                       cudaGetErrorName(rc), cudaGetErrorString(rc));
    if (n <= 0) return gpu_err(e, PLUMB_EDEVICE, "%s: the runtime reports 0 devices", PLUMB_VENDOR);
    *count = n;
    return PLUMB_OK;
}

/* ---- datasheet peaks (dense, no sparsity), leads not measurements ---- */

struct peak_row {
    const char *match; /* substring of the device name */
    double bf16, fp16, tf32, fp32, mem_gbps;
};
static const struct peak_row g_peaks[] = {
    /* NVIDIA H200 SXM datasheet: same tensor rates as H100 SXM, 4.8 TB/s HBM3e */
    {"H200", 989, 989, 494, 67, 4800},
    {"H100 PCIe", 756, 756, 378, 51, 2000},
    {"H100", 989, 989, 494, 67, 3350},
    {"A100", 312, 312, 156, 19.5, 2039},
    /* AMD CDNA: MI300X, MI250X/MI250 (per GCD figures are half of these) */
    {"MI300X", 1307, 1307, 653, 163.4, 5300},
    {"MI250X", 383, 383, 0, 95.7, 3277},
    {"MI250", 362, 362, 0, 90.5, 3277},
    {NULL, 0, 0, 0, 0, 0},
};

static void read_kernel_driver(char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[256];
    if (fgets(line, sizeof line, f)) {
        /* "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for x86_64]  580.159.04  Release..."
         * : the first token shaped like N.N */
        char *save = NULL;
        for (char *t = strtok_r(line, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
            if (t[0] >= '0' && t[0] <= '9' && strchr(t, '.')) {
                snprintf(buf, n, "%s", t);
                break;
            }
        }
    }
    fclose(f);
}

static void gpu_close(struct dev *d);

static int stream_init(struct dev *d, struct dev_stream *st, plumb_err *e)
{
    memset(st, 0, sizeof *st);
    GPU_CHECK(d, cudaStreamCreateWithFlags(&st->s, cudaStreamNonBlocking), e);
    cudaError_t rc = cudaMalloc(&st->ws, GPU_WORKSPACE_BYTES);
    if (rc != cudaSuccess) {
        (void)cudaStreamDestroy(st->s);
        st->s = NULL;
        return gpu_check_(rc, "cudaMalloc(GEMM workspace)", d->label, e);
    }
    st->ws_bytes = GPU_WORKSPACE_BYTES;
    rc = cudaMalloc((void **)&st->scratch, GPU_SCRATCH_FLOATS * sizeof(float));
    if (rc != cudaSuccess) {
        (void)cudaFree(st->ws);
        (void)cudaStreamDestroy(st->s);
        st->s = NULL;
        st->ws = NULL;
        st->scratch = NULL;
        return gpu_check_(rc, "cudaMalloc(reduction scratch)", d->label, e);
    }
    return PLUMB_OK;
}

static void stream_fini(struct dev_stream *st)
{
    if (st->ws) (void)cudaFree(st->ws);
    if (st->scratch) (void)cudaFree(st->scratch);
    if (st->s) (void)cudaStreamDestroy(st->s);
    st->ws = NULL;
    st->scratch = NULL;
    st->s = NULL;
}

static int gpu_open(struct dev *d, int ordinal, plumb_err *e)
{
    struct gpu_dev *g = (struct gpu_dev *)calloc(1, sizeof *g);
    if (!g) return gpu_err(e, PLUMB_ENOMEM, "%s: out of host memory", d->label);
    d->impl = g;
    int rc;
    if ((rc = gpu_enter(d, e))) goto fail;
    cudaDeviceProp p;
    if ((rc = gpu_check_(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties", d->label, e)))
        goto fail;
    snprintf(d->info.name, sizeof d->info.name, "%.127s", p.name);
#if defined(PLUMB_HIP)
    snprintf(d->info.arch, sizeof d->info.arch, "%s", p.gcnArchName);
#else
    snprintf(d->info.arch, sizeof d->info.arch, "sm_%d%d", p.major, p.minor);
#endif
    {
        int drv = 0, rt = 0;
        char kmod[64];
        (void)cudaDriverGetVersion(&drv);
        (void)cudaRuntimeGetVersion(&rt);
        read_kernel_driver(kmod, sizeof kmod);
        snprintf(d->info.driver, sizeof d->info.driver, "%s%s%s %d.%d, runtime %d.%d",
                 kmod, kmod[0] ? ", " : "", PLUMB_VENDOR, drv / 1000, drv % 1000 / 10, rt / 1000,
                 rt % 1000 / 10);
    }
    snprintf(d->info.pci_bus_id, sizeof d->info.pci_bus_id, "%04x:%02x:%02x.0", (unsigned)p.pciDomainID,
             (unsigned)p.pciBusID, (unsigned)p.pciDeviceID);
    d->info.mem_total = p.totalGlobalMem;
    d->info.compute_units = p.multiProcessorCount;
    d->info.warp_size = p.warpSize;
    if (p.warpSize != PLUMB_WARP) {
        rc = gpu_err(e, PLUMB_EDEVICE,
                     "%s: device warp size %d but the plugin was compiled for %d (wrong target)",
                     d->label, p.warpSize, PLUMB_WARP);
        goto fail;
    }
    for (const struct peak_row *r = g_peaks; r->match; r++) {
        if (strstr(p.name, r->match)) {
            d->info.peak_tflops_bf16 = r->bf16;
            d->info.peak_tflops_fp16 = r->fp16;
            d->info.peak_tflops_tf32 = r->tf32;
            d->info.peak_tflops_fp32 = r->fp32;
            d->info.peak_mem_gbps = r->mem_gbps;
            break;
        }
    }
    g->sm_count = p.multiProcessorCount;
    g->smem_per_block = p.sharedMemPerBlock;
    if ((rc = stream_init(d, &g->def, e))) goto fail;
    if ((rc = blas_init(d, e))) goto fail;
    blas_version(d->info.libs, sizeof d->info.libs);
    return PLUMB_OK;
fail:
    gpu_close(d);
    return rc;
}

static void gpu_close(struct dev *d)
{
    struct gpu_dev *g = gpu_of(d);
    if (!g) return;
    (void)cudaSetDevice(d->ordinal);
    (void)cudaDeviceSynchronize();
    gpu_train_release(d);
    blas_fini(d);
    stream_fini(&g->def);
    free(g);
    d->impl = NULL;
}

/* ---- memory ---- */

static int gpu_raw_alloc(struct dev *d, size_t bytes, void **p, plumb_err *e)
{
    int rc;
    *p = NULL;
    if ((rc = gpu_enter(d, e))) return rc;
    cudaError_t r = cudaMalloc(p, bytes);
    if (r != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky-free OOM error */
        *p = NULL;
        size_t fr = 0, tot = 0;
        (void)cudaMemGetInfo(&fr, &tot);
        return gpu_err(e, r == cudaErrorMemoryAllocation ? PLUMB_ENOMEM : PLUMB_EDEVICE,
                       "%s: cudaMalloc(%zu bytes) failed: %s (%zu of %zu bytes free)", d->label,
                       bytes, cudaGetErrorString(r), fr, tot);
    }
    return PLUMB_OK;
}

static void gpu_raw_free(struct dev *d, void *p)
{
    if (!p) return;
    (void)cudaSetDevice(d->ordinal);
    cudaError_t r = cudaFree(p);
    if (r != cudaSuccess)
        fprintf(stderr, "plumb: %s: cudaFree failed: %s\n", d->label, cudaGetErrorString(r));
}

static int gpu_host_alloc(struct dev *d, size_t bytes, void **p, plumb_err *e)
{
    *p = NULL;
    cudaError_t r = cudaMallocHost(p, bytes);
    if (r != cudaSuccess) {
        *p = NULL;
        return gpu_err(e, PLUMB_ENOMEM, "%s: pinned host allocation of %zu bytes failed: %s",
                       d->label, bytes, cudaGetErrorString(r));
    }
    return PLUMB_OK;
}

static void gpu_host_free(struct dev *d, void *p)
{
    (void)d;
    if (p) (void)cudaFreeHost(p);
}

static int gpu_memcpy(struct dev *d, dev_stream *s, void *dst, const void *src, size_t n,
                      enum memcpy_kind kind, plumb_err *e)
{
    static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                           cudaMemcpyDeviceToDevice, cudaMemcpyHostToHost};
    if ((int)kind < 0 || kind > MEMCPY_H2H)
        return gpu_err(e, PLUMB_EUSAGE, "%s: memcpy kind %d unknown", d->label, (int)kind);
    if (!n) return PLUMB_OK;
    int rc;
    if ((rc = gpu_enter(d, e))) return rc;
    GPU_CHECK(d, cudaMemcpyAsync(dst, src, n, kinds[kind], gpu_stream(d, s)->s), e);
    return PLUMB_OK;
}

static int gpu_memset(struct dev *d, dev_stream *s, void *dst, int value, size_t n, plumb_err *e)
{
    if (!n) return PLUMB_OK;
    int rc;
    if ((rc = gpu_enter(d, e))) return rc;
    GPU_CHECK(d, cudaMemsetAsync(dst, value, n, gpu_stream(d, s)->s), e);
    return PLUMB_OK;
}

/* ---- streams and events ---- */

static int gpu_stream_create(struct dev *d, dev_stream **s, plumb_err *e)
{
    *s = NULL;
    int rc;
    if ((rc = gpu_enter(d, e))) return rc;
    struct dev_stream *st = (struct dev_stream *)calloc(1, sizeof *st);
    if (!st) return gpu_err(e, PLUMB_ENOMEM, "%s: out of host memory", d->label);
    if ((rc = stream_init(d, st, e))) {
        free(st);
        return rc;
    }
    *s = st;
    return PLUMB_OK;
}

static void gpu_stream_destroy(struct dev *d, dev_stream *s)
{
    if (!s || s == &gpu_of(d)->def) return;
    (void)cudaSetDevice(d->ordinal);
    (void)cudaStreamSynchronize(s->s);
    stream_fini(s);
    free(s);
}

static int gpu_stream_sync(struct dev *d, dev_stream *s, plumb_err *e)
{
    int rc;
    if ((rc = gpu_enter(d, e))) return rc;
    GPU_CHECK(d, cudaStreamSynchronize(gpu_stream(d, s)->s), e);
    return PLUMB_OK;
}

/* For NCCL/RCCL (comm/comm_nccl.c), which enqueue on our streams. */
static void *gpu_stream_native(struct dev *d, dev_stream *s) { return (void *)gpu_stream(d, s)->s; }

static int gpu_stream_query(struct dev *d, dev_stream *s, int *done, plumb_err *e)
{
    int rc;
    if ((rc = gpu_enter(d, e))) return rc;
    cudaError_t q = cudaStreamQuery(gpu_stream(d, s)->s);
    *done = q == cudaSuccess;
    if (q == cudaSuccess || q == cudaErrorNotReady) {
        /* not-ready is no error, but runtimes may keep it as the thread's last
         * error, which the next launch check would then report */
        if (q == cudaErrorNotReady) (void)cudaGetLastError();
        return PLUMB_OK;
    }
    return gpu_check_(q, "cudaStreamQuery", d->label, e);
}

static int gpu_event_create(struct dev *d, dev_event **ev, plumb_err *e)
{
    *ev = NULL;
    int rc;
    if ((rc = gpu_enter(d, e))) return rc;
    struct dev_event *x = (struct dev_event *)calloc(1, sizeof *x);
    if (!x) return gpu_err(e, PLUMB_ENOMEM, "%s: out of host memory", d->label);
    /* blocking sync: a host thread waiting on an event sleeps instead of
     * spinning (the data plane's producer waits on its slots' copies each
     * step, and a spinning waiter takes a core, or a hyperthread's sibling,
     * from the thread that launches the GPU work); timing stays on */
    cudaError_t r = cudaEventCreateWithFlags(&x->ev, cudaEventBlockingSync);
    if (r != cudaSuccess) {
        free(x);
        return gpu_check_(r, "cudaEventCreateWithFlags", d->label, e);
    }
    *ev = x;
    return PLUMB_OK;
}

static void gpu_event_destroy(struct dev *d, dev_event *ev)
{
    if (!ev) return;
    (void)cudaSetDevice(d->ordinal);
    (void)cudaEventDestroy(ev->ev);
    free(ev);
}

static int gpu_event_record(struct dev *d, dev_event *ev, dev_stream *s, plumb_err *e)
{
    GPU_CHECK(d, cudaEventRecord(ev->ev, gpu_stream(d, s)->s), e);
    return PLUMB_OK;
}

#if PLUMB_HAVE_EVENT_MARK
/* event_record that is also a node of a graph captured around it (dev.h) */
static int gpu_event_mark(struct dev *d, dev_event *ev, dev_stream *s, plumb_err *e)
{
    cudaStream_t st = gpu_stream(d, s)->s;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    GPU_CHECK(d, cudaStreamIsCapturing(st, &cs), e);
    if (cs == cudaStreamCaptureStatusActive)
        GPU_CHECK(d, cudaEventRecordWithFlags(ev->ev, st, cudaEventRecordExternal), e);
    else
        GPU_CHECK(d, cudaEventRecord(ev->ev, st), e);
    return PLUMB_OK;
}
#endif

static int gpu_stream_wait_event(struct dev *d, dev_stream *s, dev_event *ev, plumb_err *e)
{
    GPU_CHECK(d, cudaStreamWaitEvent(gpu_stream(d, s)->s, ev->ev, 0), e);
    return PLUMB_OK;
}

static int gpu_event_sync(struct dev *d, dev_event *ev, plumb_err *e)
{
    GPU_CHECK(d, cudaEventSynchronize(ev->ev), e);
    return PLUMB_OK;
}

static int gpu_event_elapsed(struct dev *d, dev_event *a, dev_event *b, float *ms, plumb_err *e)
{
    GPU_CHECK(d, cudaEventElapsedTime(ms, a->ev, b->ev), e);
    return PLUMB_OK;
}

static int gpu_set_numerics(struct dev *d, plumb_err *e)
{
    int rc;
    if ((rc = gpu_enter(d, e))) return rc;
    return blas_set_numerics(d, e);
}

static void gpu_describe_determinism(struct dev *d, char *buf, size_t n)
{
    char blas[768];
    blas_describe(d, blas, sizeof blas);
    snprintf(buf, n,
             "mode=%s; tf32=%s; %s; elementwise and reduction grids depend only on the shape; "
             "reductions use fixed trees, no atomics; golden kernels use the shared gmath.h "
             "evaluation order compiled with fma contraction off",
             d->numerics == NUMERICS_GOLDEN ? "golden" : "fast", d->allow_tf32 ? "allowed" : "off",
             blas);
}

/* ---- graphs (dev.h graph_*): stream capture, instantiate, replay ---- */
struct dev_graph {
    cudaGraphExec_t exec;
};

static int gpu_graph_begin(struct dev *d, dev_stream *s, plumb_err *e)
{
    int rc;
    if ((rc = gpu_enter(d, e))) return rc;
    /* relaxed: a cached allocation inside the step is not an error */
    GPU_CHECK(d, cudaStreamBeginCapture(gpu_stream(d, s)->s, cudaStreamCaptureModeRelaxed), e);
    return PLUMB_OK;
}

static int gpu_graph_end(struct dev *d, dev_stream *s, dev_graph **out, plumb_err *e)
{
    *out = NULL;
    cudaGraph_t g = NULL;
    cudaError_t r = cudaStreamEndCapture(gpu_stream(d, s)->s, &g);
    if (r != cudaSuccess) {
        (void)cudaGetLastError(); /* the capture's error is reported here, not at the next launch */
        if (g) (void)cudaGraphDestroy(g);
        return gpu_check_(r, "cudaStreamEndCapture", d->label, e);
    }
    gpu_graph_dump(d, g);
    struct dev_graph *x = (struct dev_graph *)calloc(1, sizeof *x);
    if (!x) {
        (void)cudaGraphDestroy(g);
        return gpu_err(e, PLUMB_ENOMEM, "%s: out of host memory", d->label);
    }
    r = plumb_graph_instantiate(&x->exec, g);
    (void)cudaGraphDestroy(g);
    if (r != cudaSuccess) {
        (void)cudaGetLastError();
        free(x);
        return gpu_check_(r, "cudaGraphInstantiate", d->label, e);
    }
    *out = x;
    return PLUMB_OK;
}

static int gpu_graph_launch(struct dev *d, dev_graph *g, dev_stream *s, plumb_err *e)
{
    GPU_CHECK(d, cudaGraphLaunch(g->exec, gpu_stream(d, s)->s), e);
    return PLUMB_OK;
}

static void gpu_graph_destroy(struct dev *d, dev_graph *g)
{
    if (!g) return;
    (void)cudaSetDevice(d->ordinal);
    (void)cudaGraphExecDestroy(g->exec);
    free(g);
}

#if !defined(__HIP_DEVICE_COMPILE__) /* host-only table, see ops.cu */
static const struct dev_backend g_backend = {
    PLUMB_BACKEND_ABI,
    PLUMB_VENDOR,
    gpu_device_count,
    gpu_open,
    gpu_close,
    gpu_raw_alloc,
    gpu_raw_free,
    gpu_host_alloc,
    gpu_host_free,
    gpu_memcpy,
    gpu_memset,
    gpu_stream_create,
    gpu_stream_destroy,
    gpu_stream_sync,
    gpu_stream_native,
    gpu_stream_query,
    gpu_event_create,
    gpu_event_destroy,
    gpu_event_record,
    gpu_stream_wait_event,
    gpu_event_sync,
    gpu_event_elapsed,
    gpu_set_numerics,
    gpu_describe_determinism,
    &gpu_ops,
    gpu_graph_begin,
    gpu_graph_end,
    gpu_graph_launch,
    gpu_graph_destroy,
#if PLUMB_HAVE_EVENT_MARK
    gpu_event_mark,
#else
    NULL, /* the runtime has no external event nodes: bench's split is the whole step where graphed */
#endif
};

extern "C" __attribute__((visibility("default"))) int plumb_backend_register_v1(
    int abi, const struct dev_backend **out, plumb_err *e)
{
    *out = NULL;
    if (abi != PLUMB_BACKEND_ABI)
        return gpu_err(e, PLUMB_EDEVICE, "plumb asks for backend ABI %d, this %s plugin has %d", abi,
                       PLUMB_VENDOR, PLUMB_BACKEND_ABI);
    *out = &g_backend;
    return PLUMB_OK;
}
#endif
