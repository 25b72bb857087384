/* The deferred synchronous step and its graph (train/trainer.c, "the
 * deferred synchronous step"): gpt-tiny (AdamW, clipping) and resnet-tiny
 * (momentum, whole-batch BatchNorm) in fast numerics on test_device(),
 * trained three ways:
 *   - the default: forward/backward deferred, one read a step, and on a
 *     device with graphs captured and replayed;
 *   - --graph off: deferred, op by op;
 *   - PLUMB_TRAIN_DEFER=0: the model reads its loss back itself, as before.
 * Every step line's loss and gradient norm and the final parameter digest
 * must be the same bits, and the result's counters must say which path ran
 * (deferred_steps, graphed_steps), so a path that silently stopped applying
 * fails here. Also gpt with plain SGD and no clipping, which the queued step
 * now takes (a model without a sparse list): the same bits as
 * PLUMB_TRAIN_QUEUE=0. */
#include "test.h"
#include "comm/comm.h"
#include "core/file.h"
#include "dev/dev.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 16
#define STEPS_S "16"

struct run_out {
    struct train_result tr;
    double loss[STEPS + 1], norm[STEPS + 1];
    int lines;
};

/* plumb train WORKLOAD with words (pairs, NULL value = flag) into out;
 * env (may be NULL) "NAME=VALUE" set for the run only. 0, or the
 * trainer's code with *skip set when the device is not there. */
static int run_words(const char *workload, const char *const *words, const char *env, const char *out,
                     struct run_out *r, plumb_err *e)
{
    memset(r, 0, sizeof *r);
    struct train_config cfg;
    train_config_defaults(&cfg, workload_find(workload));
    for (int i = 0; words[i]; i += 2) {
        int rc = train_option_set(&cfg, words[i], words[i + 1], e);
        if (rc) return rc;
    }
    int rc = train_config_finish(&cfg, e);
    if (rc) return rc;
    cfg.out_dir = out;
    cfg.progress = 0;
    char name[64] = "", *eq = NULL;
    if (env) {
        snprintf(name, sizeof name, "%s", env);
        eq = strchr(name, '=');
        if (eq) *eq = 0, setenv(name, eq + 1, 1);
    }
    struct comm *c = NULL;
    rc = comm_init("self", &c, e);
    if (!rc) rc = trainer_run(&cfg, c, &r->tr, e);
    comm_finalize(c);
    if (eq) unsetenv(name);
    if (rc) return rc;
    /* the step lines of metrics.jsonl */
    char path[1200], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", out);
    if ((rc = file_read_all(path, &text, &len, e))) return rc;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *j = json_loads(line, 0, NULL);
        const char *ty = j ? json_string_value(json_object_get(j, "type")) : NULL;
        if (ty && !strcmp(ty, "step")) {
            long s = (long)json_integer_value(json_object_get(j, "step"));
            if (s >= 1 && s <= STEPS) {
                r->loss[s] = json_number_value(json_object_get(j, "loss"));
                r->norm[s] = json_number_value(json_object_get(j, "grad_norm"));
                r->lines++;
            }
        }
        json_decref(j);
    }
    free(text);
    return PLUMB_OK;
}

/* Whether test_device() has graphs (its backend's graph_begin). */
static int device_has_graphs(void)
{
    struct dev *d = NULL;
    plumb_err e = {0};
    if (dev_open(test_device(), &d, &e)) return 0;
    int g = d->be->graph_begin != NULL;
    dev_close(d);
    return g;
}

static void same_bits(const char *what, const struct run_out *a, const struct run_out *b)
{
    CHECK_EQ_INT(a->lines, STEPS);
    CHECK_EQ_INT(b->lines, STEPS);
    int bad = 0;
    for (int s = 1; s <= STEPS; s++)
        bad += memcmp(&a->loss[s], &b->loss[s], sizeof(double)) || memcmp(&a->norm[s], &b->norm[s], sizeof(double));
    CHECK_MSG(bad == 0, "%s: %d of %d step lines differ in loss or gradient norm", what, bad, STEPS);
    CHECK_MSG(!strcmp(a->tr.param_digest, b->tr.param_digest), "%s: digests %s and %s", what, a->tr.param_digest,
              b->tr.param_digest);
}

/* the three ways of one workload's words */
static void three_ways(const char *workload, const char *const *words, const char *const *words_nograph)
{
    char o1[1024], o2[1024], o3[1024];
    snprintf(o1, sizeof o1, "%s/deferred_%s_default", test_tmpdir(), workload);
    snprintf(o2, sizeof o2, "%s/deferred_%s_nograph", test_tmpdir(), workload);
    snprintf(o3, sizeof o3, "%s/deferred_%s_off", test_tmpdir(), workload);
    plumb_err e = {0};
    struct run_out *r = calloc(3, sizeof *r);
    REQUIRE(r);
    int rc = run_words(workload, words, NULL, o1, &r[0], &e);
    if (rc == PLUMB_EDEVICE || rc == PLUMB_EUNSUPPORTED) {
        free(r);
        TEST_SKIP("%s", e.msg);
    }
    CHECK_MSG(rc == 0, "default run: %s", e.msg);
    CHECK_MSG(run_words(workload, words_nograph, NULL, o2, &r[1], &e) == 0, "--graph off: %s", e.msg);
    CHECK_MSG(run_words(workload, words, "PLUMB_TRAIN_DEFER=0", o3, &r[2], &e) == 0, "PLUMB_TRAIN_DEFER=0: %s", e.msg);
    same_bits("deferred (graphed where the device has graphs) against not deferred", &r[0], &r[2]);
    same_bits("deferred without graphs against not deferred", &r[1], &r[2]);
    /* which path ran: every step deferred but with the switch off */
    CHECK_EQ_INT(r[0].tr.deferred_steps, STEPS);
    CHECK_EQ_INT(r[1].tr.deferred_steps, STEPS);
    CHECK_EQ_INT(r[2].tr.deferred_steps, 0);
    CHECK_EQ_INT(r[1].tr.graphed_steps, 0);
    CHECK_EQ_INT(r[2].tr.graphed_steps, 0);
    if (device_has_graphs()) {
        /* each of the feed's batch buffers: op by op once, captured the
         * second time, replayed after; 16 steps replay some */
        CHECK_MSG(r[0].tr.graphed_steps > 0, "%s: no step replayed as a graph on %s", workload, test_device());
    } else {
        CHECK_EQ_INT(r[0].tr.graphed_steps, 0);
    }
    free(r);
}

TEST(deferred_step_gpt_same_bits_three_ways)
{
    const char *w[] = {"--preset", "gpt-tiny", "--device", test_device(), "--numerics", "fast", "--data", "synthetic",
                       "--steps", STEPS_S, "--batch", "4", "--seq-len", "32", "--threads", "1", "--quiet", NULL,
                       "--health-interval", "0", "--eval-every", "0", NULL};
    const char *wn[] = {"--preset", "gpt-tiny", "--device", test_device(), "--numerics", "fast", "--data", "synthetic",
                        "--steps", STEPS_S, "--batch", "4", "--seq-len", "32", "--threads", "1", "--quiet", NULL,
                        "--health-interval", "0", "--eval-every", "0", "--graph", "off", NULL};
    three_ways("gpt", w, wn);
}

TEST(deferred_step_resnet_same_bits_three_ways)
{
    const char *w[] = {"--preset", "resnet-tiny", "--device", test_device(), "--numerics", "fast", "--steps", STEPS_S,
                       "--batch", "16", "--threads", "1", "--quiet", NULL, "--health-interval", "0",
                       "--eval-every", "0", NULL};
    const char *wn[] = {"--preset", "resnet-tiny", "--device", test_device(), "--numerics", "fast", "--steps", STEPS_S,
                        "--batch", "16", "--threads", "1", "--quiet", NULL, "--health-interval", "0",
                        "--eval-every", "0", "--graph", "off", NULL};
    three_ways("resnet", w, wn);
}

/* gpt with plain SGD and no clipping: the queued step (no sparse list, so
 * no row count on the device), against the synchronous step */
TEST(deferred_step_gpt_plain_sgd_queued_same_bits)
{
    const char *w[] = {"--preset", "gpt-tiny", "--device", test_device(), "--numerics", "fast", "--data", "synthetic",
                       "--steps", STEPS_S, "--batch", "4", "--seq-len", "32", "--optimizer", "sgd", "--lr", "0.1",
                       "--clip-grad-norm", "0", "--threads", "1", "--quiet", NULL, "--health-interval", "0",
                       "--eval-every", "0", NULL};
    char o1[1024], o2[1024];
    snprintf(o1, sizeof o1, "%s/queued_gpt_sgd", test_tmpdir());
    snprintf(o2, sizeof o2, "%s/queued_gpt_sgd_off", test_tmpdir());
    plumb_err e = {0};
    struct run_out *r = calloc(2, sizeof *r);
    REQUIRE(r);
    int rc = run_words("gpt", w, NULL, o1, &r[0], &e);
    if (rc == PLUMB_EDEVICE || rc == PLUMB_EUNSUPPORTED) {
        free(r);
        TEST_SKIP("%s", e.msg);
    }
    CHECK_MSG(rc == 0, "queued run: %s", e.msg);
    CHECK_MSG(run_words("gpt", w, "PLUMB_TRAIN_QUEUE=0", o2, &r[1], &e) == 0, "PLUMB_TRAIN_QUEUE=0: %s", e.msg);
    same_bits("queued against synchronous", &r[0], &r[1]);
    /* queued steps are not the deferred synchronous ones; the synchronous run's are */
    CHECK_EQ_INT(r[0].tr.deferred_steps, 0);
    CHECK_EQ_INT(r[1].tr.deferred_steps, STEPS);
    free(r);
}
