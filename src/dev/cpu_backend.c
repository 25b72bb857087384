/* The built-in cpu backend: host memory, synchronous "streams" (every op has
 * finished when it returns), events as monotonic timestamps. Ops live in
 * cpu_ops*.c and are parallelised with OpenMP over d->threads threads. */
#include "dev/dev.h"
#include "dev/cpu.h"
#include "core/hostinfo.h"
#include "core/timer.h"
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dev_stream { int unused; };
struct dev_event { double t; };
static struct dev_stream g_cpu_stream;

static int cpu_device_count(int *count, plumb_err *e)
{
    (void)e;
    *count = 1;
    return PLUMB_OK;
}

static int cpu_open(struct dev *d, int ordinal, plumb_err *e)
{
    (void)ordinal;
    (void)e;
    const char *model = hostinfo_cpu_model(hostinfo_this());
    snprintf(d->info.name, sizeof d->info.name, "%s", *model ? model : "unknown CPU");
#if defined(__x86_64__)
    snprintf(d->info.arch, sizeof d->info.arch, "x86_64");
#elif defined(__aarch64__)
    snprintf(d->info.arch, sizeof d->info.arch, "aarch64");
#else
    snprintf(d->info.arch, sizeof d->info.arch, "unknown");
#endif
    snprintf(d->info.driver, sizeof d->info.driver, "host");
    cpu_blas_describe(d->info.libs, sizeof d->info.libs);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    d->info.mem_total = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : 0;
    d->info.compute_units = (int)sysconf(_SC_NPROCESSORS_ONLN);
    d->info.warp_size = 1;
    d->threads = 0;
    return PLUMB_OK;
}

static void cpu_close(struct dev *d) { (void)d; }

static int cpu_raw_alloc(struct dev *d, size_t bytes, void **p, plumb_err *e)
{
    /* 64-byte alignment: cache lines and AVX-512 loads */
    *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!*p) return err_set(e, PLUMB_ENOMEM, "%s: out of memory allocating %zu bytes", d->label, bytes);
    return PLUMB_OK;
}

static void cpu_raw_free(struct dev *d, void *p)
{
    (void)d;
    free(p);
}

static int cpu_memcpy(struct dev *d, dev_stream *s, void *dst, const void *src, size_t n,
                      enum memcpy_kind kind, plumb_err *e)
{
    (void)d; (void)s; (void)kind; (void)e;
    if (n) memmove(dst, src, n);
    return PLUMB_OK;
}

static int cpu_memset(struct dev *d, dev_stream *s, void *dst, int value, size_t n, plumb_err *e)
{
    (void)d; (void)s; (void)e;
    memset(dst, value, n);
    return PLUMB_OK;
}

static int cpu_stream_create(struct dev *d, dev_stream **s, plumb_err *e)
{
    (void)d; (void)e;
    *s = &g_cpu_stream;
    return PLUMB_OK;
}
static void cpu_stream_destroy(struct dev *d, dev_stream *s) { (void)d; (void)s; }
static int cpu_stream_sync(struct dev *d, dev_stream *s, plumb_err *e)
{
    (void)d; (void)s; (void)e;
    return PLUMB_OK;
}
/* cpu "streams" are synchronous: no vendor handle, never anything pending */
static void *cpu_stream_native(struct dev *d, dev_stream *s)
{
    (void)d; (void)s;
    return NULL;
}
static int cpu_stream_query(struct dev *d, dev_stream *s, int *done, plumb_err *e)
{
    (void)d; (void)s; (void)e;
    *done = 1;
    return PLUMB_OK;
}
static int cpu_event_create(struct dev *d, dev_event **ev, plumb_err *e)
{
    (void)d;
    *ev = calloc(1, sizeof **ev);
    return *ev ? PLUMB_OK : err_set(e, PLUMB_ENOMEM, "out of host memory");
}
static void cpu_event_destroy(struct dev *d, dev_event *ev) { (void)d; free(ev); }
static int cpu_event_record(struct dev *d, dev_event *ev, dev_stream *s, plumb_err *e)
{
    (void)d; (void)s; (void)e;
    ev->t = timer_now();
    return PLUMB_OK;
}
static int cpu_stream_wait_event(struct dev *d, dev_stream *s, dev_event *ev, plumb_err *e)
{
    (void)d; (void)s; (void)ev; (void)e;
    return PLUMB_OK;
}
static int cpu_event_sync(struct dev *d, dev_event *ev, plumb_err *e)
{
    (void)d; (void)ev; (void)e;
    return PLUMB_OK;
}
static int cpu_event_elapsed(struct dev *d, dev_event *a, dev_event *b, float *ms, plumb_err *e)
{
    (void)d; (void)e;
    *ms = (float)((b->t - a->t) * 1e3);
    return PLUMB_OK;
}

static int cpu_set_numerics(struct dev *d, plumb_err *e)
{
    (void)e;
    if (d->threads > 0) omp_set_num_threads(d->threads);
    return PLUMB_OK;
}

static void cpu_describe_determinism(struct dev *d, char *buf, size_t n)
{
    snprintf(buf, n, "mode=%s; threads=%d; golden ops use fixed evaluation order independent of thread count; "
             "fast GEMM via %s with fixed blocking", d->numerics == NUMERICS_GOLDEN ? "golden" : "fast",
             d->threads > 0 ? d->threads : omp_get_max_threads(), d->info.libs);
}

const struct dev_backend cpu_backend = {
    .abi = PLUMB_BACKEND_ABI,
    .name = "cpu",
    .device_count = cpu_device_count,
    .open = cpu_open,
    .close = cpu_close,
    .raw_alloc = cpu_raw_alloc,
    .raw_free = cpu_raw_free,
    .host_alloc = cpu_raw_alloc,
    .host_free = cpu_raw_free,
    .memcpy_async = cpu_memcpy,
    .memset_async = cpu_memset,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_sync = cpu_stream_sync,
    .stream_native = cpu_stream_native,
    .stream_query = cpu_stream_query,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_sync = cpu_event_sync,
    .event_elapsed_ms = cpu_event_elapsed,
    .set_numerics = cpu_set_numerics,
    .describe_determinism = cpu_describe_determinism,
    .ops = &cpu_ops,
    /* no graphs here, and every op has run when it returns: a mark is a record */
    .event_mark = cpu_event_record,
};
