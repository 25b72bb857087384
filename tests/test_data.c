/* train/criteo.c, train/synth.c, train/data.c: the real format with its
 * awkward lines, gzip, the teacher's calibration, TSV round trip. */
#include "test.h"
#include "core/file.h"
#include "models/ctr/criteo.h"
#include "models/ctr/data.h"
#include "models/ctr/eval.h"
#include "models/ctr/synth.h"
#include <stdlib.h>
#include <zlib.h>

static const char *toks26 = "\t68fd1e64\t80e26c9b\tfb936136\t7b4723c4\t25c83c98\t7e0ccccf\tde7995b8\t1f89b562\t"
                            "a73ee510\ta8cd5504\tb2cb9c98\t37c9c164\t2824a5f6\t1adce6ef\t8ba8b39a\t891b62e7\t"
                            "e5ba7672\tf54016b9\t21ddcdc9\tb1252a9d\t07b5194c\t\t3a171ecb\tc5c50484\te8b83407\t9727dd16";

static void write_text(const char *path, const char *s)
{
    plumb_err e = {0};
    if (file_write_atomic(path, s, strlen(s), &e)) fprintf(stderr, "%s\n", e.msg);
}

static int read_file_samples(const char *path, enum criteo_bad bad, struct criteo_sample *out, int max,
                             int *n, long *skipped, long *trunc, plumb_err *e)
{
    struct criteo_reader *r;
    int rc = criteo_open(path, bad, &r, e);
    if (rc) return rc;
    *n = 0;
    for (;;) {
        int got;
        struct criteo_sample s;
        if ((rc = criteo_next(r, &s, &got, e))) break;
        if (!got) break;
        if (*n < max) out[*n] = s;
        (*n)++;
    }
    if (skipped) *skipped = criteo_skipped(r);
    if (trunc) *trunc = criteo_truncated(r);
    criteo_close(r);
    return rc;
}

TEST(data_criteo_fields_empty_crlf_truncated)
{
    char path[512], text[4096];
    plumb_err e = {0};
    REQUIRE(!file_join(path, sizeof path, test_tmpdir(), "crit.tsv", &e));
    /* line 1: all integers present; line 2: empty integers and an empty token,
     * CRLF; line 3: negative integer; line 4: truncated (no newline, 5 fields) */
    snprintf(text, sizeof text,
             "0\t1\t1\t5\t0\t1382\t4\t15\t2\t181\t1\t2\t\t2%s\n"
             "1\t\t0\t\t\t\t\t\t\t\t\t\t\t%s\r\n"
             "0\t-1\t7\t1\t1\t1\t1\t1\t1\t1\t1\t1\t1\t1%s\n"
             "1\t2\t3\t4\t5",
             toks26, toks26, toks26);
    write_text(path, text);
    struct criteo_sample s[8];
    int n;
    long skipped, trunc;
    REQUIRE(read_file_samples(path, CRITEO_BAD_ERROR, s, 8, &n, &skipped, &trunc, &e) == 0);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(trunc, 1);
    CHECK_EQ_INT(skipped, 0);
    CHECK(s[0].label == 0.0f && s[1].label == 1.0f);
    CHECK_NEAR(s[0].dense[0], log(2.0), 1e-6);
    CHECK_NEAR(s[0].dense[4], log(1383.0), 1e-6);
    CHECK(s[0].dense[3] == 0.0f); /* x = 0 */
    CHECK(s[0].dense[11] == 0.0f); /* empty */
    CHECK_NEAR(s[0].dense[12], log(3.0), 1e-6);
    for (int i = 0; i < 13; i++)
        if (i != 1) CHECK(s[1].dense[i] == 0.0f);
    CHECK(s[2].dense[0] == 0.0f); /* -1 -> max(x,0) = 0 */
    /* CRLF does not change the last token's hash */
    CHECK_EQ_INT(s[1].cat[25], criteo_hash(25, "9727dd16", 8));
    CHECK_EQ_INT(s[0].cat[25], s[1].cat[25]);
    /* the empty token (C22) hashes to the field's missing row */
    CHECK_EQ_INT(s[0].cat[21], criteo_hash(21, "", 0));
    /* the field index is part of the hash */
    CHECK(criteo_hash(0, "68fd1e64", 8) != criteo_hash(1, "68fd1e64", 8));
}

TEST(data_criteo_bad_field_names_line_and_field)
{
    char path[512], text[4096];
    plumb_err e = {0};
    REQUIRE(!file_join(path, sizeof path, test_tmpdir(), "bad.tsv", &e));
    snprintf(text, sizeof text, "0\t1\t1\t5\t0\t1382\t4\t15\t2\t181\t1\t2\t\t2%s\n"
                                "1\t3\t1\tx7\t0\t1\t4\t15\t2\t181\t1\t2\t\t2%s\n"
                                "1\t3\t1%s\n"
                                "0\t1\t1\t5\t0\t1382\t4\t15\t2\t181\t1\t2\t\t2%s\n",
             toks26, toks26, toks26, toks26);
    write_text(path, text);
    struct criteo_sample s[8];
    int n;
    int rc = read_file_samples(path, CRITEO_BAD_ERROR, s, 8, &n, NULL, NULL, &e);
    CHECK_EQ_INT(rc, PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "bad.tsv") && strstr(e.msg, "line 2") && strstr(e.msg, "I3") && strstr(e.msg, "'x7'"),
              "%s", e.msg);
    long skipped;
    err_clear(&e);
    REQUIRE(read_file_samples(path, CRITEO_BAD_SKIP, s, 8, &n, &skipped, NULL, &e) == 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(skipped, 2);
    /* a bad label */
    write_text(path, "2\t1\n");
    rc = read_file_samples(path, CRITEO_BAD_ERROR, s, 8, &n, NULL, NULL, &e);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "line 1") && strstr(e.msg, "label"), "%s", e.msg);
    /* a missing file */
    rc = read_file_samples("/nonexistent/x.tsv", CRITEO_BAD_ERROR, s, 8, &n, NULL, NULL, &e);
    CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, "/nonexistent/x.tsv"), "%s", e.msg);
}

TEST(data_criteo_gzip_equals_plain)
{
    char plain[512], gzp[512];
    plumb_err e = {0};
    REQUIRE(!file_join(plain, sizeof plain, test_tmpdir(), "p.tsv", &e));
    REQUIRE(!file_join(gzp, sizeof gzp, test_tmpdir(), "p.tsv.gz", &e));
    /* enough lines to cross the reader's 1 MiB buffer */
    FILE *f = fopen(plain, "w");
    gzFile g = gzopen(gzp, "wb");
    REQUIRE(f && g);
    struct synth *sy;
    REQUIRE(synth_create(7, &sy, &e) == 0);
    char line[1024];
    const int N = 9000;
    for (int i = 0; i < N; i++) {
        struct synth_raw r;
        synth_raw_sample(sy, 0, (uint64_t)i, &r);
        const char *tk[26];
        for (int t = 0; t < 26; t++) tk[t] = r.token[t];
        int len = criteo_format_line(line, sizeof line, r.label, r.dense, r.missing, tk);
        REQUIRE(len > 0);
        fwrite(line, 1, (size_t)len, f);
        gzwrite(g, line, (unsigned)len);
    }
    fclose(f);
    gzclose(g);
    static struct criteo_sample a[9000], b[9000];
    int na, nb;
    REQUIRE(read_file_samples(plain, CRITEO_BAD_ERROR, a, N, &na, NULL, NULL, &e) == 0);
    REQUIRE(read_file_samples(gzp, CRITEO_BAD_ERROR, b, N, &nb, NULL, NULL, &e) == 0);
    CHECK_EQ_INT(na, N);
    CHECK_EQ_INT(nb, N);
    CHECK(!memcmp(a, b, sizeof a));
    /* the file holds exactly what the generator produces in memory */
    int same = 1;
    for (int i = 0; i < N; i++) {
        struct criteo_sample s;
        synth_sample(sy, 0, (uint64_t)i, &s, NULL);
        same &= !memcmp(&s, &a[i], sizeof s);
    }
    CHECK(same);
    synth_free(sy);
}

TEST(data_synth_teacher_calibration)
{
    plumb_err e = {0};
    struct synth *sy;
    REQUIRE(synth_create(1234, &sy, &e) == 0);
    const int N = 40000;
    float *p = malloc(N * sizeof *p), *y = malloc(N * sizeof *y);
    double pos = 0;
    for (int i = 0; i < N; i++) {
        struct criteo_sample s;
        synth_sample(sy, SYNTH_EVAL, (uint64_t)i, &s, &p[i]);
        y[i] = s.label;
        pos += s.label;
    }
    double auc = eval_auc(p, y, N);
    fprintf(stderr, "  teacher: positive rate %.4f, AUC %.4f on %d eval samples\n", pos / N, auc, N);
    CHECK(pos / N > 0.20 && pos / N < 0.30);
    CHECK(auc > 0.77 && auc < 0.83);
    /* independent of order: sample 123 drawn alone equals sample 123 in the loop */
    struct criteo_sample s1, s2;
    synth_sample(sy, SYNTH_EVAL, 123, &s1, NULL);
    synth_sample(sy, SYNTH_EVAL, 124, &s2, NULL);
    synth_sample(sy, SYNTH_EVAL, 123, &s2, NULL);
    CHECK(!memcmp(&s1, &s2, sizeof s1));
    /* splits differ */
    synth_sample(sy, SYNTH_TRAIN, 123, &s2, NULL);
    CHECK(memcmp(&s1, &s2, sizeof s1) != 0);
    free(p), free(y);
    synth_free(sy);
}

TEST(data_loader_matches_sampler)
{
    plumb_err e = {0};
    struct data_opts o = {.seed = 5, .train_samples = 1000, .eval_samples = 100};
    struct dataset *d;
    REQUIRE(dataset_open("synthetic", &o, &d, &e) == 0);
    int64_t rows[26];
    for (int t = 0; t < 26; t++) rows[t] = 97 + t;
    struct sampler s, ref;
    REQUIRE(sampler_init(&s, 1000, 96, 16, 3, 1, &e) == 0);
    REQUIRE(sampler_init(&ref, 1000, 96, 16, 3, 1, &e) == 0);
    struct loader *l;
    struct data_source src;
    struct feed_source fs;
    ctr_source_wrap(&src, d, rows);
    ctr_feed_source(&src, &fs);
    REQUIRE(loader_start(&fs, &s, 1, 3, 5, 30, 3, &l, &e) == 0);
    int ok = 1;
    for (long step = 5; step < 30; step++) {
        struct host_batch *b;
        double w;
        REQUIRE(loader_next(l, &b, &w, &e) == 0);
        uint32_t idx[96];
        int sv[8];
        struct sampler_step st;
        sampler_get(&ref, step, 1, 3, &st, idx, sv, &e);
        ok &= b->st.step == step && b->n == st.local_valid;
        for (int i = 0; i < b->n; i++) {
            struct criteo_sample cs;
            dataset_get(d, 0, idx[i], &cs);
            const float *labels = b->field[CTR_F_LABEL];
            const uint32_t *sparse = b->field[CTR_F_SPARSE];
            ok &= labels[i] == cs.label && sparse[i * 26 + 3] == cs.cat[3] % 100;
        }
        loader_release(l, b);
    }
    CHECK(ok);
    loader_stop(l);
    sampler_free(&s);
    sampler_free(&ref);
    dataset_free(d);
}

/* data_fill's table rows (a division-free remainder) equal hash % rows for
 * every edge: rows 1, 2, powers of two, primes, 2^32 - 1; hashes 0, 1,
 * rows - 1, rows, 2^32 - 1 and random ones; from an in-memory dataset. */
TEST(data_fill_rows_equal_hash_mod_rows)
{
    enum { N = 4096 };
    struct criteo_sample *mem = calloc(N, sizeof *mem);
    REQUIRE(mem != NULL);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    const uint32_t edge[] = {0u, 1u, 2u, 3u, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu};
    for (int i = 0; i < N; i++)
        for (int t = 0; t < CRITEO_CAT; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            mem[i].cat[t] = i < 8 ? edge[i] : (uint32_t)(s >> 32);
        }
    const int64_t choices[] = {1, 2, 3, 7, 1000, 1 << 20, 1000003, 10000000, 0x7fffffffLL, 0x80000000LL,
                               0xfffffffeLL, 0xffffffffLL, 26, 65536, 999999937};
    int64_t rows[CRITEO_CAT];
    for (int t = 0; t < CRITEO_CAT; t++) rows[t] = choices[t % (sizeof choices / sizeof choices[0])];
    /* hashes at each table's own edges: rows - 1, rows, rows + 1 */
    for (int t = 0; t < CRITEO_CAT; t++) {
        mem[8].cat[t] = (uint32_t)(rows[t] - 1);
        mem[9].cat[t] = (uint32_t)rows[t];
        mem[10].cat[t] = (uint32_t)(rows[t] + 1);
    }
    struct dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.mem[0] = mem;
    ds.n[0] = N;
    uint32_t *idx = malloc(N * sizeof *idx), *sparse = malloc((size_t)N * CRITEO_CAT * sizeof *sparse);
    float *dense = malloc((size_t)N * CRITEO_DENSE * sizeof *dense), *lab = malloc(N * sizeof *lab);
    REQUIRE(idx && sparse && dense && lab);
    for (int i = 0; i < N; i++) idx[i] = (uint32_t)((i * 2654435761u) % N); /* a permutation: N is a power of 2 */
    data_fill(&ds, 0, idx, N, rows, dense, sparse, lab);
    long bad = 0;
    for (int i = 0; i < N; i++)
        for (int t = 0; t < CRITEO_CAT; t++)
            bad += sparse[(size_t)i * CRITEO_CAT + t] != mem[idx[i]].cat[t] % (uint32_t)rows[t];
    CHECK_MSG(bad == 0, "%ld of %d rows differ from hash %% rows", bad, N * CRITEO_CAT);
    free(idx), free(sparse), free(dense), free(lab), free(mem);
}
