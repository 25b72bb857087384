/* Internal to the GPU plugins (the .cu files of src/gpu): device state, streams, the
 * error helpers every vendor call goes through, and the entry points each
 * .cu file provides to the backend table in backend.cu. */
#ifndef PLUMB_GPU_H
#define PLUMB_GPU_H
#include "gpu/vendor.h"
#include <stdarg.h>
#include <stdio.h>
extern "C" {
#include "dev/dev.h"
}

/* One stream with its own GEMM workspace: cuBLAS(Lt) results are bitwise
 * reproducible only when a workspace is never shared between streams.
 * Private to the plugin: code outside src/gpu reaches the vendor stream
 * through the backend's stream_native (dev/dev.h). */
struct dev_stream {
    cudaStream_t s;
    void *ws;
    size_t ws_bytes;
    float *scratch; /* GPU_SCRATCH_FLOATS floats for multi-pass reductions */
};
struct dev_event {
    cudaEvent_t ev;
};

struct blas_state; /* blas.cu */

struct gpu_dev {
    struct dev_stream def; /* the device's default stream (non-blocking) */
    struct blas_state *blas;
    int sm_count;
    size_t smem_per_block;
};

/* 32 MiB: the size NVIDIA recommends for Hopper cuBLASLt workspaces. */
#define GPU_WORKSPACE_BYTES ((size_t)32 << 20)
#define GPU_SCRATCH_FLOATS ((size_t)1 << 18) /* 1 MiB: partial sums of multi-pass reductions */

static inline struct gpu_dev *gpu_of(struct dev *d) { return (struct gpu_dev *)d->impl; }
static inline struct dev_stream *gpu_stream(struct dev *d, dev_stream *s)
{
    return s ? s : &gpu_of(d)->def;
}

/* plumb_err filling without depending on the host binary's symbols. */
static inline int gpu_err(plumb_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int gpu_err(plumb_err *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

/* Maps a runtime error to a plumb status with a message naming the call. */
static inline int gpu_check_(cudaError_t rc, const char *call, const char *label, plumb_err *e)
{
    if (rc == cudaSuccess) return PLUMB_OK;
    int code = rc == cudaErrorMemoryAllocation ? PLUMB_ENOMEM : PLUMB_EDEVICE;
    return gpu_err(e, code, "%s: %s failed: %s (%s)", label, call, cudaGetErrorName(rc),
                   cudaGetErrorString(rc));
}
#define GPU_CHECK(d, call, e)                                                        \
    do {                                                                             \
        int rc_ = gpu_check_((call), #call, (d)->label, (e));                        \
        if (rc_) return rc_;                                                         \
    } while (0)
/* After a kernel launch: launch-configuration errors show up here. */
#define GPU_CHECK_LAUNCH(d, name, e)                                                 \
    do {                                                                             \
        int rc_ = gpu_check_(cudaGetLastError(), "launch of " name, (d)->label, (e)); \
        if (rc_) return rc_;                                                         \
    } while (0)
/* Makes the device current on the calling thread (ops may be called from
 * any host thread). */
static inline int gpu_enter(struct dev *d, plumb_err *e)
{
    GPU_CHECK(d, cudaSetDevice(d->ordinal), e);
    return PLUMB_OK;
}

/* Grid size for an elementwise launch over n items: a pure function of n
 * (never of the SM count), so fast-mode results are the same on any device
 * of the same kind. Grid-stride loops cover the rest. */
static inline unsigned gpu_grid(size_t n, unsigned block)
{
    size_t g = (n + block - 1) / block;
    if (g < 1) g = 1;
    if (g > 65536) g = 65536;
    return (unsigned)g;
}

/* blas.cu: fast GEMM through cuBLASLt (CUDA) or rocBLAS (HIP, dlopen'ed). */
int blas_init(struct dev *d, plumb_err *e);
void blas_fini(struct dev *d);
int blas_gemm(struct dev *d, struct dev_stream *st, const struct gemm_desc *g, plumb_err *e);
void blas_describe(struct dev *d, char *buf, size_t n);
void blas_version(char *buf, size_t n);
/* graph_dump.cu: PLUMB_GRAPH_DUMP=FILE, a captured graph's nodes, one a line */
void gpu_graph_dump(struct dev *d, cudaGraph_t g);
int blas_set_numerics(struct dev *d, plumb_err *e);

/* ops.cu: the op table. */
extern const struct dev_ops gpu_ops;

#endif
