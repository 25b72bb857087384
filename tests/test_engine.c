/* sampler, exact eval metrics, loss scaler, checkpoint files, comm (self;
 * the mpi_ tests also run under mpirun from tests/t_comm.sh). */
#include "test.h"
#include "comm/comm.h"
#include "core/file.h"
#include "core/hash.h"
#include "train/ckpt.h"
#include "models/ctr/eval.h"
#include "train/mcomm.h"
#include "train/sampler.h"
#include "core/philox.h"
#include "train/scaler.h"
#include <stdlib.h>
#include <unistd.h>

TEST(sampler_each_sample_once_any_world)
{
    plumb_err e = {0};
    const long N = 1000, B = 96;
    const int M = 16;
    struct sampler s;
    REQUIRE(sampler_init(&s, N, B, M, 11, 1, &e) == 0);
    long spe = sampler_steps_per_epoch(&s);
    CHECK_EQ_INT(spe, 11);
    for (int W = 1; W <= 4; W++) {
        for (long epoch = 0; epoch < 2; epoch++) {
            int *seen = calloc((size_t)N, sizeof *seen);
            for (long k = 0; k < spe; k++) {
                long step = epoch * spe + k;
                long sum = 0;
                for (int r = 0; r < W; r++) {
                    uint32_t idx[96];
                    int sv[8];
                    struct sampler_step st;
                    REQUIRE(sampler_get(&s, step, r, W, &st, idx, sv, &e) == 0);
                    CHECK(st.local_valid <= sampler_local_capacity(&s, r, W));
                    for (long i = 0; i < st.local_valid; i++) seen[idx[i]]++;
                    sum += st.local_valid;
                    CHECK_EQ_INT(st.global_valid, k < spe - 1 ? B : N - (spe - 1) * B);
                }
                CHECK_EQ_INT(sum, k < spe - 1 ? B : N - (spe - 1) * B);
            }
            int once = 1;
            for (long i = 0; i < N; i++) once &= seen[i] == 1;
            CHECK_MSG(once, "world %d epoch %ld: a sample missing or repeated", W, epoch);
            free(seen);
        }
    }
    /* shard contents do not depend on the world size */
    uint32_t all1[96], part[96];
    int sv[8];
    struct sampler_step st;
    sampler_get(&s, 3, 0, 1, &st, all1, sv, &e);
    long off = 0;
    for (int r = 0; r < 3; r++) {
        sampler_get(&s, 3, r, 3, &st, part, sv, &e);
        CHECK(!memcmp(part, all1 + off, (size_t)st.local_valid * 4));
        off += st.local_valid;
    }
    /* epochs shuffle differently; the permutation is a permutation */
    uint32_t *p0 = malloc(N * 4), *p1 = malloc(N * 4);
    sampler_permutation(11, 0, N, p0);
    sampler_permutation(11, 1, N, p1);
    CHECK(memcmp(p0, p1, N * 4) != 0);
    free(p0), free(p1);
    sampler_free(&s);
}

/* The shuffle's draws are made in parallel blocks: the permutation must be
 * the one-thread Fisher-Yates of the definition (sampler.c), across block
 * boundaries (n > 65536), and a permutation. */
TEST(sampler_permutation_matches_serial_definition)
{
    const long n = 200003;
    uint32_t *p = malloc(n * 4), *ref = malloc(n * 4);
    unsigned char *seen = calloc(n, 1);
    for (long epoch = 0; epoch < 2; epoch++) {
        sampler_permutation(99, epoch, n, p);
        for (long i = 0; i < n; i++) ref[i] = (uint32_t)i;
        for (long i = n - 1; i > 0; i--) {
            uint32_t w[4];
            philox_block(99, RNG_SHUFFLE, (uint32_t)epoch, 0, (uint64_t)(i - 1), w);
            uint64_t x = ((uint64_t)w[0] << 32) | w[1];
            uint64_t j = (uint64_t)(((unsigned __int128)x * (uint64_t)(i + 1)) >> 64);
            uint32_t t = ref[i];
            ref[i] = ref[j];
            ref[j] = t;
        }
        CHECK_MSG(!memcmp(p, ref, n * 4), "epoch %ld: the parallel shuffle differs from the serial definition", epoch);
        memset(seen, 0, n);
        long dup = 0;
        for (long i = 0; i < n; i++) dup += seen[p[i]]++ != 0;
        CHECK_EQ_INT(dup, 0);
    }
    free(p), free(ref), free(seen);
}

/* The look-ahead (the next epoch's permutation computed on a thread while
 * this one is served) hands out exactly the indices of a sampler without it:
 * steps in order across epochs (with partial last batches), a jump back to
 * an earlier epoch and one forward past the computed epoch (a rollback, a
 * resume), the end bound, and a free while the look-ahead still runs; the
 * one-thread and several-thread draws give the same permutation. */
TEST(sampler_look_ahead_same_indices)
{
    const long n = 70001, B = 8192; /* 9 steps an epoch, the last one partial; n > one draw block */
    plumb_err e = {0};
    struct sampler a, ref;
    uint32_t *ia = malloc(B * 4), *ir = malloc(B * 4);
    int sa[1], sr[1];
    REQUIRE(ia && ir);
    for (int threads = 1; threads <= 2; threads++) {
        REQUIRE(sampler_init(&a, n, B, (int)B, 5, 1, &e) == 0);
        REQUIRE(sampler_init(&ref, n, B, (int)B, 5, 1, &e) == 0);
        sampler_set_ahead(&a, threads, 60);
        const long steps[] = {0, 1, 8, 9, 10, 17, 18, 26, 27, 3, 4, 40, 41, 45, 52, 53, 54, 59};
        long bad = 0;
        for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
            struct sampler_step x, y;
            REQUIRE(sampler_get(&a, steps[k], 0, 1, &x, ia, sa, &e) == 0);
            REQUIRE(sampler_get(&ref, steps[k], 0, 1, &y, ir, sr, &e) == 0);
            bad += x.local_valid != y.local_valid || x.epoch != y.epoch || sa[0] != sr[0] ||
                   memcmp(ia, ir, (size_t)y.local_valid * 4) != 0;
        }
        CHECK_MSG(bad == 0, "threads %d: %ld steps differ with the look-ahead", threads, bad);
        /* the end bound: no epoch past step 60 is computed (epoch 6 starts at 54) */
        CHECK_EQ_INT(a.next_live, 0);
        /* a free while the next epoch is being computed */
        struct sampler_step x;
        REQUIRE(sampler_get(&a, 0, 0, 1, &x, ia, sa, &e) == 0);
        sampler_free(&a);
        sampler_free(&ref);
    }
    free(ia), free(ir);
}

/* O(n^2) reference: P(score_pos > score_neg) + 0.5 P(equal) */
static double auc_brute(const float *s, const float *y, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (y[i] > 0.5f && y[j] < 0.5f) {
                den += 1;
                num += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
            }
    return num / den;
}

TEST(eval_auc_known_answers_and_ties)
{
    float s1[] = {0.1f, 0.4f, 0.35f, 0.8f}, y1[] = {0, 0, 1, 1};
    CHECK_NEAR(eval_auc(s1, y1, 4), 0.75, 1e-15);
    float s2[] = {0.5f, 0.5f, 0.5f, 0.5f}, y2[] = {0, 1, 0, 1};
    CHECK_NEAR(eval_auc(s2, y2, 4), 0.5, 1e-15);
    float s3[] = {1, 2, 3}, y3[] = {1, 1, 1};
    CHECK(isnan(eval_auc(s3, y3, 3)));
    /* many ties (scores on a coarse grid) against the brute force */
    enum { N = 700 };
    float s[N], y[N];
    unsigned x = 12345;
    for (int i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        s[i] = (float)((x >> 16) % 23) / 8.0f;
        x = x * 1103515245u + 12345u;
        y[i] = ((x >> 16) % 100) < (unsigned)(20 + 2 * (int)(s[i] * 8)) ? 1.0f : 0.0f;
    }
    CHECK_NEAR(eval_auc(s, y, N), auc_brute(s, y, N), 1e-12);
    CHECK_NEAR(eval_bce(0.0f, 1.0f), log(2.0), 1e-15);
    CHECK_NEAR(eval_bce(-40.0f, 1.0f), 40.0, 1e-12);
    CHECK_NEAR(eval_bce(40.0f, 1.0f), log1p(exp(-40.0)), 1e-25);
}

TEST(scaler_pytorch_semantics)
{
    struct loss_scaler s;
    scaler_init(&s, 1, 65536.0, 2.0, 0.5, 3);
    /* steps: ok ok inf ok ok ok ok ok ok */
    int inf[] = {0, 0, 1, 0, 0, 0, 0, 0, 0};
    double want_scale[] = {65536, 65536, 32768, 32768, 32768, 65536, 65536, 65536, 131072};
    int want_apply[] = {1, 1, 0, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < 9; i++) {
        CHECK_EQ_INT(scaler_update(&s, inf[i]), want_apply[i]);
        CHECK_NEAR(s.scale, want_scale[i], 0);
    }
    CHECK_EQ_INT(s.skipped_total, 1);
    /* two infs in a row: two halvings */
    scaler_update(&s, 1);
    scaler_update(&s, 1);
    CHECK_NEAR(s.scale, 32768, 0);
    /* disabled: scale 1 forever, still skips */
    scaler_init(&s, 0, 65536.0, 2.0, 0.5, 1);
    CHECK_EQ_INT(scaler_update(&s, 1), 0);
    CHECK_EQ_INT(scaler_update(&s, 0), 1);
    CHECK_NEAR(scaler_scale(&s), 1.0, 0);
}

TEST(ckpt_write_read_keep_corrupt_partial)
{
    plumb_err e = {0};
    char dir[512];
    REQUIRE(!file_join(dir, sizeof dir, test_tmpdir(), "ck", &e));
    float params[1000];
    for (int i = 0; i < 1000; i++) params[i] = (float)i * 0.5f;
    const char *meta = "{\"step\": 1}";
    for (long step = 10; step <= 50; step += 10) {
        params[0] = (float)step;
        struct ckpt_section sec[2] = {{"meta", meta, strlen(meta)}, {"params", params, sizeof params}};
        REQUIRE(ckpt_write(dir, step, sec, 2, 3, NULL, &e) == 0);
    }
    long *steps;
    int n;
    REQUIRE(ckpt_list(dir, &steps, &n, &e) == 0);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(steps[0], 50);
    CHECK_EQ_INT(steps[2], 30);
    free(steps);
    struct ckpt c;
    int found;
    REQUIRE(ckpt_load_latest(dir, &c, &found, &e) == 0 && found);
    CHECK_EQ_INT(c.step, 50);
    size_t len;
    const float *p = ckpt_find(&c, "params", &len);
    REQUIRE(p && len == sizeof params);
    CHECK(p[0] == 50.0f && p[999] == 499.5f);
    char path50[4096];
    snprintf(path50, sizeof path50, "%s", c.path);
    ckpt_free(&c);
    /* corrupt the newest: the previous is used */
    REQUIRE(ckpt_corrupt_file(path50, &e) == 0);
    CHECK_EQ_INT(ckpt_read(path50, &c, &e), PLUMB_ECORRUPT);
    CHECK_MSG(strstr(e.msg, "checksum"), "%s", e.msg);
    REQUIRE(ckpt_load_latest(dir, &c, &found, &e) == 0 && found);
    CHECK_EQ_INT(c.step, 40);
    ckpt_free(&c);
    /* a partial (truncated) file at 40: falls back to 30 */
    char path40[4096];
    ckpt_path(dir, 40, path40, sizeof path40, &e);
    REQUIRE(truncate(path40, 500) == 0);
    CHECK_EQ_INT(ckpt_read(path40, &c, &e), PLUMB_ECORRUPT);
    REQUIRE(ckpt_load_latest(dir, &c, &found, &e) == 0 && found);
    CHECK_EQ_INT(c.step, 30);
    ckpt_free(&c);
    /* a crash before the rename leaves the old files and no new checkpoint */
    file_test_fail_before_rename = 1;
    struct ckpt_section sec[1] = {{"meta", meta, strlen(meta)}};
    CHECK(ckpt_write(dir, 60, sec, 1, 3, NULL, &e) != 0);
    file_test_fail_before_rename = 0;
    REQUIRE(ckpt_load_latest(dir, &c, &found, &e) == 0 && found);
    CHECK_EQ_INT(c.step, 30);
    ckpt_free(&c);
    /* empty directory */
    char empty[512];
    file_join(empty, sizeof empty, test_tmpdir(), "ck-none", &e);
    REQUIRE(ckpt_load_latest(empty, &c, &found, &e) == 0);
    CHECK_EQ_INT(found, 0);
}

/* Runs on 1 rank in the plain suite and on N ranks under mpirun
 * (tests/t_comm.sh runs `mpirun -np 3 plumb-tests mpi_`). */
/* NaN scores rank below every number (as -inf; NaN ties with NaN) and
 * the AUC stays the Mann-Whitney statistic of that order; a NaN logit is
 * refused by the exact eval, naming the sample; no samples at all give
 * count 0 and NaN metrics, not a crash. Against brute force over pairs. */
TEST(eval_auc_nan_scores_and_empty)
{
    float s[] = {NAN, 0.1f, 0.9f, NAN, 0.3f, -INFINITY}, y[] = {1, 0, 1, 0, 1, 0};
    /* NaN as -inf: pairs (pos, neg) = (NaN,.1) 0, (NaN,NaN) .5, (NaN,-inf) .5,
     * (.9, *) 1 1 1, (.3,.1) 1, (.3,NaN) 1, (.3,-inf) 1: 7 of 9 */
    CHECK_NEAR(eval_auc(s, y, 6), 7.0 / 9.0, 1e-15);
    float sb[6];
    for (int i = 0; i < 6; i++) sb[i] = isnan(s[i]) ? -INFINITY : s[i];
    CHECK_NEAR(eval_auc(s, y, 6), auc_brute(sb, y, 6), 1e-15);
    /* the same with the NaNs moved: the order of the input does not matter */
    float s2[] = {0.9f, NAN, 0.3f, -INFINITY, NAN, 0.1f}, y2[] = {1, 0, 1, 0, 1, 0};
    CHECK_NEAR(eval_auc(s2, y2, 6), 7.0 / 9.0, 1e-15);
    /* one class absent, or nothing: NaN */
    CHECK(isnan(eval_auc(s, (float[]){1, 1, 1, 1, 1, 1}, 6)));
    CHECK(isnan(eval_auc(NULL, NULL, 0)));
    struct comm *self;
    plumb_err e = {0};
    REQUIRE(comm_init("self", &self, &e) == 0);
    struct mcomm_ctx sx = {self, NULL};
    struct model_comm ms;
    mcomm_bind(&sx, &ms);
    struct eval_result r;
    float *al = (float *)1, *ay = (float *)1;
    REQUIRE(eval_exact(&ms, NULL, NULL, 0, &r, &al, &ay, &e) == 0);
    CHECK_EQ_INT(r.count, 0);
    CHECK_EQ_INT(r.positives, 0);
    CHECK(isnan(r.auc) && isnan(r.logloss) && isnan(r.accuracy));
    free(al), free(ay);
    float lg[] = {0.5f, NAN, -1.0f}, lb[] = {1, 0, 0};
    CHECK_EQ_INT(eval_exact(&ms, lg, lb, 3, &r, NULL, NULL, &e), PLUMB_EFAIL);
    CHECK_MSG(strstr(e.msg, "sample 1") != NULL, "%s", e.msg);
    comm_finalize(self);
}

/* Collectives and the exact eval on real ranks: tests/t_comm.sh runs this
 * under mpirun -np 2 and 3. On one rank (the plain suite) every collective
 * is the identity and the distributed eval is the one-rank eval, so there
 * is nothing to compare: it skips. */
TEST(mpi_collectives)
{
    plumb_err e = {0};
    struct comm *c;
    REQUIRE(comm_init("auto", &c, &e) == 0);
    int W = c->world, R = c->rank;
    if (W == 1) {
        comm_finalize(c);
        TEST_SKIP("one rank: tests/t_comm.sh runs it on 2 and 3 MPI ranks");
    }
    double d[3] = {R + 0.5, 1.0, -R};
    REQUIRE(comm_allreduce(c, d, 3, DT_F64, COMM_SUM, "test f64", &e) == 0);
    CHECK_NEAR(d[0], W * (W - 1) / 2.0 + 0.5 * W, 0);
    CHECK_NEAR(d[1], W, 0);
    float f[2] = {1.0f, (float)R};
    REQUIRE(comm_allreduce(c, f, 2, DT_F32, COMM_SUM, NULL, &e) == 0);
    CHECK(f[0] == (float)W && f[1] == (float)(W * (W - 1) / 2));
    int64_t q[2] = {(int64_t)1 << 60, R};
    REQUIRE(comm_allreduce(c, q, 2, DT_I64, COMM_SUM, NULL, &e) == 0);
    CHECK(q[0] == ((int64_t)1 << 60) * W);
    uint32_t st[2] = {R == W - 1 ? 7u : 0u, (uint32_t)R};
    REQUIRE(comm_allreduce(c, st, 2, DT_U32, COMM_MAX, "status", &e) == 0);
    CHECK_EQ_INT(st[0], 7);
    CHECK_EQ_INT(st[1], W - 1);
    char b[16] = {0};
    if (R == W - 1) strcpy(b, "from last");
    REQUIRE(comm_broadcast(c, b, sizeof b, W - 1, NULL, &e) == 0);
    CHECK_STREQ(b, "from last");
    int *g = malloc((size_t)W * sizeof *g);
    int mine = 100 + R;
    REQUIRE(comm_allgather(c, &mine, sizeof mine, g, NULL, &e) == 0);
    for (int r = 0; r < W; r++) CHECK_EQ_INT(g[r], 100 + r);
    free(g);
    /* rank r contributes r+1 values r*10 + k */
    int vals[8];
    for (int k = 0; k <= R; k++) vals[k] = R * 10 + k;
    void *all;
    size_t total, counts[8];
    REQUIRE(comm_allgatherv_alloc(c, vals, (size_t)(R + 1) * sizeof(int), &all, &total, counts, NULL, &e) == 0);
    CHECK_EQ_INT(total, (size_t)W * (W + 1) / 2 * sizeof(int));
    const int *a = all;
    int k = 0, ok = 1;
    for (int r = 0; r < W; r++)
        for (int j = 0; j <= r; j++) ok &= a[k++] == r * 10 + j;
    CHECK(ok);
    free(all);
    REQUIRE(comm_barrier(c, NULL, &e) == 0);
    /* exact eval: rank r holds a contiguous part of 1000 samples; the
     * metrics must be those of the whole set on one rank */
    enum { N = 1000 };
    static float lg[N], lb[N];
    for (int i = 0; i < N; i++) {
        lg[i] = (float)((i * 7919) % 101 - 50) / 10.0f;
        lb[i] = (float)(((i * 31) % 7) < 2 + (lg[i] > 0));
    }
    long lo = (long)N * R / W, hi = (long)N * (R + 1) / W;
    struct eval_result mine_r, one;
    float *al, *ay;
    struct mcomm_ctx mx = {c, NULL}, sx;
    struct model_comm mc, ms;
    mcomm_bind(&mx, &mc);
    REQUIRE(eval_exact(&mc, lg + lo, lb + lo, (size_t)(hi - lo), &mine_r, &al, &ay, &e) == 0);
    struct comm *self;
    REQUIRE(comm_init("self", &self, &e) == 0);
    sx.c = self, sx.d = NULL;
    mcomm_bind(&sx, &ms);
    REQUIRE(eval_exact(&ms, lg, lb, N, &one, NULL, NULL, &e) == 0);
    comm_finalize(self);
    CHECK(mine_r.auc == one.auc && mine_r.logloss == one.logloss && mine_r.accuracy == one.accuracy);
    CHECK_EQ_INT(mine_r.count, N);
    CHECK(!memcmp(al, lg, sizeof lg) && !memcmp(ay, lb, sizeof lb));
    CHECK_NEAR(one.auc, auc_brute(lg, lb, N), 1e-12);
    double ll = 0;
    for (int i = 0; i < N; i++) ll += eval_bce(lg[i], lb[i]);
    CHECK_NEAR(one.logloss, ll / N, 1e-9);
    free(al), free(ay);
    /* the last rank holds no eval sample (a short eval set on many ranks):
     * rank r < W-1 holds [N r/(W-1), N (r+1)/(W-1)) */
    lo = R < W - 1 ? (long)N * R / (W - 1) : N;
    hi = R < W - 1 ? (long)N * (R + 1) / (W - 1) : N;
    struct eval_result z;
    REQUIRE(eval_exact(&mc, hi > lo ? lg + lo : NULL, hi > lo ? lb + lo : NULL, (size_t)(hi - lo), &z, &al, &ay, &e) == 0);
    CHECK(z.auc == one.auc && z.logloss == one.logloss && z.accuracy == one.accuracy);
    CHECK_EQ_INT(z.count, N);
    CHECK_EQ_INT(z.positives, one.positives);
    CHECK(!memcmp(al, lg, sizeof lg) && !memcmp(ay, lb, sizeof lb));
    free(al), free(ay);
    fprintf(stderr, "  rank %d of %d: collectives and exact eval ok\n", R, W);
    comm_finalize(c);
}

/* Section names up to 63 bytes (format version 2: "p:" + a torchvision tensor
 * name); a version-1 file (32-byte names) is still read. */
TEST(ckpt_long_names_and_version_1_files)
{
    plumb_err e = {0};
    char dir[512];
    REQUIRE(!file_join(dir, sizeof dir, test_tmpdir(), "ck-names", &e));
    float v[3] = {1, 2, 3};
    const char *longname = "b:layer4.35.downsample.1.running_mean_and_somewhat_more_text_xy"; /* 63 bytes */
    REQUIRE(strlen(longname) == 63);
    struct ckpt_section sec[2] = {{"meta", "{}", 2}, {"", v, sizeof v}};
    snprintf(sec[1].name, sizeof sec[1].name, "%s", longname);
    REQUIRE(ckpt_write(dir, 7, sec, 2, 0, NULL, &e) == 0);
    struct ckpt c;
    int found;
    REQUIRE(ckpt_load_latest(dir, &c, &found, &e) == 0 && found);
    size_t len;
    const float *p = ckpt_find(&c, longname, &len);
    CHECK(p && len == sizeof v && p[2] == 3.0f);
    ckpt_free(&c);
    /* a version-1 file by hand: header, 56-byte entries (name[32]), header CRC, data at 64 */
    unsigned char f[128 + 12];
    memset(f, 0, sizeof f);
    memcpy(f, "PLUMBCK1", 8);
    uint32_t ver = 1, nsec = 1, crc;
    uint64_t step = 3, off = 128, ln = sizeof v;
    memcpy(f + 8, &ver, 4), memcpy(f + 12, &nsec, 4), memcpy(f + 16, &step, 8);
    memcpy(f + 24, "p:fc.weight", 11);
    memcpy(f + 24 + 32, &off, 8), memcpy(f + 24 + 40, &ln, 8);
    crc = hash_crc32(0, v, sizeof v);
    memcpy(f + 24 + 48, &crc, 4);
    crc = hash_crc32(0, f, 24 + 56);
    memcpy(f + 24 + 56, &crc, 4);
    memcpy(f + 128, v, sizeof v);
    char path[600];
    snprintf(path, sizeof path, "%s/v1.plumb", dir);
    REQUIRE(file_write_atomic(path, f, sizeof f, &e) == 0);
    int rc = ckpt_read(path, &c, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    REQUIRE(rc == 0);
    CHECK_EQ_INT(c.step, 3);
    p = ckpt_find(&c, "p:fc.weight", &len);
    CHECK(p && len == sizeof v && p[0] == 1.0f);
    ckpt_free(&c);
}
