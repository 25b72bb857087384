/* The device interface (docs/GPU.md).
 *
 * A `struct dev` is one opened device (cpu, or ordinal N of cuda/hip). It owns
 * a caching allocator (dev/alloc.c) over the backend's raw allocation, streams
 * and events, and an op table. Models and checks call ops through
 * `d->ops->NAME(d, stream, ...)`; they never branch on the backend.
 *
 * Every op is asynchronous on its stream and takes device pointers (for the
 * cpu backend, host memory). Numerics mode (fast/golden) and TF32 permission
 * are properties of the device handle set at open time (dev_set_numerics);
 * an op reads d->numerics. Shapes are row-major and given in comments as
 * [rows, cols].
 *
 * GPU backends are plugins (libplumb-cuda.so, libplumb-hip.so) that export
 * one symbol, PLUMB_BACKEND_SYMBOL, of type plumb_backend_register_fn; see
 * dev/plugin.c for the search order.
 */
#ifndef PLUMB_DEV_H
#define PLUMB_DEV_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"

/* 2: stream_native and stream_query joined the backend table.
 * 3: graph_begin/end/launch/destroy (optional).
 * 4: dev_info.pci_bus_id (rank binding, train/bind.h).
 * 5: event_mark (optional). */
#define PLUMB_BACKEND_ABI 5
#define PLUMB_BACKEND_SYMBOL "plumb_backend_register_v1"

enum numerics { NUMERICS_FAST = 0, NUMERICS_GOLDEN = 1 };
enum memcpy_kind { MEMCPY_H2D = 0, MEMCPY_D2H = 1, MEMCPY_D2D = 2, MEMCPY_H2H = 3 };

struct dev;
typedef struct dev_stream dev_stream; /* opaque, backend-defined */
typedef struct dev_event dev_event;   /* opaque, backend-defined */
typedef struct dev_graph dev_graph;   /* opaque: an instantiated CUDA/HIP graph */

/* Identifies one Philox stream (docs/numerics.md). Element `index` of the
 * stream is a pure function of (seed, purpose, a, b, index). */
struct rng_stream {
    uint64_t seed;
    uint32_t purpose; /* enum rng_purpose in core/philox.h */
    uint32_t a, b;    /* e.g. tensor id / epoch / step */
};

enum unary_op { UNARY_EXP = 0, UNARY_LOG, UNARY_TANH, UNARY_ERF, UNARY_GELU, UNARY_COUNT };

/* C[m,n] = A[m,k] * B[k,n] (+ C when accumulate), row-major with optional
 * transposes: trans_a means A is stored [k,m]; trans_b means B is stored
 * [n,k]. A and B have type ab_type (fp32, bf16 or fp16); C is fp32;
 * accumulation is fp32. lda/ldb/ldc are row strides in elements. */
struct gemm_desc {
    int m, n, k;
    int trans_a, trans_b;
    dtype_t ab_type;
    const void *a;
    int lda;
    const void *b;
    int ldb;
    float *c;
    int ldc;
    int accumulate;
};

/* The op table. Each backend fills what it implements; a NULL entry means
 * "not implemented on this backend" and callers report it as unsupported.
 * Every op returns PLUMB_OK or an error with a message. */
struct dev_ops {
    /* ---- random numbers (core/philox.h defines the mapping exactly) ---- */
    /* out[i] = word (first + i) of the stream, raw 32-bit Philox output */
    int (*rng_u32)(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                   uint32_t *out, size_t n);
    /* out[i] = uniform [0,1) value (first + i) of the stream (24-bit mapping) */
    int (*rng_uniform)(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                       float *out, size_t n);
    /* out[i] = standard normal value (first + i) of the stream (golden Box-Muller) */
    int (*rng_normal)(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                      float *out, size_t n);

    /* ---- numerics ops ---- */
    int (*gemm)(struct dev *d, dev_stream *s, const struct gemm_desc *g);
    /* out[0] = sum of x[0..n) (golden: the level-by-level pairwise tree of gmath.h) */
    int (*sum)(struct dev *d, dev_stream *s, const float *x, size_t n, float *out);
    /* y[r,:] = softmax(x[r,:]); x,y: [rows, cols] */
    int (*softmax)(struct dev *d, dev_stream *s, const float *x, float *y, int rows, int cols);
    /* y = (x - mean) * rstd * w + b per row; x,y: [rows, cols]; w,b: [cols];
     * mean, rstd: [rows] (may be NULL) */
    int (*layernorm)(struct dev *d, dev_stream *s, const float *x, const float *w,
                     const float *b, float *y, float *mean, float *rstd, int rows, int cols,
                     float eps);
    /* y[i] = op(x[i]) */
    int (*unary)(struct dev *d, dev_stream *s, enum unary_op op, const float *x, float *y,
                 size_t n);
    /* y[i] = (yt) x[i], round to nearest even */
    int (*cast)(struct dev *d, dev_stream *s, const void *x, dtype_t xt, void *y, dtype_t yt,
                size_t n);

    /* ---- training ops: see dev/train_ops.h (filled by the training engine) ---- */
    const struct train_ops *train;
};

/* What a backend provides: device management below the op table. */
struct dev_backend {
    int abi;           /* PLUMB_BACKEND_ABI */
    const char *name;  /* "cpu", "cuda", "hip" */
    /* Number of devices, or an error saying why none (driver missing, ...). */
    int (*device_count)(int *count, plumb_err *e);
    /* Fill d->impl, d->info; called by dev_open. */
    int (*open)(struct dev *d, int ordinal, plumb_err *e);
    void (*close)(struct dev *d);
    /* Raw device memory (the caching allocator sits above these). */
    int (*raw_alloc)(struct dev *d, size_t bytes, void **p, plumb_err *e);
    void (*raw_free)(struct dev *d, void *p);
    /* Host memory the device copies from fastest (pinned); may be malloc. */
    int (*host_alloc)(struct dev *d, size_t bytes, void **p, plumb_err *e);
    void (*host_free)(struct dev *d, void *p);
    int (*memcpy_async)(struct dev *d, dev_stream *s, void *dst, const void *src, size_t n,
                        enum memcpy_kind kind, plumb_err *e);
    int (*memset_async)(struct dev *d, dev_stream *s, void *dst, int value, size_t n,
                        plumb_err *e);
    /* Streams: NULL stream argument anywhere means the device's default stream. */
    int (*stream_create)(struct dev *d, dev_stream **s, plumb_err *e);
    void (*stream_destroy)(struct dev *d, dev_stream *s);
    int (*stream_sync)(struct dev *d, dev_stream *s, plumb_err *e);
    /* The vendor stream behind s (cudaStream_t / hipStream_t, the default
     * stream's for NULL), for vendor libraries that enqueue work on it
     * (NCCL/RCCL). NULL where there is none (the cpu backend). */
    void *(*stream_native)(struct dev *d, dev_stream *s);
    /* Without blocking: *done = 1 when everything queued on s has finished,
     * 0 while work is pending; an error when the stream failed. */
    int (*stream_query)(struct dev *d, dev_stream *s, int *done, plumb_err *e);
    int (*event_create)(struct dev *d, dev_event **ev, plumb_err *e);
    void (*event_destroy)(struct dev *d, dev_event *ev);
    int (*event_record)(struct dev *d, dev_event *ev, dev_stream *s, plumb_err *e);
    /* Make stream s wait for ev (no host block). */
    int (*stream_wait_event)(struct dev *d, dev_stream *s, dev_event *ev, plumb_err *e);
    int (*event_sync)(struct dev *d, dev_event *ev, plumb_err *e);
    /* Milliseconds between two recorded, completed events. */
    int (*event_elapsed_ms)(struct dev *d, dev_event *a, dev_event *b, float *ms, plumb_err *e);
    /* Numerics mode changed: backend may reconfigure (e.g. cuBLAS math mode). */
    int (*set_numerics)(struct dev *d, plumb_err *e);
    /* Fills a JSON-able description of determinism settings in effect
     * (workspace, reduction scheme, atomics) as "key=value; ..." text. */
    void (*describe_determinism)(struct dev *d, char *buf, size_t n);
    const struct dev_ops *ops;
    /* Optional (NULL: none): graphs of queued work. graph_begin starts
     * capturing what this thread queues on s; graph_end stops and
     * instantiates it (the captured work has NOT run; an error when the
     * capture failed, e.g. a synchronisation inside it, and s is usable
     * again); graph_launch replays it on s, reading and writing the same
     * device addresses every time. */
    int (*graph_begin)(struct dev *d, dev_stream *s, plumb_err *e);
    int (*graph_end)(struct dev *d, dev_stream *s, dev_graph **g, plumb_err *e);
    int (*graph_launch)(struct dev *d, dev_graph *g, dev_stream *s, plumb_err *e);
    void (*graph_destroy)(struct dev *d, dev_graph *g);
    /* Optional (NULL: none): event_record that also holds inside a graph.
     * Recorded while s is being captured, ev becomes a node of the graph and
     * is recorded again at that point of every replay (CUDA: an external
     * event node, cudaEventRecordExternal), so event_elapsed_ms times the
     * parts of a replayed step (bench's forward / backward split). Outside a
     * capture: event_record. A plain event_record inside a capture only
     * orders streams (it is no node), and its time is never taken. */
    int (*event_mark)(struct dev *d, dev_event *ev, dev_stream *s, plumb_err *e);
};

/* Filled by the backend's open(). */
struct dev_info {
    char name[128];         /* e.g. "NVIDIA H200" or the CPU model */
    char arch[64];          /* "sm_90", "gfx90a", "x86_64" */
    char driver[64];        /* driver / runtime version text */
    char libs[256];         /* BLAS library and version */
    size_t mem_total;       /* bytes */
    int compute_units;      /* SMs, CUs, or CPU threads */
    int warp_size;          /* 32, 64, or 1 for cpu */
    double peak_tflops_bf16, peak_tflops_fp32, peak_tflops_tf32, peak_tflops_fp16;
    double peak_mem_gbps;   /* datasheet, 0 if unknown */
    char pci_bus_id[32];    /* "0000:3b:00.0" for a PCI device, "" otherwise (rank binding) */
};

/* Caching allocator counters, in bytes. */
struct dev_mem_stats {
    size_t allocated;      /* handed out to callers now */
    size_t reserved;       /* obtained from the backend (allocated + cached) */
    size_t peak_allocated;
    size_t peak_reserved;
    uint64_t n_alloc, n_free, n_raw_alloc, n_raw_free, n_cache_hits;
};

struct dev_alloc; /* dev/alloc.c */

struct dev {
    const struct dev_backend *be;
    const struct dev_ops *ops;
    int ordinal;
    char label[32];          /* "cpu", "cuda:0" */
    enum numerics numerics;
    int allow_tf32;
    int threads;             /* cpu backend: worker threads (0 = all cores) */
    struct dev_info info;
    struct dev_alloc *alloc;
    void *impl;              /* backend private state */
    /* bumped each time the backend moves a workspace its ops share (a
     * captured graph holds the old address: train/trainer.c keys its step
     * graphs by it, so a move means a new capture, not a stale replay) */
    unsigned long ws_gen;
};

/* ---- opening devices ---- */
/* spec: "cpu", "cuda", "cuda:1", "hip", "hip:0". */
int dev_open(const char *spec, struct dev **out, plumb_err *e);
void dev_close(struct dev *d);
/* dev_open, except that a GPU spec whose backend or device is unavailable
 * (no plugin, no driver, wrong driver, no device: PLUMB_EDEVICE) opens the
 * cpu instead, after a warning that names the cause. What commands use, so
 * that a host without a working GPU runs on the cpu instead of failing. */
int dev_open_or_cpu(const char *spec, struct dev **out, plumb_err *e);
/* Turns the fallback of dev_open_or_cpu off (allow = 0) for the whole
 * process: `plumb accept` does this, because it checks exactly the devices it
 * found, and a check that silently ran on the cpu instead of a broken GPU
 * would compare the cpu with itself and pass. Default: on. */
void dev_set_cpu_fallback(int allow);
int dev_set_numerics(struct dev *d, enum numerics mode, int allow_tf32, plumb_err *e);
/* Backend by name: "cpu" is built in; others come from plugins. NULL + error
 * message when the plugin could not load (the message says which library and why). */
const struct dev_backend *dev_backend_get(const char *name, plumb_err *e);
/* Names of devices usable now, for "--device all": fills up to max specs. */
int dev_list_available(char specs[][32], int max);

/* ---- memory through the caching allocator ---- */
int dev_alloc(struct dev *d, size_t bytes, void **p, plumb_err *e);
void dev_free(struct dev *d, void *p);
/* Returns cached blocks to the backend (OOM recovery tier 1). */
void dev_empty_cache(struct dev *d);
void dev_mem_stats(struct dev *d, struct dev_mem_stats *st);
/* Test/drill hook: the next `count` dev_alloc calls fail with PLUMB_ENOMEM. */
void dev_inject_alloc_failures(struct dev *d, int count);

/* Convenience wrappers: synchronous copies on the default stream. */
int dev_upload(struct dev *d, void *dst, const void *src, size_t n, plumb_err *e);
int dev_download(struct dev *d, void *dst, const void *src, size_t n, plumb_err *e);
int dev_sync(struct dev *d, plumb_err *e);
/* Streams and events through the backend table, for code outside dev/ (comm,
 * the trainer): NULL stream = the default stream. dev_stream_native returns
 * NULL on a backend without vendor streams (cpu). */
void *dev_stream_native(struct dev *d, dev_stream *s);
int dev_stream_query(struct dev *d, dev_stream *s, int *done, plumb_err *e);

/* One process per GPU: the device spec ("cuda:1") local rank `local_rank` of
 * `local_world` ranks on this host uses, i.e. ordinal local_rank of the
 * devices the runtime shows after CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES /
 * ROCR_VISIBLE_DEVICES (respected as set). PLUMB_EUSAGE, naming the
 * visibility variable, when the host shows fewer devices than local ranks;
 * the backend's error when it cannot count them. */
int dev_spec_for_local_rank(const char *backend, int local_rank, int local_world, char spec[32], plumb_err *e);

/* ---- plugins ---- */
typedef int (*plumb_backend_register_fn)(int abi, const struct dev_backend **out, plumb_err *e);
/* Loads libplumb-<name>.so: next to the executable, then each directory of
 * PLUMB_BACKEND_PATH (colon-separated). On failure *why says what failed. */
const struct dev_backend *plugin_load(const char *name, plumb_err *e);
/* For doctor: the path tried last and the dlerror text. */
void plugin_describe(const char *name, char *buf, size_t n);

/* The built-in cpu backend. */
extern const struct dev_backend cpu_backend;

#endif
