/* gpt through the one trainer against PyTorch: bench/gpt_reference.py's 10
 * clipped AdamW steps, run by trainer_run from the reference's initial
 * parameters (--init-from) on its 4 sequences (a token file of them, fixed
 * windows: the batch of every step is those 4, in the sampler's order): the
 * losses in metrics.jsonl within 5e-5 of PyTorch's, fast and golden (the
 * optimizer, the clipping and the schedule are the trainer's). Runs on
 * test_device(). */
#include "test.h"
#include "comm/comm.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "models/gpt/data.h"
#include "models/gpt/refstate.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <jansson.h>
#include <stdlib.h>

static void ref_path(char *buf, size_t n)
{
    const char *root = getenv("PLUMB_ROOT");
    snprintf(buf, n, "%s/bench/gpt_tiny_reference.bin", root ? root : ".");
}

/* plumb train gpt with the option words (pairs, a NULL value for a flag,
 * NULL-terminated), results in out, one rank: trainer_run's code, or -1
 * when an option or the configuration is refused (already reported) */
static int train_gpt_words(const char *const *words, const char *out, struct train_result *tr, plumb_err *e)
{
    struct train_config cfg;
    train_config_defaults(&cfg, workload_find("gpt"));
    for (int i = 0; words[i]; i += 2) {
        const int rc = train_option_set(&cfg, words[i], words[i + 1], e);
        CHECK_MSG(rc == 0, "%s: %s", words[i], e->msg);
        if (rc) return -1;
    }
    const int fin = train_config_finish(&cfg, e);
    CHECK_MSG(fin == 0, "train_config_finish: %s", e->msg);
    if (fin) return -1;
    cfg.out_dir = out;
    cfg.progress = 0;
    struct comm *c = NULL;
    const int ci = comm_init("self", &c, e);
    CHECK_MSG(ci == 0, "comm_init: %s", e->msg);
    if (ci) return -1;
    const int rc = trainer_run(&cfg, c, tr, e);
    comm_finalize(c);
    return rc;
}

static void run_case(const char *numerics)
{
    char ref[1024], train[1024], val[1024], out[1024];
    ref_path(ref, sizeof ref);
    struct gpt_ref r;
    plumb_err e = {0};
    REQUIRE(gpt_ref_load(ref, &r, &e) == 0);
    const int B = r.B, T = r.T;
    /* the reference's 4 x 32 tokens and the last target: one stream of
     * B*T + 1 tokens; padded to (B + 1) T so there are B train windows */
    int32_t *tok = malloc((size_t)B * T * 4), *tgt = malloc((size_t)B * T * 4);
    REQUIRE(gpt_ref_i32(&r, "tokens", tok, (size_t)B * T, &e) == 0 && gpt_ref_i32(&r, "targets", tgt, (size_t)B * T, &e) == 0);
    uint16_t s[(4 + 1) * 32 + 8] = {0};
    for (int i = 0; i < B * T; i++) s[i] = (uint16_t)tok[i];
    s[B * T] = (uint16_t)tgt[B * T - 1];
    snprintf(train, sizeof train, "%s/ref_train_%s.bin", test_tmpdir(), numerics);
    snprintf(val, sizeof val, "%s/ref_val_%s.bin", test_tmpdir(), numerics);
    snprintf(out, sizeof out, "%s/ref_run_%s", test_tmpdir(), numerics);
    REQUIRE(gpt_token_file_write(train, s, (size_t)(B + 1) * T, &e) == 0);
    REQUIRE(gpt_token_file_write(val, s, (size_t)T + 1, &e) == 0);
    REQUIRE(file_mkdirs(out, &e) == 0);
    char dspec[1100], st[32], bs[32], sl[32], lr[32], wd[32], b2[32];
    snprintf(dspec, sizeof dspec, "tokens:%s", train);
    snprintf(st, sizeof st, "%d", r.steps);
    snprintf(bs, sizeof bs, "%d", B);
    snprintf(sl, sizeof sl, "%d", T);
    snprintf(lr, sizeof lr, "%.17g", r.lr);
    snprintf(wd, sizeof wd, "%.17g", r.weight_decay);
    snprintf(b2, sizeof b2, "%.17g", r.beta2);
    const char *words[] = {"--preset", "gpt-tiny", "--device", test_device(), "--numerics", numerics, "--data", dspec,
                           "--eval-data", val, "--seq-len", sl, "--windows", "fixed", "--init-from", ref, "--batch", bs,
                           "--micro-shard", bs, "--steps", st, "--lr", lr, "--warmup", "0", "--schedule", "constant",
                           "--weight-decay", wd, "--adam-beta2", b2, "--clip-grad-norm", "1", "--threads", "1",
                           "--quiet", NULL, "--health-interval", "0", NULL};
    struct train_result tr;
    int rc = train_gpt_words(words, out, &tr, &e);
    if (rc == -1) return;
    if (rc == PLUMB_EDEVICE || rc == PLUMB_EUNSUPPORTED) TEST_SKIP("%s", e.msg);
    CHECK_MSG(rc == 0, "trainer_run: %s", e.msg);
    if (rc) return;
    /* the step losses of metrics.jsonl */
    char mpath[1200], *text = NULL;
    size_t len = 0;
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", out);
    REQUIRE(file_read_all(mpath, &text, &len, &e) == 0);
    float *want = malloc((size_t)r.steps * 4);
    REQUIRE(gpt_ref_f32(&r, "losses", want, (size_t)r.steps, &e) == 0);
    int seen = 0;
    double worst = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, 0, NULL);
        if (!j) continue;
        const char *ty = json_string_value(json_object_get(j, "type"));
        if (ty && !strcmp(ty, "step")) {
            const long step = (long)json_integer_value(json_object_get(j, "step"));
            const double l = json_number_value(json_object_get(j, "loss"));
            if (step >= 1 && step <= r.steps) {
                worst = fmax(worst, fabs(l - want[step - 1]));
                if (getenv("PLUMB_TEST_VERBOSE")) fprintf(stderr, "  step %ld loss %.6f torch %.6f\n", step, l, want[step - 1]);
                seen++;
            }
        }
        json_decref(j);
    }
    CHECK_EQ_INT(seen, r.steps);
    CHECK_MSG(worst <= 5e-5, "%s: trainer step losses differ from PyTorch's by up to %g", numerics, worst);
    free(text), free(want), free(tok), free(tgt);
    gpt_ref_free(&r);
}

TEST(gpt_trainer_matches_pytorch_fast) { run_case("fast"); }
TEST(gpt_trainer_matches_pytorch_golden) { run_case("golden"); }

/* --eval-data's own faults are named as --eval-data, with its file: token
 * ids past the preset's vocabulary, fewer than 2 tokens, or an --eval-data
 * given with synthetic or text data (before: the messages named --data and
 * the train file, or an option "--val-data" that does not exist). */
static int open_gpt_data(const char *data, const char *eval, plumb_err *e)
{
    const struct workload *wl = workload_find("gpt");
    struct train_config cfg;
    train_config_defaults(&cfg, wl);
    const char *words[] = {"--preset", "gpt-tiny", "--seq-len", "16", "--data", data, "--eval-data", eval, NULL};
    for (int i = 0; words[i]; i += 2)
        if (train_option_set(&cfg, words[i], words[i + 1], e)) return -1;
    if (train_config_finish(&cfg, e)) return -1;
    void *spec = NULL;
    if (wl->configure(&cfg, &spec, NULL, 0, e)) return -1;
    struct data_source *ds = NULL;
    int rc = wl->data->open(&cfg, spec, 0, &ds, e);
    if (!rc) wl->data->free(ds);
    wl->spec_free(spec);
    return rc;
}

TEST(gpt_workload_eval_data_faults_name_eval_data)
{
    char train[600], big[600], one[600], txt[600];
    plumb_err e = {0};
    uint16_t t[400];
    for (int i = 0; i < 400; i++) t[i] = (uint16_t)(i % 256);
    snprintf(train, sizeof train, "%s/ev_train.bin", test_tmpdir());
    snprintf(big, sizeof big, "%s/ev_bigids.bin", test_tmpdir());
    snprintf(one, sizeof one, "%s/ev_one.bin", test_tmpdir());
    snprintf(txt, sizeof txt, "%s/ev_text.txt", test_tmpdir());
    REQUIRE(gpt_token_file_write(train, t, 400, &e) == 0);
    REQUIRE(gpt_token_file_write(one, t, 1, &e) == 0);
    REQUIRE(file_write_atomic(txt, "a text file of a few dozen bytes, as a gpt-tiny stream", 54, &e) == 0);
    t[7] = 300;
    REQUIRE(gpt_token_file_write(big, t, 400, &e) == 0);
    char spec[700];
    snprintf(spec, sizeof spec, "tokens:%s", train);
    CHECK_EQ_INT(open_gpt_data(spec, train, &e), 0);
    CHECK_EQ_INT(open_gpt_data(spec, big, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--eval-data") && strstr(e.msg, big) && strstr(e.msg, "300") && !strstr(e.msg, train), "%s",
              e.msg);
    CHECK_EQ_INT(open_gpt_data(spec, one, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--eval-data") && strstr(e.msg, one) && !strstr(e.msg, train), "%s", e.msg);
    /* the train file's own faults still name --data */
    snprintf(spec, sizeof spec, "tokens:%s", big);
    CHECK_EQ_INT(open_gpt_data(spec, train, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--data") && !strstr(e.msg, "--eval-data") && strstr(e.msg, big), "%s", e.msg);
    CHECK_EQ_INT(open_gpt_data("synthetic", train, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--eval-data") && !strstr(e.msg, "--val-data"), "%s", e.msg);
    snprintf(spec, sizeof spec, "text:%s", txt);
    CHECK_EQ_INT(open_gpt_data(spec, train, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--eval-data") && !strstr(e.msg, "--val-data"), "%s", e.msg);
}

/* --init-from a reference state of another architecture names both (the
 * file's and the preset's): before, the message read the state's config
 * after gpt_ref_free had zeroed it ("a model of L0 H0 C0 T0 V0"). The
 * state here is gpt-tiny's reference with "n_layer": 2 made 1 in its
 * header. */
TEST(gpt_init_from_another_architecture_names_it)
{
    char ref[1024], bad[1024], out[1024];
    ref_path(ref, sizeof ref);
    plumb_err e = {0};
    char *buf = NULL;
    size_t len = 0;
    REQUIRE(file_read_all(ref, &buf, &len, &e) == 0);
    char *nl = strstr(buf, "\"n_layer\": 2");
    REQUIRE(nl != NULL);
    nl[strlen("\"n_layer\": ")] = '1';
    snprintf(bad, sizeof bad, "%s/ref_l1.bin", test_tmpdir());
    REQUIRE(file_write_atomic(bad, buf, len, &e) == 0);
    free(buf);
    snprintf(out, sizeof out, "%s/ref_l1_run", test_tmpdir());
    REQUIRE(file_mkdirs(out, &e) == 0);
    const char *words[] = {"--preset", "gpt-tiny", "--steps", "1", "--batch", "2", "--init-from", bad, "--quiet", NULL,
                           "--health-interval", "0", NULL};
    struct train_result tr;
    const int rc = train_gpt_words(words, out, &tr, &e);
    CHECK_EQ_INT(rc, PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "--init-from") && strstr(e.msg, "a model of L1 H4 C64 T64 V256") &&
                  strstr(e.msg, "the preset's L2 H4 C64 T64 V256"),
              "%s", e.msg);
}
