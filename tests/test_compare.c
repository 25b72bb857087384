/* plumb compare's pieces on real files: the seeds.jsonl format and its errors,
 * seed bands of loss curves, pairing and digest rows of two run folders, the
 * ladder's attribution, the --plant parser. */
#include "accept/seed_runs.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "core/philox.h"
#include "report/compare.h"
#include "report/seeds.h"
#include "test.h"
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static const char *tpath(const char *name)
{
    static char buf[8][1024];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 1024, "%s/%s", test_tmpdir(), name);
    return p;
}

TEST(seeds_read_rejects_bad_lines_naming_them)
{
    struct { const char *text, *want; } bad[] = {
        {"{\"seed\": 1, \"auc\": 0.7}\n{\"seed\": 1, \"auc\": 0.71}\n", ":2: seed 1 appears twice"},
        {"{\"auc\": 0.7}\n", ":1: \"seed\" is missing"},
        {"{\"seed\": 1.5, \"auc\": 0.7}\n", ":1: \"seed\" is not an integer"},
        {"{\"seed\": 1, \"auc\": 0.7}\nnot json\n", ":2: not a JSON object"},
        {"{\"seed\": 1, \"auc\": 0.7, \"curve\": [[1, 0.6], [1, 0.5]]}\n", ":1: curve[1]: step 1 does not increase"},
        {"{\"seed\": 1, \"auc\": 0.7, \"curve\": [[1, 0.6, 3]]}\n", ":1: curve[0] is not a [step, loss] pair"},
        {"{\"seed\": 1, \"name\": \"x\"}\n", "no numeric metric fields"},
        {"\n\n", "no records"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *p = tpath("bad.jsonl");
        write_text(p, bad[i].text);
        struct seed_set s;
        plumb_err e = {0};
        CHECK_MSG(seeds_read(p, &s, &e) == PLUMB_EUSAGE, "case %zu accepted", i);
        CHECK_MSG(strstr(e.msg, bad[i].want) && strstr(e.msg, "bad.jsonl"), "case %zu: '%s' (want '%s')", i, e.msg,
                  bad[i].want);
    }
    struct seed_set s;
    plumb_err e = {0};
    CHECK(seeds_read(tpath("absent.jsonl"), &s, &e) == PLUMB_EUSAGE && strstr(e.msg, "absent.jsonl"));
    /* a good file: metrics in order, info and curve kept apart, blank lines skipped */
    const char *p = tpath("good.jsonl");
    write_text(p, "{\"seed\": 3, \"auc\": 0.75, \"logloss\": 0.48, \"note\": \"x\", \"info\": {\"samples_per_s\": 100}}\n\n"
                  "{\"seed\": 4, \"logloss\": 0.47, \"auc\": 0.76, \"info\": {\"samples_per_s\": 300}, \"curve\": [[1, null], [2, 0.5]]}\n");
    REQUIRE(seeds_read(p, &s, &e) == PLUMB_OK);
    CHECK(s.n == 2 && s.nmetric == 2 && !strcmp(s.metric[0], "auc") && !strcmp(s.metric[1], "logloss"));
    double v[2];
    CHECK(seeds_values(&s, "auc", v) == 2 && v[0] == 0.75 && v[1] == 0.76);
    CHECK_NEAR(seeds_info_mean(&s, "samples_per_s"), 200, 1e-12);
    seeds_free(&s);
}

TEST(seeds_curve_blocks_are_block_means)
{
    long st[7] = {1, 2, 3, 4, 5, 6, 7};
    double lo[7] = {1, 3, 5, NAN, 7, 2, 4};
    json_t *c = seeds_curve_blocks(st, lo, 7, 3); /* blocks of 3: {1,3,5}, {nan,7,2}, {4} */
    REQUIRE(json_array_size(c) == 3);
    CHECK(json_integer_value(json_array_get(json_array_get(c, 0), 0)) == 3);
    CHECK_NEAR(json_number_value(json_array_get(json_array_get(c, 0), 1)), 3.0, 1e-15);
    CHECK_NEAR(json_number_value(json_array_get(json_array_get(c, 1), 1)), 4.5, 1e-15);
    CHECK(json_integer_value(json_array_get(json_array_get(c, 2), 0)) == 7);
    json_decref(c);
}

/* n seeds of curves loss(step) = base + shift * (step >= from) + seed noise */
static void write_curves(const char *path, int seed0, int n, double auc, double shift, long from)
{
    FILE *f = fopen(path, "w");
    for (int s = 0; s < n; s++) {
        fprintf(f, "{\"seed\": %d, \"auc\": %.6f, \"curve\": [", seed0 + s, auc + 0.001 * (s - n / 2.0) / n);
        for (long st = 10; st <= 1000; st += 10) {
            double noise = 0.002 * philox_normal_at((uint64_t)(seed0 + s), RNG_STATS, 9, 0, (uint64_t)st);
            fprintf(f, "%s[%ld, %.6f]", st > 10 ? ", " : "", st, 0.5 + noise + (st >= from ? shift : 0));
        }
        fprintf(f, "]}\n");
    }
    fclose(f);
}

TEST(seeds_bands_separate_where_the_curves_do)
{
    struct seed_set a, b, c;
    plumb_err e = {0};
    write_curves(tpath("ca.jsonl"), 1, 5, 0.76, 0, 0);
    write_curves(tpath("cb.jsonl"), 6, 5, 0.76, 0.05, 600); /* 0.05 >> the 0.002 noise from step 600 */
    write_curves(tpath("cc.jsonl"), 11, 5, 0.76, 0, 0);
    REQUIRE(seeds_read(tpath("ca.jsonl"), &a, &e) == PLUMB_OK);
    REQUIRE(seeds_read(tpath("cb.jsonl"), &b, &e) == PLUMB_OK);
    REQUIRE(seeds_read(tpath("cc.jsonl"), &c, &e) == PLUMB_OK);
    struct curve_band cb;
    REQUIRE(seeds_curve_bands(&a, &b, &cb, &e) == PLUMB_OK);
    CHECK(cb.n == 100 && cb.seeds_a == 5 && cb.seeds_b == 5);
    CHECK_MSG(cb.separate_at == 600, "separate_at %ld", cb.separate_at);
    CHECK(cb.separated_points >= 41);
    curve_band_free(&cb);
    REQUIRE(seeds_curve_bands(&a, &c, &cb, &e) == PLUMB_OK);
    CHECK_MSG(cb.separate_at == -1, "same curves separate at %ld", cb.separate_at);
    curve_band_free(&cb);
    seeds_free(&a), seeds_free(&b), seeds_free(&c);
    /* curves of two points (a short run): disjoint at both is a separation
     * from the first, though fewer than 3 points in a row exist */
    FILE *f = fopen(tpath("sa.jsonl"), "w"), *g = fopen(tpath("sb.jsonl"), "w");
    REQUIRE(f && g);
    for (int s = 0; s < 3; s++) {
        fprintf(f, "{\"seed\": %d, \"auc\": 0.7, \"curve\": [[50, %.3f], [100, %.3f]]}\n", s + 1, 0.60 + 0.01 * s,
                0.50 + 0.01 * s);
        fprintf(g, "{\"seed\": %d, \"auc\": 0.7, \"curve\": [[50, %.3f], [100, %.3f]]}\n", s + 4, 0.70 + 0.01 * s,
                0.40 + 0.01 * s);
    }
    fclose(f), fclose(g);
    REQUIRE(seeds_read(tpath("sa.jsonl"), &a, &e) == PLUMB_OK);
    REQUIRE(seeds_read(tpath("sb.jsonl"), &b, &e) == PLUMB_OK);
    REQUIRE(seeds_curve_bands(&a, &b, &cb, &e) == PLUMB_OK);
    CHECK(cb.n == 2 && cb.separated_points == 2);
    CHECK_MSG(cb.separate_at == 50, "two disjoint points separate at %ld (want 50)", cb.separate_at);
    curve_band_free(&cb);
    seeds_free(&a), seeds_free(&b);
}

/* ---- two run folders ---- */

static const char *GOLDEN_OPS_A =
    "[{\"op\":\"gemm\",\"dtype\":\"fp32\",\"shape\":\"1x1x1\",\"digest\":\"aa\",\"norm_rel\":1e-8,\"criterion\":\"norm_rel\",\"threshold\":1e-5},"
    " {\"op\":\"gemm\",\"dtype\":\"fp32\",\"shape\":\"17x33x65\",\"digest\":\"bb\",\"norm_rel\":2e-7,\"criterion\":\"norm_rel\",\"threshold\":1e-5},"
    " {\"op\":\"softmax\",\"dtype\":\"fp32\",\"shape\":\"256x1000\",\"digest\":\"cc\",\"max_rel\":1e-7,\"criterion\":\"max_rel\",\"threshold\":1e-5}]";

/* A run folder with rng, numerics golden and a parity check on `device`. */
static void make_run(const char *dir, const char *device, const char *op2_digest, const char *seeds_src)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/checks/parity", dir);
    plumb_err e = {0};
    file_mkdirs(p, &e);
    char ops[2048];
    snprintf(ops, sizeof ops, "%s", GOLDEN_OPS_A);
    char *bb = strstr(ops, "\"bb\"");
    if (op2_digest) memcpy(bb + 1, op2_digest, 2);
    char doc[8192];
    snprintf(doc, sizeof doc,
             "{\"schema\":\"plumb.results/1\",\"command\":\"test\",\"started\":\"t0\",\"host\":{\"hostname\":\"h-%s\"},"
             "\"versions\":{},\"platform\":{\"devices\":[]},\"verdict\":\"pass\",\"checks\":["
             "{\"name\":\"doctor\",\"status\":\"pass\",\"metrics\":[],\"thresholds\":{},\"artifacts\":[],\"details\":{}},"
             "{\"name\":\"rng\",\"device\":\"%s\",\"status\":\"pass\",\"metrics\":[{\"name\":\"min_ks_p\",\"value\":0.3,\"unit\":\"\"}],"
             "\"thresholds\":{\"ks_min_p\":0.0001},\"artifacts\":[],\"details\":{\"streams\":[{\"name\":\"init\",\"digest_u32\":\"11\"}],"
             "\"kat\":[{\"vector\":\"zeros\",\"got\":\"6627e8d5\"}]}},"
             "{\"name\":\"numerics\",\"device\":\"%s\",\"status\":\"pass\",\"metrics\":[],\"thresholds\":{},\"artifacts\":[],"
             "\"details\":{\"numerics\":\"golden\",\"ops\":%s}},"
             "{\"name\":\"parity\",\"device\":\"%s\",\"status\":\"pass\",\"metrics\":[{\"name\":\"samples_per_s\",\"value\":%s,\"unit\":\"samples/s\"}],"
             "\"thresholds\":{},\"artifacts\":[\"checks/parity/seeds.jsonl\"],\"details\":{}}]}",
             device, device, device, ops, device, strcmp(device, "cpu") ? "90000" : "18000");
    snprintf(p, sizeof p, "%s/results.json", dir);
    write_text(p, doc);
    snprintf(p, sizeof p, "%s/checks/parity/seeds.jsonl", dir);
    char *text;
    size_t len;
    if (file_read_all(seeds_src, &text, &len, &e) == PLUMB_OK) {
        write_text(p, text);
        free(text);
    }
}

static json_t *read_doc(const char *dir)
{
    json_t *j = NULL;
    plumb_err e = {0};
    char p[1024];
    snprintf(p, sizeof p, "%s/results.json", dir);
    jsonx_read_file(p, &j, &e);
    return j;
}

static const json_t *parity_metric(const json_t *doc, const char *metric)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(json_array_get(json_object_get(doc, "parity"), 0), "metrics"), i, m)
        if (!strcmp(jsonx_str(m, "metric"), metric)) return m;
    return NULL;
}

TEST(compare_runs_pairs_digests_and_parity)
{
    write_curves(tpath("sa.jsonl"), 1, 5, 0.7600, 0, 0);
    write_curves(tpath("sb.jsonl"), 6, 5, 0.7600, 0, 0);
    write_curves(tpath("sc.jsonl"), 6, 5, 0.7500, 0.05, 600); /* a planted gap: AUC 0.01 lower */
    const char *A = tpath("runA"), *B = tpath("runB"), *C = tpath("runC"), *D = tpath("runD");
    make_run(A, "cuda:0", NULL, tpath("sa.jsonl"));
    make_run(B, "cpu", NULL, tpath("sb.jsonl"));
    make_run(C, "cpu", NULL, tpath("sc.jsonl"));
    make_run(D, "cpu", "ff", tpath("sb.jsonl")); /* the second golden op differs */
    json_t *a = read_doc(A), *b = read_doc(B), *c = read_doc(C), *d = read_doc(D);
    REQUIRE(a && b && c && d);
    struct compare_opts o;
    compare_opts_defaults(&o);
    json_t *doc = NULL;
    plumb_err e = {0};
    /* one device a side: cuda:0 pairs with cpu */
    REQUIRE(compare_runs(a, A, b, B, &o, &doc, &e) == PLUMB_OK);
    CHECK(json_array_size(json_object_get(doc, "pairs")) == 4 && json_array_size(json_object_get(doc, "unmatched")) == 0);
    size_t nd = json_array_size(json_object_get(doc, "digests"));
    CHECK_MSG(nd == 5, "%zu digest rows (1 stream u32, 1 known answer, 3 golden ops)", nd);
    CHECK(json_is_null(json_object_get(doc, "digest_fault")));
    const json_t *m = parity_metric(doc, "auc");
    REQUIRE(m);
    CHECK(json_integer_value(json_object_get(m, "n_a")) == 5 && json_integer_value(json_object_get(m, "n_b")) == 5);
    CHECK_NEAR(jsonx_num(m, "diff"), 0, 1e-9); /* the same AUCs, other seeds */
    CHECK(!strcmp(jsonx_str(m, "verdict"), "equivalent"));
    CHECK(!strcmp(jsonx_str(doc, "verdict"), "equivalent") && jsonx_num(doc, "exit_code") == 0);
    /* throughput row from the rate metric */
    const json_t *t = json_array_get(json_object_get(doc, "throughput"), 0);
    CHECK(t && jsonx_num(t, "a") == 90000 && jsonx_num(t, "b") == 18000);
    /* side by side: delta and ratio */
    const json_t *pm = json_array_get(json_object_get(json_array_get(json_object_get(doc, "pairs"), 3), "metrics"), 0);
    CHECK(pm && jsonx_num(pm, "delta") == 18000 - 90000 && fabs(jsonx_num(pm, "ratio") - 0.2) < 1e-15);
    json_decref(doc);

    /* the planted gap: different, the curves part at step 600 */
    REQUIRE(compare_runs(b, B, c, C, &o, &doc, &e) == PLUMB_OK);
    m = parity_metric(doc, "auc");
    CHECK(m && !strcmp(jsonx_str(m, "verdict"), "different"));
    CHECK_NEAR(jsonx_num(m, "diff"), -0.01, 1e-6);
    const json_t *cv = json_object_get(json_array_get(json_object_get(doc, "parity"), 0), "curves");
    CHECK(cv && json_integer_value(json_object_get(cv, "separate_at")) == 600);
    CHECK(!strcmp(jsonx_str(doc, "verdict"), "different") && jsonx_num(doc, "exit_code") == 1);
    json_decref(doc);

    /* a golden op differs: the first one is named, as a fault */
    REQUIRE(compare_runs(b, B, d, D, &o, &doc, &e) == PLUMB_OK);
    const json_t *f = json_object_get(doc, "digest_fault");
    REQUIRE(json_is_object(f));
    CHECK(!strcmp(jsonx_str(f, "kind"), "numerics-golden") && !strcmp(jsonx_str(f, "item"), "gemm fp32 17x33x65"));
    CHECK(strstr(jsonx_str(f, "message"), "hardware or driver fault") != NULL);
    CHECK(!strcmp(jsonx_str(doc, "verdict"), "different") && jsonx_num(doc, "exit_code") == 1);
    json_decref(doc);

    /* --a / --b that name no device of the folder: bad input naming it */
    o.dev_a = "hip:3";
    CHECK(compare_runs(a, A, b, B, &o, &doc, &e) == PLUMB_EUSAGE && strstr(e.msg, "hip:3"));
    o.dev_a = NULL;
    /* a seeds artifact that is not there: bad input naming the file */
    char p[1024];
    snprintf(p, sizeof p, "%s/checks/parity/seeds.jsonl", B);
    remove(p);
    CHECK(compare_runs(a, A, b, B, &o, &doc, &e) == PLUMB_EUSAGE && strstr(e.msg, "seeds.jsonl"));
    json_decref(a), json_decref(b), json_decref(c), json_decref(d);
}

/* Found by tests/fuzz/fuzz_results_json.c: a results.json with no
 * platform.devices (a minimal document, or one another tool wrote) leaked
 * the empty list compare put in its place: it held two references, one of
 * them nobody's. The side's "devices" must be owned by the document alone
 * (refcount 1), and under make asan nothing may leak. */
TEST(compare_runs_side_without_devices_owns_its_list)
{
    const char *A = tpath("run_nodev");
    mkdir(A, 0755);
    write_text(tpath("run_nodev/results.json"), "{\"schema\":\"plumb.results/1\",\"checks\":[]}");
    json_t *a = read_doc(A);
    REQUIRE(a);
    struct compare_opts o;
    compare_opts_defaults(&o);
    json_t *doc = NULL;
    plumb_err e = {0};
    REQUIRE(compare_runs(a, A, a, A, &o, &doc, &e) == PLUMB_OK);
    const json_t *devs = json_object_get(json_object_get(doc, "a"), "devices");
    CHECK(json_is_array(devs) && json_array_size(devs) == 0);
    CHECK_MSG(devs && devs->refcount == 1, "devices list has %zu references, expected 1 (the document's)",
              devs ? devs->refcount : 0);
    json_decref(doc);
    json_decref(a);
}

TEST(compare_margin_spec)
{
    double m;
    char t[128];
    plumb_err e = {0};
    CHECK(compare_margin_for("0.15%", "auc", 0.8, &m, t, sizeof t, &e) == PLUMB_OK && fabs(m - 0.0012) < 1e-15);
    CHECK(compare_margin_for("auc=0.001,0.5%", "auc", 0.8, &m, t, sizeof t, &e) == PLUMB_OK && m == 0.001);
    CHECK(compare_margin_for("auc=0.001,0.5%", "logloss", 0.4, &m, t, sizeof t, &e) == PLUMB_OK && fabs(m - 0.002) < 1e-15);
    CHECK(compare_margin_for("auc=0.001", "logloss", 0.4, &m, t, sizeof t, &e) == PLUMB_OK && fabs(m - 0.0006) < 1e-15);
    CHECK(compare_margin_for("auc=x", "auc", 0.4, &m, t, sizeof t, &e) == PLUMB_EUSAGE && strstr(e.msg, "'x'"));
}

/* ---- the ladder ---- */

static void write_rung(const char *dir, int rung, const char *name, int seed0, double auc, const char *digest_tag)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/checks/ladder/rung%d-%s.seeds.jsonl", dir, rung, name);
    FILE *f = fopen(p, "w");
    for (int s = 0; s < 5; s++)
        fprintf(f, "{\"seed\": %d, \"auc\": %.6f, \"info\": {\"param_digest\": \"%s-%d\"}}\n", seed0 + s,
                auc + 0.0008 * philox_normal_at((uint64_t)(seed0 + s), RNG_STATS, (uint32_t)rung, 7, 0), digest_tag, s);
    fclose(f);
}

static json_t *ladder_check(const char *dir, const char *device, int rung3_same)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/checks/ladder", dir);
    plumb_err e = {0};
    file_mkdirs(p, &e);
    json_t *rungs = json_array();
    static const char *names[5] = {"golden", "fast-strict", "fast-vendor", "bf16-amp", "fp16-amp"};
    for (int r = 1; r <= 5; r++) {
        json_t *row = json_pack("{s:i, s:s, s:s}", "rung", r, "name", names[r - 1], "turns_on", names[r - 1]);
        if (r == 3 && rung3_same) {
            json_object_set_new(row, "same_as", json_integer(2));
            json_object_set_new(row, "note", json_string("same setting on the cpu"));
        } else {
            snprintf(p, sizeof p, "checks/ladder/rung%d-%s.seeds.jsonl", r, names[r - 1]);
            json_object_set_new(row, "seeds", json_string(p));
        }
        json_array_append_new(rungs, row);
    }
    return json_pack("{s:s, s:s, s:s, s:{s:s, s:o}}", "name", "ladder", "device", device, "status", "pass", "details",
                     "metric", "auc", "rungs", rungs);
}

TEST(compare_ladder_finds_the_planted_rung)
{
    const char *A = tpath("ladA"), *B = tpath("ladB");
    json_t *la = ladder_check(A, "cpu", 1), *lb = ladder_check(B, "cpu", 1);
    /* A: no rung moves the metric; B: the same up to rung 3, 0.004 (5 sd) lower from rung 4 on */
    static const char *names[5] = {"golden", "fast-strict", "fast-vendor", "bf16-amp", "fp16-amp"};
    for (int r = 1; r <= 5; r++) {
        if (r == 3) continue;
        write_rung(A, r, names[r - 1], 1, 0.760, r == 1 ? "g" : "f");
        write_rung(B, r, names[r - 1], 1, r >= 4 ? 0.756 : 0.760, r == 1 ? "g" : "fb");
    }
    struct compare_opts o;
    compare_opts_defaults(&o);
    json_t *lad = NULL;
    plumb_err e = {0};
    REQUIRE(compare_ladder(la, A, lb, B, &o, &lad, &e) == PLUMB_OK);
    CHECK_MSG(json_integer_value(json_object_get(lad, "parts_at_rung")) == 4, "parts at %s",
              jsonx_str(lad, "text"));
    CHECK(strstr(jsonx_str(lad, "text"), "agree through rung 3 and part at rung 4 (bf16-amp)") != NULL);
    const json_t *r1 = json_array_get(json_object_get(lad, "rungs"), 0), *r3 = json_array_get(json_object_get(lad, "rungs"), 2);
    CHECK(json_is_true(json_object_get(r1, "golden_equal")));
    CHECK(json_array_size(json_object_get(lad, "digest_rows")) == 5);
    /* the cpu's rung 3 is rung 2's runs: zero shift, said so */
    CHECK(jsonx_num(json_object_get(r3, "shift_a"), "diff") == 0 && strstr(jsonx_str(json_object_get(r3, "shift_a"), "note"), "same runs"));
    CHECK(jsonx_num(json_object_get(r3, "a"), "mean") == jsonx_num(json_object_get(json_array_get(json_object_get(lad, "rungs"), 1), "a"), "mean"));
    /* B's own ladder: the shift at rung 4 is the largest significant one */
    const json_t *r4 = json_array_get(json_object_get(lad, "rungs"), 3);
    CHECK(json_is_true(json_object_get(json_object_get(r4, "shift_b"), "significant")));
    CHECK(jsonx_num(json_object_get(r4, "shift_b"), "sd_units") < -3);
    /* each rung side's n, mean, sample sd and t-interval, from the values written (write_rung) */
    for (int r = 1; r <= 5; r++) {
        const json_t *rr = json_array_get(json_object_get(lad, "rungs"), (size_t)r - 1);
        const int src = r == 3 ? 2 : r; /* the cpu's rung 3 is rung 2's runs */
        for (int side = 0; side < 2; side++) {
            const json_t *x = json_object_get(rr, side ? "b" : "a");
            const double base = side && src >= 4 ? 0.756 : 0.760;
            double v[5], m = 0, q = 0;
            for (int k = 0; k < 5; k++) {
                char buf[32]; /* the %.6f the file holds */
                snprintf(buf, sizeof buf, "%.6f", base + 0.0008 * philox_normal_at((uint64_t)(1 + k), RNG_STATS, (uint32_t)src, 7, 0));
                v[k] = atof(buf), m += v[k];
            }
            m /= 5;
            for (int k = 0; k < 5; k++) q += (v[k] - m) * (v[k] - m);
            const double sd = sqrt(q / 4), half = 2.7764451051977987 * sd / sqrt(5.0); /* t(0.975, 4) */
            const json_t *ci = json_object_get(x, "ci95");
            CHECK_MSG(jsonx_num(x, "n") == 5 && fabs(jsonx_num(x, "mean") - m) < 1e-12 && fabs(jsonx_num(x, "std") - sd) < 1e-12 &&
                          fabs(json_number_value(json_array_get(ci, 0)) - (m - half)) < 1e-9 &&
                          fabs(json_number_value(json_array_get(ci, 1)) - (m + half)) < 1e-9,
                      "rung %d side %c: n %g mean %.9g std %.9g (want %.9g, %.9g)", r, side ? 'b' : 'a', jsonx_num(x, "n"),
                      jsonx_num(x, "mean"), jsonx_num(x, "std"), m, sd);
        }
    }
    json_decref(lad);
    /* one side alone: the rung-to-rung shifts name rung 4 */
    REQUIRE(compare_ladder(lb, B, NULL, NULL, &o, &lad, &e) == PLUMB_OK);
    CHECK(json_integer_value(json_object_get(json_object_get(lad, "largest_shift_a"), "rung")) == 4);
    json_decref(lad);
    /* golden digests differ at one seed: the ladder parts at rung 1, a fault */
    write_rung(B, 1, "golden", 1, 0.760, "G");
    REQUIRE(compare_ladder(la, A, lb, B, &o, &lad, &e) == PLUMB_OK);
    CHECK(json_integer_value(json_object_get(lad, "parts_at_rung")) == 1);
    CHECK(strstr(jsonx_str(lad, "text"), "hardware or driver fault") != NULL);
    json_t *fault = compare_digest_fault(json_object_get(lad, "digest_rows"));
    CHECK(fault && !strcmp(jsonx_str(fault, "kind"), "ladder-golden"));
    json_decref(fault);
    json_decref(lad);
    json_decref(la), json_decref(lb);
}

TEST(plant_spec_parse)
{
    struct plant p;
    plumb_err e = {0};
    REQUIRE(plant_parse("lr=3@4", &p, &e) == PLUMB_OK);
    CHECK(p.active && p.lr_scale == 3 && p.from_rung == 4 && !p.set_precision);
    struct seed_run_cfg c;
    seed_run_cfg_defaults(&c, "cpu", 1);
    plant_apply(&p, 3, &c);
    CHECK(c.lr_scale == 1);
    plant_apply(&p, 4, &c);
    CHECK(c.lr_scale == 3);
    REQUIRE(plant_parse("precision=bf16,lr=0.7", &p, &e) == PLUMB_OK);
    CHECK(p.set_precision && p.precision == DT_BF16 && p.lr_scale == 0.7 && p.from_rung == 0);
    CHECK(plant_parse("lr=-1", &p, &e) == PLUMB_EUSAGE && strstr(e.msg, "lr=-1"));
    CHECK(plant_parse("precision=fp8", &p, &e) == PLUMB_EUSAGE);
    CHECK(plant_parse("lr=2@0", &p, &e) == PLUMB_EUSAGE);
    CHECK(plant_parse("depth=3", &p, &e) == PLUMB_EUSAGE && strstr(e.msg, "depth"));
    REQUIRE(plant_parse(NULL, &p, &e) == PLUMB_OK);
    CHECK(!p.active);
}

/* ---- records that say which metric decides, which way is better, and the margin ---- */

/* n seeds of a lower-is-better val_loss around `loss` and an accuracy, listed
 * first so that the records' "primary" (not the first shared metric) decides. */
static void write_loss_seeds(const char *path, int seed0, int n, double loss, int facts)
{
    FILE *f = fopen(path, "w");
    for (int s = 0; s < n; s++) {
        double z = philox_normal_at((uint64_t)(seed0 + s), RNG_STATS, 11, 0, 0);
        fprintf(f, "{\"seed\": %d, \"accuracy\": %.6f, \"val_loss\": %.6f", seed0 + s, 0.4 + 0.001 * z,
                loss + 0.002 * z);
        if (facts)
            fprintf(f, ", \"primary\": \"val_loss\", \"better\": {\"val_loss\": \"lower\", \"accuracy\": \"higher\"}, "
                       "\"margin\": \"val_loss=0.5%%,1%%\"");
        fprintf(f, "}\n");
    }
    fclose(f);
}

TEST(seeds_records_carry_primary_direction_and_margin)
{
    struct seed_set s;
    plumb_err e = {0};
    const char *p = tpath("facts.jsonl");
    write_loss_seeds(p, 1, 3, 2.0, 1);
    REQUIRE(seeds_read(p, &s, &e) == PLUMB_OK);
    CHECK(s.nmetric == 2 && !strcmp(s.metric[0], "accuracy")); /* the facts are not metrics */
    CHECK_STREQ(s.primary, "val_loss");
    CHECK_STREQ(s.margin, "val_loss=0.5%,1%");
    CHECK(seeds_better(&s, "val_loss") == -1 && seeds_better(&s, "accuracy") == 1 && seeds_better(&s, "nope") == 0);
    seeds_free(&s);
    struct { const char *text, *want; } bad[] = {
        {"{\"seed\": 1, \"auc\": 0.7, \"primary\": \"loss\"}\n", ":1: \"primary\" names \"loss\", which is not a numeric field"},
        {"{\"seed\": 1, \"auc\": 0.7, \"primary\": 3}\n", ":1: \"primary\" is not a metric name"},
        {"{\"seed\": 1, \"auc\": 0.7, \"loss\": 1, \"primary\": \"auc\"}\n{\"seed\": 2, \"auc\": 0.7, \"loss\": 1, \"primary\": \"loss\"}\n",
         ":2: \"primary\" is \"loss\", earlier lines say \"auc\""},
        {"{\"seed\": 1, \"auc\": 0.7, \"better\": {\"auc\": \"up\"}}\n", ":1: better.auc is not \"higher\" or \"lower\""},
        {"{\"seed\": 1, \"auc\": 0.7, \"better\": \"higher\"}\n", ":1: \"better\" is not an object"},
        {"{\"seed\": 1, \"auc\": 0.7, \"better\": {\"auc\": \"higher\"}}\n{\"seed\": 2, \"auc\": 0.7, \"better\": {\"auc\": \"lower\"}}\n",
         ":2: better.auc is \"lower\", earlier lines say \"higher\""},
        {"{\"seed\": 1, \"auc\": 0.7, \"margin\": \"1%\"}\n{\"seed\": 2, \"auc\": 0.7, \"margin\": \"2%\"}\n",
         ":2: \"margin\" is \"2%\", earlier lines say \"1%\""},
        {"{\"seed\": 1, \"auc\": 0.7, \"margin\": 0.01}\n", ":1: \"margin\" is not a margin text"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_text(p, bad[i].text);
        CHECK_MSG(seeds_read(p, &s, &e) == PLUMB_EUSAGE, "case %zu accepted", i);
        CHECK_MSG(strstr(e.msg, bad[i].want) && strstr(e.msg, "facts.jsonl"), "case %zu: '%s' (want '%s')", i, e.msg,
                  bad[i].want);
    }
}

TEST(compare_takes_primary_margin_and_direction_from_records)
{
    /* B's val_loss 0.05 (25 seed sd) higher: different, and B is the worse side since lower is better */
    write_loss_seeds(tpath("la.jsonl"), 1, 5, 2.00, 1);
    write_loss_seeds(tpath("lb.jsonl"), 6, 5, 2.05, 1);
    struct compare_opts o;
    compare_opts_defaults(&o);
    json_t *doc = NULL;
    plumb_err e = {0};
    REQUIRE(compare_metric_files(tpath("la.jsonl"), tpath("lb.jsonl"), &o, &doc, &e) == PLUMB_OK);
    const json_t *g = json_array_get(json_object_get(doc, "parity"), 0);
    CHECK_STREQ(jsonx_str(g, "primary"), "val_loss");
    CHECK_STREQ(jsonx_str(g, "primary_from"), "A's records");
    const json_t *m = parity_metric(doc, "val_loss");
    REQUIRE(m);
    CHECK(!strcmp(jsonx_str(m, "verdict"), "different") && json_is_true(json_object_get(m, "primary")));
    CHECK_STREQ(jsonx_str(m, "better"), "lower");
    CHECK_STREQ(jsonx_str(m, "b_vs_a"), "worse");
    /* the records' margin: val_loss 0.5% of A's mean, the others 1% */
    CHECK_NEAR(jsonx_num(json_object_get(m, "margin"), "abs"), 0.005 * jsonx_num(m, "mean_a"), 1e-12);
    CHECK_STREQ(jsonx_str(json_object_get(m, "margin"), "from"), "A's records");
    const json_t *acc = parity_metric(doc, "accuracy");
    CHECK(acc && fabs(jsonx_num(json_object_get(acc, "margin"), "abs") - 0.01 * jsonx_num(acc, "mean_a")) < 1e-12);
    CHECK(strstr(jsonx_str(doc, "summary"), "B worse: lower is better") != NULL);
    CHECK(!strcmp(jsonx_str(doc, "verdict"), "different") && jsonx_num(doc, "exit_code") == 1);
    json_decref(doc);
    /* the other way round B is the better side; the verdict stays two-sided */
    REQUIRE(compare_metric_files(tpath("lb.jsonl"), tpath("la.jsonl"), &o, &doc, &e) == PLUMB_OK);
    m = parity_metric(doc, "val_loss");
    CHECK(m && !strcmp(jsonx_str(m, "b_vs_a"), "better") && !strcmp(jsonx_str(m, "verdict"), "different"));
    json_decref(doc);
    /* --metric and --margin win over the records */
    o.metric = "accuracy";
    o.margin = "0.002";
    REQUIRE(compare_metric_files(tpath("la.jsonl"), tpath("lb.jsonl"), &o, &doc, &e) == PLUMB_OK);
    g = json_array_get(json_object_get(doc, "parity"), 0);
    CHECK_STREQ(jsonx_str(g, "primary"), "accuracy");
    m = parity_metric(doc, "val_loss");
    CHECK(m && jsonx_num(json_object_get(m, "margin"), "abs") == 0.002);
    CHECK_STREQ(jsonx_str(json_object_get(m, "margin"), "from"), "--margin");
    json_decref(doc);
    /* records without the facts: as before, the first shared metric decides at 0.15%, no direction claimed */
    compare_opts_defaults(&o);
    write_loss_seeds(tpath("na.jsonl"), 1, 5, 2.00, 0);
    write_loss_seeds(tpath("nb.jsonl"), 6, 5, 2.05, 0);
    REQUIRE(compare_metric_files(tpath("na.jsonl"), tpath("nb.jsonl"), &o, &doc, &e) == PLUMB_OK);
    g = json_array_get(json_object_get(doc, "parity"), 0);
    CHECK_STREQ(jsonx_str(g, "primary"), "accuracy");
    m = parity_metric(doc, "val_loss");
    CHECK(m && json_is_null(json_object_get(m, "better")) && !json_object_get(m, "b_vs_a"));
    CHECK_NEAR(jsonx_num(json_object_get(m, "margin"), "abs"), 0.0015 * jsonx_num(m, "mean_a"), 1e-12);
    json_decref(doc);
    /* a bad margin in the records is bad input naming it */
    write_text(tpath("bm.jsonl"), "{\"seed\": 1, \"auc\": 0.7, \"margin\": \"lots\"}\n{\"seed\": 2, \"auc\": 0.71, \"margin\": \"lots\"}\n");
    CHECK(compare_metric_files(tpath("bm.jsonl"), tpath("bm.jsonl"), &o, &doc, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "'lots'") && strstr(e.msg, "A's records"), "%s", e.msg);
}

/* A ladder of a lower-is-better metric: from rung 4 on B's val_loss rises (worse). */
static void write_loss_rung(const char *dir, int rung, const char *name, double loss, const char *tag)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/checks/ladder-lm/rung%d-%s.seeds.jsonl", dir, rung, name);
    FILE *f = fopen(p, "w");
    for (int s = 0; s < 5; s++)
        fprintf(f, "{\"seed\": %d, \"val_loss\": %.6f, \"primary\": \"val_loss\", \"better\": {\"val_loss\": \"lower\"}, "
                   "\"info\": {\"param_digest\": \"%s-%d\"}}\n",
                1 + s, loss + 0.002 * philox_normal_at((uint64_t)(1 + s), RNG_STATS, (uint32_t)rung, 5, 0), tag, s);
    fclose(f);
}

TEST(compare_ladder_of_a_loss_says_which_way_is_worse)
{
    const char *A = tpath("lladA"), *B = tpath("lladB");
    static const char *names[3] = {"golden", "fast-strict", "bf16-amp"};
    static const int nums[3] = {1, 2, 4};
    json_t *ck[2];
    for (int side = 0; side < 2; side++) {
        const char *dir = side ? B : A;
        char p[1024];
        snprintf(p, sizeof p, "%s/checks/ladder-lm", dir);
        plumb_err e = {0};
        file_mkdirs(p, &e);
        json_t *rungs = json_array();
        for (int r = 0; r < 3; r++) {
            snprintf(p, sizeof p, "checks/ladder-lm/rung%d-%s.seeds.jsonl", nums[r], names[r]);
            json_array_append_new(rungs, json_pack("{s:i, s:s, s:s, s:s}", "rung", nums[r], "name", names[r], "turns_on",
                                                   names[r], "seeds", p));
            write_loss_rung(dir, nums[r], names[r], side && r == 2 ? 2.02 : 2.0, r == 0 ? "g" : side ? "fb" : "fa");
        }
        /* rung 5: the workload lacks fp16, recorded as not run */
        json_array_append_new(rungs, json_pack("{s:i, s:s, s:s, s:s, s:b}", "rung", 5, "name", "fp16-amp", "turns_on",
                                               "fp16", "skipped", "not run: lm trains in fp32,bf16 only", "run", 0));
        ck[side] = json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:s, s:o}}", "name", "ladder-lm", "device", "cpu", "status",
                             "pass", "details", "workload", "lm", "metric", "val_loss", "better", "lower", "rungs", rungs);
    }
    struct compare_opts o;
    compare_opts_defaults(&o);
    json_t *lad = NULL;
    plumb_err e = {0};
    REQUIRE(compare_ladder(ck[0], A, ck[1], B, &o, &lad, &e) == PLUMB_OK);
    CHECK(json_array_size(json_object_get(lad, "rungs")) == 3); /* the skipped rung has no row ... */
    const json_t *sk = json_array_get(json_object_get(lad, "skipped"), 0);
    CHECK(sk && jsonx_num(sk, "rung") == 5 && strstr(jsonx_str(sk, "why"), "not run")); /* ... but is listed */
    CHECK_STREQ(jsonx_str(lad, "better"), "lower");
    CHECK_STREQ(jsonx_str(lad, "workload"), "lm");
    CHECK_MSG(json_integer_value(json_object_get(lad, "parts_at_rung")) == 4, "%s", jsonx_str(lad, "text"));
    CHECK_MSG(strstr(jsonx_str(lad, "text"), "there B is worse (val_loss lower is better)") != NULL, "%s",
              jsonx_str(lad, "text"));
    json_decref(lad);
    /* B alone: the largest shift (rung 4, val_loss up) is worse */
    REQUIRE(compare_ladder(ck[1], B, NULL, NULL, &o, &lad, &e) == PLUMB_OK);
    const json_t *ls = json_object_get(lad, "largest_shift_a");
    CHECK(ls && jsonx_num(ls, "rung") == 4 && jsonx_num(ls, "sd_units") > 3);
    CHECK_STREQ(jsonx_str(ls, "effect"), "worse");
    CHECK(strstr(jsonx_str(lad, "text"), "(worse: lower is better)") != NULL);
    json_decref(lad);
    json_decref(ck[0]), json_decref(ck[1]);
}
