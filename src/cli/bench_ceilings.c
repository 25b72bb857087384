/* plumb bench ceilings: the two numbers every speed claim is measured
 * against (METHOD.md): device-to-device copy bandwidth (bytes read plus
 * bytes written) and GEMM TFLOP/s per precision (bf16, fp16, fp32, tf32;
 * fp32 accumulation) through the device's fast gemm op, at a large square
 * shape and at training-like shapes, each next to the datasheet peak.
 *
 * Method: inputs are Philox uniforms (never zeros: zeros run faster than
 * real data); one warm-up call; a batch size R chosen so one batch lasts
 * about --target-ms; --repeats batches timed with device events; the median
 * batch gives the figure. bench/torch_ceilings.py measures the same way. */
#include "cli/bench.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "dev/dev.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ctx {
    struct dev *d;
    long repeats;
    double target_ms;
};

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Times `fn(arg)` R times per batch, `repeats` batches; *ms_each = median
 * batch time / R. */
static int time_batches(struct ctx *c, int (*fn)(struct ctx *, void *), void *arg, double *ms_each, long *r_out,
                        plumb_err *e)
{
    struct dev *d = c->d;
    dev_event *ev0 = NULL, *ev1 = NULL;
    int rc;
    float *t = calloc((size_t)c->repeats, sizeof *t);
    if (!t) return err_set(e, PLUMB_ENOMEM, "out of host memory");
    if ((rc = d->be->event_create(d, &ev0, e)) || (rc = d->be->event_create(d, &ev1, e))) goto out;
    /* warm-up (module load, plan creation), then one timed call to size R */
    if ((rc = fn(c, arg)) || (rc = dev_sync(d, e))) goto out;
    float one = 0;
    if ((rc = d->be->event_record(d, ev0, NULL, e)) || (rc = fn(c, arg)) ||
        (rc = d->be->event_record(d, ev1, NULL, e)) || (rc = d->be->event_sync(d, ev1, e)) ||
        (rc = d->be->event_elapsed_ms(d, ev0, ev1, &one, e)))
        goto out;
    long R = one > 0 ? (long)ceil(c->target_ms / one) : 1;
    if (R < 1) R = 1;
    if (R > 100000) R = 100000;
    for (long i = 0; i < c->repeats; i++) {
        if ((rc = d->be->event_record(d, ev0, NULL, e))) goto out;
        for (long r = 0; r < R; r++)
            if ((rc = fn(c, arg))) goto out;
        if ((rc = d->be->event_record(d, ev1, NULL, e)) || (rc = d->be->event_sync(d, ev1, e)) ||
            (rc = d->be->event_elapsed_ms(d, ev0, ev1, &t[i], e)))
            goto out;
    }
    qsort(t, (size_t)c->repeats, sizeof *t, cmp_f);
    *ms_each = t[c->repeats / 2] / (double)R;
    *r_out = R;
out:
    if (ev0) d->be->event_destroy(d, ev0);
    if (ev1) d->be->event_destroy(d, ev1);
    free(t);
    return rc;
}

struct copy_arg {
    void *dst;
    const void *src;
    size_t n;
    plumb_err *e;
};
static int do_copy(struct ctx *c, void *arg)
{
    struct copy_arg *a = arg;
    return c->d->be->memcpy_async(c->d, NULL, a->dst, a->src, a->n, MEMCPY_D2D, a->e);
}

static int do_gemm(struct ctx *c, void *arg)
{
    const struct gemm_desc *g = arg;
    return c->d->ops->gemm(c->d, NULL, g);
}

/* Fills a device buffer of n elements of type t with Philox uniforms [0,1). */
static int fill_uniform(struct dev *d, void *p, dtype_t t, size_t n, uint32_t tensor, plumb_err *e)
{
    if (!d->ops->rng_uniform || !d->ops->cast)
        return err_set(e, PLUMB_EUNSUPPORTED, "%s: rng_uniform/cast not implemented on this backend", d->label);
    struct rng_stream st = {.seed = 20261129, .purpose = 4 /* data synthesis */, .a = tensor, .b = 0};
    float *tmp = p;
    int rc;
    if (t != DT_F32 && (rc = dev_alloc(d, n * sizeof(float), (void **)&tmp, e))) return rc;
    rc = d->ops->rng_uniform(d, NULL, &st, 0, tmp, n);
    if (!rc && t != DT_F32) rc = d->ops->cast(d, NULL, tmp, DT_F32, p, t, n);
    if (!rc) rc = dev_sync(d, e);
    else err_set(e, PLUMB_EDEVICE, "%s: filling a %s buffer of %zu elements failed (see the message above)",
                 d->label, dtype_name(t), n);
    if (tmp != p) dev_free(d, tmp);
    return rc;
}

static int bench_copy(struct ctx *c, long mib, json_t *rows, plumb_err *e)
{
    struct dev *d = c->d;
    size_t n = (size_t)mib << 20;
    void *a = NULL, *b = NULL;
    int rc;
    if ((rc = dev_alloc(d, n, &a, e)) || (rc = dev_alloc(d, n, &b, e))) goto out;
    if ((rc = fill_uniform(d, a, DT_F32, n / 4, 1, e))) goto out;
    struct copy_arg ca = {b, a, n, e};
    double ms;
    long R;
    if ((rc = time_batches(c, do_copy, &ca, &ms, &R, e))) goto out;
    double gbps = 2.0 * (double)n / (ms * 1e-3) / 1e9, peak = d->info.peak_mem_gbps;
    if (peak > 0) printf("%-8s %-22s %10.4f %11.1f GB/s %7.0f %6.1f%%\n", "copy", "D2D", ms, gbps, peak, 100 * gbps / peak);
    else printf("%-8s %-22s %10.4f %11.1f GB/s %7s %7s\n", "copy", "D2D", ms, gbps, "-", "-");
    fflush(stdout);
    json_t *r = json_object();
    json_object_set_new(r, "kind", json_string("copy"));
    json_object_set_new(r, "bytes_each_way", json_integer((json_int_t)n));
    json_object_set_new(r, "ms", json_real(ms));
    json_object_set_new(r, "batch", json_integer(R));
    json_object_set_new(r, "gbps", json_real(gbps));
    json_object_set_new(r, "peak_gbps", json_real(peak));
    json_array_append_new(rows, r);
out:
    dev_free(d, a);
    dev_free(d, b);
    return rc;
}

static int bench_gemm(struct ctx *c, const char *prec, int m, int n, int k, json_t *rows, plumb_err *e)
{
    struct dev *d = c->d;
    dtype_t t = !strcmp(prec, "bf16") ? DT_BF16 : !strcmp(prec, "fp16") ? DT_F16 : DT_F32;
    int tf32 = !strcmp(prec, "tf32");
    double peak = t == DT_BF16 ? d->info.peak_tflops_bf16 : t == DT_F16 ? d->info.peak_tflops_fp16
                  : tf32 ? d->info.peak_tflops_tf32 : d->info.peak_tflops_fp32;
    void *a = NULL, *b = NULL;
    float *cc = NULL;
    int rc;
    if ((rc = dev_set_numerics(d, NUMERICS_FAST, tf32, e))) return rc;
    if ((rc = dev_alloc(d, (size_t)m * k * dtype_size(t), &a, e)) ||
        (rc = dev_alloc(d, (size_t)k * n * dtype_size(t), &b, e)) ||
        (rc = dev_alloc(d, (size_t)m * n * sizeof(float), (void **)&cc, e)))
        goto out;
    if ((rc = fill_uniform(d, a, t, (size_t)m * k, 2, e)) || (rc = fill_uniform(d, b, t, (size_t)k * n, 3, e)))
        goto out;
    struct gemm_desc g = {.m = m, .n = n, .k = k, .ab_type = t, .a = a, .lda = k, .b = b, .ldb = n,
                          .c = cc, .ldc = n};
    double ms;
    long R;
    if ((rc = time_batches(c, do_gemm, &g, &ms, &R, e))) {
        if (!e->msg[0]) err_set(e, rc, "%s gemm %dx%dx%d failed (see the message above)", prec, m, n, k);
        goto out;
    }
    double tflops = 2.0 * m * n * (double)k / (ms * 1e-3) / 1e12;
    char shape[64];
    snprintf(shape, sizeof shape, "%dx%dx%d", m, n, k);
    if (peak > 0)
        printf("%-8s %-22s %10.4f %9.1f TFLOP/s %7.0f %6.1f%%\n", prec, shape, ms, tflops, peak, 100 * tflops / peak);
    else
        printf("%-8s %-22s %10.4f %9.1f TFLOP/s %7s %7s\n", prec, shape, ms, tflops, "-", "-");
    fflush(stdout);
    json_t *r = json_object();
    json_object_set_new(r, "kind", json_string("gemm"));
    json_object_set_new(r, "dtype", json_string(prec));
    json_object_set_new(r, "m", json_integer(m));
    json_object_set_new(r, "n", json_integer(n));
    json_object_set_new(r, "k", json_integer(k));
    json_object_set_new(r, "ms", json_real(ms));
    json_object_set_new(r, "batch", json_integer(R));
    json_object_set_new(r, "tflops", json_real(tflops));
    json_object_set_new(r, "peak_tflops", json_real(peak));
    json_array_append_new(rows, r);
out:
    dev_free(d, a);
    dev_free(d, b);
    dev_free(d, cc);
    (void)dev_set_numerics(d, NUMERICS_FAST, 0, NULL);
    return rc;
}

/* "auto": the first GPU that opens, else the cpu with a warning. A named GPU
 * that cannot open also falls back to the cpu with a warning saying why. */
static int open_device(const char *spec, struct dev **d, plumb_err *e)
{
    if (!strcmp(spec, "auto")) {
        char specs[8][32];
        int n = dev_list_available(specs, 8);
        for (int i = 0; i < n; i++)
            if (strcmp(specs[i], "cpu") && dev_open(specs[i], d, e) == PLUMB_OK) return PLUMB_OK;
        log_warn("bench ceilings: no GPU device opened; measuring the cpu");
        return dev_open("cpu", d, e);
    }
    return dev_open_or_cpu(spec, d, e);
}

int bench_ceilings(int argc, char **argv)
{
    const char *device = NULL, *shapes = NULL, *dtypes = NULL, *json_path = NULL;
    long copy_mib, repeats;
    double target_ms;
    const struct opt opts[] = {
        {"--device", OPT_STR, &device, "auto", "device to measure: auto (first GPU, else cpu), cpu, cuda[:N], hip[:N]", NULL, "DEV"},
        {"--shapes", OPT_STR, &shapes, "8192x8192x8192,32768x512x367,2048x1024x1024",
         "GEMM shapes MxNxK (row-major C[M,N] = A[M,K] B[K,N]), comma-separated", NULL, "LIST"},
        {"--dtypes", OPT_STR, &dtypes, "bf16,fp16,fp32,tf32", "GEMM precisions (fp32 accumulation in all)", NULL, "LIST"},
        {"--copy-mib", OPT_INT, &copy_mib, "2048", "size of each D2D copy in MiB (0: skip the copy)", "0..65536", NULL},
        {"--repeats", OPT_INT, &repeats, "10", "timed batches per measurement (the median is reported)", "1..1000", NULL},
        {"--target-ms", OPT_DOUBLE, &target_ms, "20", "length of one timed batch in ms", NULL, NULL},
        {"--json", OPT_STR, &json_path, NULL, "write the figures as JSON to this file", NULL, "FILE"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse("plumb bench ceilings [options]",
                        "Device ceilings: D2D copy bandwidth (bytes read + written) and GEMM TFLOP/s per precision\n"
                        "through the device's fast gemm op, each next to the datasheet peak. Inputs are Philox\n"
                        "uniforms; figures are the median of --repeats timed batches.",
                        opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("bench ceilings", &e);
    if (target_ms <= 0 || target_ms > 10000) {
        err_set(&e, PLUMB_EUSAGE, "--target-ms: %g is out of range (expected 0 < ms <= 10000)", target_ms);
        return cli_fail("bench ceilings", &e);
    }
    /* parse the lists up front so a typo fails before any device work */
    char sbuf[1024], dbuf[256], *slist[32], *dlist[8];
    int ns = args_split_list(shapes, sbuf, sizeof sbuf, slist, 32);
    int nd = args_split_list(dtypes, dbuf, sizeof dbuf, dlist, 8);
    if (ns < 0 || nd < 0) {
        err_set(&e, PLUMB_EUSAGE, "--shapes/--dtypes: too many entries (at most 32 shapes and 8 precisions)");
        return cli_fail("bench ceilings", &e);
    }
    /* '' named nothing: the run measured no GEMM (or nothing at all) and passed */
    if (ns == 0 || nd == 0) {
        err_set(&e, PLUMB_EUSAGE, "%s '': expected a comma list of %s", ns == 0 ? "--shapes" : "--dtypes",
                ns == 0 ? "MxNxK shapes" : "bf16, fp16, fp32, tf32");
        return cli_fail("bench ceilings", &e);
    }
    int dims[32][3];
    for (int i = 0; i < ns; i++) {
        /* strtol with a range, not sscanf %d: 4294967304x8x8 overflowed an int and ran as 8x8x8 */
        const char *p = slist[i];
        int ok = 1;
        for (int k = 0; k < 3 && ok; k++) {
            char *end;
            errno = 0;
            long v = strtol(p, &end, 10);
            ok = end != p && errno == 0 && v >= 1 && v <= (1L << 20) && *end == (k < 2 ? 'x' : '\0');
            dims[i][k] = (int)v;
            p = end + 1;
        }
        if (!ok) {
            err_set(&e, PLUMB_EUSAGE, "--shapes: '%s' is not MxNxK with integers in 1..1048576", slist[i]);
            return cli_fail("bench ceilings", &e);
        }
    }
    for (int i = 0; i < nd; i++) {
        if (strcmp(dlist[i], "bf16") && strcmp(dlist[i], "fp16") && strcmp(dlist[i], "fp32") && strcmp(dlist[i], "tf32")) {
            err_set(&e, PLUMB_EUSAGE, "--dtypes: '%s' is not one of bf16, fp16, fp32, tf32", dlist[i]);
            return cli_fail("bench ceilings", &e);
        }
    }
    struct dev *d = NULL;
    if ((rc = open_device(device, &d, &e))) return cli_fail("bench ceilings", &e);
    struct ctx c = {d, repeats, target_ms};
    char det[2048];
    d->be->describe_determinism(d, det, sizeof det);
    printf("device   %s (%s, %s, %d units, warp %d)\nlibs     %s\ndriver   %s\n\n", d->label, d->info.name,
           d->info.arch, d->info.compute_units, d->info.warp_size, d->info.libs, d->info.driver);
    printf("%-8s %-22s %10s %19s %7s %7s\n", "what", "shape", "ms each", "measured", "peak", "%peak");
    json_t *rows = json_array();
    /* buffers past the device's memory are the option's to change (exit 2 naming it), not an internal error:
     * a 99999999x99999999x9 shape was exit 3 "... past the 21.85 GB it may take" */
    if (copy_mib > 0 && (rc = bench_copy(&c, copy_mib, rows, &e))) {
        if (rc == PLUMB_ENOMEM) {
            err_wrap(&e, "--copy-mib %ld: two buffers of that size do not fit on %s", copy_mib, d->label);
            rc = e.code = PLUMB_EUSAGE;
        }
        goto done;
    }
    for (int s = 0; s < ns; s++)
        for (int i = 0; i < nd; i++)
            if ((rc = bench_gemm(&c, dlist[i], dims[s][0], dims[s][1], dims[s][2], rows, &e))) {
                if (rc == PLUMB_ENOMEM) {
                    err_wrap(&e, "--shapes %dx%dx%d: the %s GEMM's buffers do not fit on %s", dims[s][0], dims[s][1],
                             dims[s][2], dlist[i], d->label);
                    rc = e.code = PLUMB_EUSAGE;
                }
                goto done;
            }
    d->be->describe_determinism(d, det, sizeof det);
    printf("\ndeterminism: %s\n", det);
    if (json_path) {
        json_t *j = json_object();
        json_object_set_new(j, "schema", json_string("plumb.ceilings/1"));
        json_object_set_new(j, "device", json_string(d->label));
        json_object_set_new(j, "name", json_string(d->info.name));
        json_object_set_new(j, "arch", json_string(d->info.arch));
        json_object_set_new(j, "driver", json_string(d->info.driver));
        json_object_set_new(j, "libs", json_string(d->info.libs));
        json_object_set_new(j, "determinism", json_string(det));
        json_object_set_new(j, "method", json_string("median of repeats batches timed with device events; "
                                                     "copy counts bytes read + written; Philox uniform inputs"));
        json_object_set(j, "results", rows);
        rc = jsonx_write_file(json_path, j, &e);
        json_decref(j);
    }
done:
    json_decref(rows);
    dev_close(d);
    if (rc) return cli_fail("bench ceilings", &e);
    return 0;
}
