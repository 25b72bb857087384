/* The rng check (plumb rng): Philox4x32-10 on a device through its rng ops.
 *  1. Random123 known-answer vectors, drawn through the stream mapping of
 *     core/philox.h (each KAT counter/key is some (seed, purpose, a, b, index)).
 *  2. Several streams keyed by (seed, purpose, a, b): raw words, uniforms and
 *     normals; a SHA-256 digest of the first `count` values of each, so two
 *     devices or hosts compare by digest; one-sample KS of the uniforms
 *     against U(0,1) and of the normals against N(0,1); a two-sample KS
 *     between two streams' normals; a chi-square over each histogram.
 *  3. Drawing a range in two calls split at an odd index gives the same
 *     values as one call (element i is a pure function of i).
 *  4. On a non-cpu device, the same digests computed on the cpu must match;
 *     a mismatch names the stream and the first differing element.
 * Histograms go to checks/rng[-dev]/histograms.json
 * ({"streams":[{"name","kind","lo","hi","counts","expected"}]}). */
#include "accept/checks.h"
#include "core/hash.h"
#include "core/jsonx.h"
#include "core/philox.h"
#include "core/stats.h"
#include "dev/dev.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KS_FAIL_P 1e-4 /* a fixed-seed stream below this is not uniform/normal */

struct rng_def {
    const char *name;
    uint64_t seed_xor; /* stream seed = --seed ^ seed_xor */
    uint32_t purpose, a, b;
    uint64_t first;
};

/* Five purposes (distinct streams under one seed), the extreme a/b values,
 * a seed with both key words non-zero, and a range starting past 2^34
 * (counter word 1 carries index bits). */
static const struct rng_def streams[] = {
    {"init-t0", 0, RNG_INIT, 0, 0, 0},
    {"dropout-step7-l3", 0, RNG_DROPOUT, 7, 3, 0},
    {"shuffle-e1-highkey", 0xdeadbeef00000000ull, RNG_SHUFFLE, 1, 0, 0},
    {"data-max-ab", 0, RNG_DATA, 0xffffffffu, 0xffffffffu, 0},
    {"augment-high-index", 0, RNG_AUGMENT, 3, 9, ((uint64_t)1 << 34) + 5},
};
#define NSTREAMS (int)(sizeof streams / sizeof streams[0])

/* Random123 kat_vectors "philox4x32 10", expressed as stream elements:
 * counter {blk lo, blk hi16 | purpose << 16, a, b}, key = seed halves. */
struct kat {
    const char *name;
    uint64_t seed;
    uint32_t purpose, a, b;
    uint64_t blk;
    uint32_t out[4];
};
static const struct kat kats[] = {
    {"zeros", 0, 0, 0, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {"ones", 0xffffffffffffffffull, 0xffff, 0xffffffffu, 0xffffffffu, 0xffffffffffffull,
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {"pi", 0x299f31d0a4093822ull, 0x85a3, 0x13198a2eu, 0x03707344u, 0x08d3243f6a88ull,
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

/* draws kind 0 (u32) / 1 (uniform) / 2 (normal) of stream s on d into host out */
static int draw(struct dev *d, const struct rng_stream *st, uint64_t first, size_t n, int kind,
                void *out, plumb_err *e)
{
    void *buf = NULL;
    int rc = dev_alloc(d, n * 4 + 4, &buf, e);
    if (rc) return rc;
    const struct dev_ops *o = d->ops;
    int orc;
    const char *opname = kind == 0 ? "rng_u32" : kind == 1 ? "rng_uniform" : "rng_normal";
    if ((kind == 0 && !o->rng_u32) || (kind == 1 && !o->rng_uniform) || (kind == 2 && !o->rng_normal)) {
        dev_free(d, buf);
        return err_set(e, PLUMB_EUNSUPPORTED, "device %s has no %s op", d->label, opname);
    }
    if (kind == 0) orc = o->rng_u32(d, NULL, st, first, buf, n);
    else if (kind == 1) orc = o->rng_uniform(d, NULL, st, first, buf, n);
    else orc = o->rng_normal(d, NULL, st, first, buf, n);
    if (orc) rc = err_set(e, orc, "%s on %s failed: %s", opname, d->label, err_code_name(orc));
    if (!rc) rc = dev_sync(d, e);
    if (!rc) rc = dev_download(d, out, buf, n * 4, e);
    dev_free(d, buf);
    return rc;
}

static json_t *hist_json(const char *name, const char *kind, const struct histogram *h, const double *exp_)
{
    json_t *o = json_object(), *c = json_array(), *x = json_array();
    for (int i = 0; i < h->bins; i++) {
        json_array_append_new(c, json_integer((json_int_t)h->counts[i]));
        json_array_append_new(x, json_real(exp_[i]));
    }
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "kind", json_string(kind));
    json_object_set_new(o, "lo", json_real(h->lo));
    json_object_set_new(o, "hi", json_real(h->hi));
    json_object_set_new(o, "counts", c);
    json_object_set_new(o, "expected", x);
    json_object_set_new(o, "under", json_integer((json_int_t)h->under));
    json_object_set_new(o, "over", json_integer((json_int_t)h->over));
    return o;
}

static void first_diff_u32(const uint32_t *a, const uint32_t *b, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            *at = i;
            return;
        }
    *at = n;
}

int check_rng_run(const struct check_ctx *ctx, long count, struct check_result *r, plumb_err *e)
{
    return check_rng_run_seed(ctx, count, RNG_CHECK_DEFAULT_SEED, r, e);
}

int check_rng_run_seed(const struct check_ctx *ctx, long count, unsigned long long seed, struct check_result *r,
                       plumb_err *e)
{
    const char *spec = ctx->device ? ctx->device : "cpu";
    if (count < 100 || count > 100000000)
        return err_set(e, PLUMB_EUSAGE, "rng: count %ld out of range (expected 100..100000000)", count);
    size_t n = (size_t)count;
    struct dev *d = NULL, *cpu = NULL;
    int rc = dev_open_or_cpu(spec, &d, e);
    if (rc) return rc;
    d->threads = ctx->threads;
    int is_cpu = !strcmp(d->be->name, "cpu");
    if (!is_cpu) {
        rc = dev_open("cpu", &cpu, e);
        if (rc) {
            dev_close(d);
            return rc;
        }
        cpu->threads = ctx->threads;
    }
    if (check_begin(r, "rng", d->label)) {
        dev_close(d);
        if (cpu) dev_close(cpu);
        return err_set(e, PLUMB_ENOMEM, "rng: out of memory");
    }
    uint32_t *u = malloc(n * 4), *ucpu = malloc(n * 4), *tmp = malloc(n * 4);
    double *dv = malloc(n * sizeof *dv), *dv2 = malloc(n * sizeof *dv2);
    json_t *katj = json_array(), *sj = json_array(), *hists = json_array();
    int kat_fail = 0, ks_fail = 0, mismatch = 0, split_fail = 0;
    double min_p = 1;
    if (!u || !ucpu || !tmp || !dv || !dv2) {
        rc = err_set(e, PLUMB_ENOMEM, "rng: out of memory for %zu values", n);
        goto done;
    }

    /* 1. known answers through the device's rng_u32 */
    for (size_t k = 0; k < sizeof kats / sizeof kats[0]; k++) {
        struct rng_stream st = {kats[k].seed, kats[k].purpose, kats[k].a, kats[k].b};
        uint32_t got[4];
        rc = draw(d, &st, kats[k].blk * 4, 4, 0, got, e);
        if (rc == PLUMB_EUNSUPPORTED) break;
        if (rc) goto done;
        int ok = !memcmp(got, kats[k].out, sizeof got);
        char gs[40], ws[40];
        snprintf(gs, sizeof gs, "%08x %08x %08x %08x", got[0], got[1], got[2], got[3]);
        snprintf(ws, sizeof ws, "%08x %08x %08x %08x", kats[k].out[0], kats[k].out[1], kats[k].out[2], kats[k].out[3]);
        json_t *o = json_object();
        json_object_set_new(o, "vector", json_string(kats[k].name));
        json_object_set_new(o, "expected", json_string(ws));
        json_object_set_new(o, "got", json_string(gs));
        json_object_set_new(o, "pass", json_boolean(ok));
        json_array_append_new(katj, o);
        if (!ok) {
            kat_fail++;
            check_set_status(r, CHECK_FAIL, "Philox known-answer vector '%s': got %s, expected %s", kats[k].name, gs, ws);
        }
    }
    if (rc == PLUMB_EUNSUPPORTED) {
        check_set_status(r, CHECK_FAIL, "%s", e->msg);
        err_clear(e);
        rc = PLUMB_OK;
        goto finish;
    }

    /* 2. streams */
    for (int s = 0; s < NSTREAMS; s++) {
        const struct rng_def *sd = &streams[s];
        uint64_t sseed = seed ^ sd->seed_xor;
        struct rng_stream st = {sseed, sd->purpose, sd->a, sd->b};
        json_t *so = json_object();
        char seedhex[24];
        snprintf(seedhex, sizeof seedhex, "0x%016llx", (unsigned long long)sseed);
        json_object_set_new(so, "name", json_string(sd->name));
        json_object_set_new(so, "seed", json_string(seedhex));
        json_object_set_new(so, "purpose", json_integer(sd->purpose));
        json_object_set_new(so, "a", json_integer(sd->a));
        json_object_set_new(so, "b", json_integer(sd->b));
        json_object_set_new(so, "first", json_integer((json_int_t)sd->first));
        json_object_set_new(so, "count", json_integer((json_int_t)n));
        static const char *kname[] = {"u32", "uniform", "normal"};
        for (int kind = 0; kind < 3; kind++) {
            rc = draw(d, &st, sd->first, n, kind, u, e);
            if (rc) {
                json_decref(so);
                goto done;
            }
            char dg[65], key[32];
            hash_sha256_hex(u, n * 4, dg);
            snprintf(key, sizeof key, "digest_%s", kname[kind]);
            json_object_set_new(so, key, json_string(dg));
            /* 3. split draw: [first, first+h) and [first+h, first+n), h odd */
            size_t h = (n / 3) | 1;
            rc = draw(d, &st, sd->first, h, kind, tmp, e);
            if (!rc) rc = draw(d, &st, sd->first + h, n - h, kind, tmp + h, e);
            if (rc) {
                json_decref(so);
                goto done;
            }
            size_t at;
            first_diff_u32(u, tmp, n, &at);
            if (at < n) {
                split_fail++;
                check_set_status(r, CHECK_FAIL, "stream %s %s: drawing in two calls differs at element %zu "
                                 "(0x%08x vs 0x%08x)", sd->name, kname[kind], (size_t)sd->first + at, u[at], tmp[at]);
            }
            /* 4. digest against the cpu's */
            if (cpu) {
                rc = draw(cpu, &st, sd->first, n, kind, ucpu, e);
                if (rc) {
                    json_decref(so);
                    goto done;
                }
                first_diff_u32(u, ucpu, n, &at);
                snprintf(key, sizeof key, "cpu_equal_%s", kname[kind]);
                json_object_set_new(so, key, json_boolean(at == n));
                if (at < n) {
                    mismatch++;
                    char cdg[65];
                    hash_sha256_hex(ucpu, n * 4, cdg);
                    check_set_status(r, CHECK_FAIL, "stream %s %s differs from the cpu at element %llu: %s 0x%08x, "
                                     "cpu 0x%08x (digest %.16s vs %.16s)", sd->name, kname[kind],
                                     (unsigned long long)(sd->first + at), d->label, u[at], ucpu[at], dg, cdg);
                }
            }
            if (kind == 0) continue;
            float *f = (float *)u;
            for (size_t i = 0; i < n; i++) dv[i] = f[i];
            struct ks_result ks;
            rc = ks_one_sample(dv, n, kind == 1 ? stats_cdf_uniform01 : stats_cdf_normal01, NULL, &ks, e);
            if (rc) {
                if (rc == PLUMB_EUSAGE) { /* a NaN in the stream */
                    check_set_status(r, CHECK_FAIL, "stream %s %s: %s", sd->name, kname[kind], e->msg);
                    err_clear(e);
                    rc = PLUMB_OK;
                    continue;
                }
                json_decref(so);
                goto done;
            }
            snprintf(key, sizeof key, "ks_%s_d", kname[kind]);
            json_object_set_new(so, key, json_real(ks.d));
            snprintf(key, sizeof key, "ks_%s_p", kname[kind]);
            json_object_set_new(so, key, json_real(ks.p));
            if (ks.p < min_p) min_p = ks.p;
            if (ks.p < KS_FAIL_P) {
                ks_fail++;
                check_set_status(r, CHECK_FAIL, "stream %s %s: KS D=%.3g p=%.3g below %.0e", sd->name, kname[kind],
                                 ks.d, ks.p, KS_FAIL_P);
            }
            /* histogram */
            struct histogram hg;
            double lo = kind == 1 ? 0 : -4, hi = kind == 1 ? 1 : 4;
            int bins = kind == 1 ? 50 : 64;
            rc = hist_init(&hg, lo, hi, bins, e);
            if (rc) {
                json_decref(so);
                goto done;
            }
            hist_add_floats(&hg, f, n);
            double ex[64];
            hist_expected(&hg, kind == 1 ? stats_cdf_uniform01 : stats_cdf_normal01, NULL, ex);
            int dof;
            double chi = hist_chi2(&hg, ex, &dof);
            snprintf(key, sizeof key, "chi2_%s", kname[kind]);
            json_object_set_new(so, key, json_real(chi));
            snprintf(key, sizeof key, "chi2_%s_dof", kname[kind]);
            json_object_set_new(so, key, json_integer(dof));
            char hname[96];
            snprintf(hname, sizeof hname, "%s %s", sd->name, kname[kind]);
            json_array_append_new(hists, hist_json(hname, kname[kind], &hg, ex));
            hist_free(&hg);
            if (kind == 2 && s == 0) memcpy(dv2, dv, n * sizeof *dv);
            if (kind == 2 && s == 1) {
                /* two streams' normals come from the same distribution */
                struct ks_result k2;
                rc = ks_two_sample(dv2, n, dv, n, &k2, e);
                if (rc) {
                    json_decref(so);
                    goto done;
                }
                json_t *t = json_object();
                json_object_set_new(t, "streams", json_string("init-t0 vs dropout-step7-l3 (normal)"));
                json_object_set_new(t, "d", json_real(k2.d));
                json_object_set_new(t, "p", json_real(k2.p));
                check_detail(r, "two_sample_ks", t);
                check_metric(r, "two_sample_ks_p", k2.p, "");
                if (k2.p < min_p) min_p = k2.p;
                if (k2.p < KS_FAIL_P) {
                    ks_fail++;
                    check_set_status(r, CHECK_FAIL, "two-sample KS between streams: D=%.3g p=%.3g", k2.d, k2.p);
                }
            }
        }
        json_array_append_new(sj, so);
    }

finish:
    if (ctx->run_dir) {
        char dir[4096], path[4200], rel[512];
        rc = check_artifact_dir(ctx, r, dir, sizeof dir, e);
        if (rc) goto done;
        json_t *hdoc = json_object();
        json_object_set(hdoc, "streams", hists);
        snprintf(path, sizeof path, "%s/histograms.json", dir);
        rc = jsonx_write_file(path, hdoc, e);
        json_decref(hdoc);
        if (rc) goto done;
        const char *base = dir + strlen(ctx->run_dir);
        while (*base == '/') base++;
        snprintf(rel, sizeof rel, "%s/histograms.json", base);
        check_artifact(r, rel);
        json_t *ddoc = json_object();
        json_object_set(ddoc, "streams", sj);
        snprintf(path, sizeof path, "%s/digests.json", dir);
        rc = jsonx_write_file(path, ddoc, e);
        json_decref(ddoc);
        if (rc) goto done;
        snprintf(rel, sizeof rel, "%s/digests.json", base);
        check_artifact(r, rel);
    }
    check_metric(r, "kat_failures", kat_fail, "count");
    check_metric(r, "streams", json_array_size(sj), "count");
    check_metric(r, "values_per_stream", (double)n, "count");
    check_metric(r, "min_ks_p", min_p, "");
    check_metric(r, "ks_failures", ks_fail, "count");
    check_metric(r, "split_draw_failures", split_fail, "count");
    if (cpu) check_metric(r, "streams_differing_from_cpu", mismatch, "count");
    check_threshold(r, "ks_min_p", KS_FAIL_P);
    check_detail(r, "kat", katj);
    katj = NULL;
    check_detail(r, "streams", sj);
    sj = NULL;
    {
        char sh[24];
        snprintf(sh, sizeof sh, "%llu", (unsigned long long)seed);
        check_detail(r, "seed", json_string(sh));
    }
    check_detail(r, "mapping", json_string("element i of (seed, purpose, a, b) = word i%4 of "
                                           "Philox4x32-10(ctr={blk, blk>>32&0xffff | purpose<<16, a, b}, "
                                           "key={seed, seed>>32}), blk=i/4; uniform (w>>8)*2^-24; "
                                           "normal: golden Box-Muller (core/philox.h)"));
    if (r->status == CHECK_PASS)
        check_set_status(r, CHECK_PASS, "known answers match; %d streams x %zu values: KS min p %.3g%s", NSTREAMS, n,
                         min_p, cpu ? "; digests equal to the cpu's" : "");
    check_end(r);
done:
    json_decref(katj);
    json_decref(sj);
    json_decref(hists);
    free(u);
    free(ucpu);
    free(tmp);
    free(dv);
    free(dv2);
    dev_close(d);
    if (cpu) dev_close(cpu);
    if (rc) check_free(r);
    return rc;
}
