/* --log-every N (train/options.c, trainer.c's step_logged): metrics.jsonl
 * holds a step line for every N-th step (1-based, as lines name them), the
 * run's first and last step, the steps an eval follows and every skipped
 * step; the gradient norm is computed only for those steps. What it must not
 * change: the parameters (the same digest as --log-every 1, with and without
 * --clip-grad-norm, which needs the norm every step), the logged steps'
 * losses and norms (the same values, not recomputed another way), and the
 * step graphs (a GPU caches a graph with and one without the norm; both
 * replay). ctr-tiny, fast numerics, one rank, on test_device(). */
#include "test.h"
#include "comm/comm.h"
#include "core/file.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#define STEPS 23
struct step_line {
    int seen;
    double loss, norm; /* norm NAN: null */
    int skipped;
    long iv; /* interval_steps: the steps the line stands for */
};

/* ctr-tiny for STEPS steps with --log-every `every` and `extra` option pairs
 * (NULL-terminated); the step lines of its metrics.jsonl by step (1-based). */
static int run_ctr(const char *tag, const char *every, const char *const *extra, struct step_line *lines,
                   struct train_result *tr)
{
    plumb_err e = {0};
    char out[1024];
    snprintf(out, sizeof out, "%s/log_every_%s", test_tmpdir(), tag);
    if (file_mkdirs(out, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    struct train_config cfg;
    train_config_defaults(&cfg, workload_find("ctr"));
    char steps[16];
    snprintf(steps, sizeof steps, "%d", STEPS);
    const char *words[] = {"--preset", "ctr-tiny", "--device", test_device(), "--steps", steps, "--batch", "256",
                           "--train-samples", "4096", "--eval-samples", "512", "--eval-every", "10", "--log-every",
                           every, "--threads", "1", "--health-interval", "0", "--quiet", NULL, NULL};
    for (int pass = 0; pass < 2; pass++) {
        const char *const *w = pass ? extra : words;
        for (int i = 0; w && w[i]; i += 2) {
            if (train_option_set(&cfg, w[i], w[i + 1], &e)) {
                CHECK_MSG(0, "%s: %s", w[i], e.msg);
                return -1;
            }
        }
    }
    if (train_config_finish(&cfg, &e)) {
        CHECK_MSG(0, "train_config_finish: %s", e.msg);
        return -1;
    }
    cfg.out_dir = out;
    cfg.progress = 0;
    struct comm *c = NULL;
    if (comm_init("self", &c, &e)) {
        CHECK_MSG(0, "comm_init: %s", e.msg);
        return -1;
    }
    int rc = trainer_run(&cfg, c, tr, &e);
    comm_finalize(c);
    if (rc == PLUMB_EDEVICE || rc == PLUMB_EUNSUPPORTED) {
        snprintf(test_skip_reason, sizeof test_skip_reason, "%s", e.msg);
        test_skipped_now = 1;
        return -1;
    }
    CHECK_MSG(rc == 0, "%s: trainer_run: %s", tag, e.msg);
    if (rc) return -1;
    char mpath[1100], *text = NULL;
    size_t len = 0;
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", out);
    if (file_read_all(mpath, &text, &len, &e)) {
        CHECK_MSG(0, "%s", e.msg);
        return -1;
    }
    memset(lines, 0, sizeof(struct step_line) * (STEPS + 1));
    int bad = 0;
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        json_t *j = json_loads(l, 0, NULL);
        const char *ty = j ? json_string_value(json_object_get(j, "type")) : NULL;
        if (ty && !strcmp(ty, "step")) {
            const long s = (long)json_integer_value(json_object_get(j, "step"));
            if (s < 1 || s > STEPS || lines[s].seen) bad++;
            else {
                json_t *n = json_object_get(j, "grad_norm"), *lo = json_object_get(j, "loss");
                lines[s].seen = 1;
                lines[s].loss = json_is_number(lo) ? json_number_value(lo) : NAN;
                lines[s].norm = json_is_number(n) ? json_number_value(n) : NAN;
                lines[s].skipped = json_is_true(json_object_get(j, "skipped"));
                lines[s].iv = (long)json_integer_value(json_object_get(j, "interval_steps"));
            }
        }
        json_decref(j);
    }
    free(text);
    CHECK_MSG(bad == 0, "%s: %d step lines out of range or repeated", tag, bad);
    return bad ? -1 : 0;
}

static int same_num(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

/* every: N; want[s] = 1 for the steps that must have a line (1-based) */
static void case_every(const char *tag, const char *every, const char *const *extra, const int *want_steps)
{
    struct step_line all[STEPS + 1], some[STEPS + 1];
    struct train_result ta, ts;
    char t1[64];
    snprintf(t1, sizeof t1, "%s_all", tag);
    if (run_ctr(t1, "1", extra, all, &ta) || run_ctr(tag, every, extra, some, &ts)) return;
    CHECK_MSG(!strcmp(ta.param_digest, ts.param_digest), "%s: --log-every %s changed the parameters: %.16s, every step %.16s",
              tag, every, ts.param_digest, ta.param_digest);
    int want[STEPS + 1] = {0};
    for (int i = 0; want_steps[i]; i++) want[want_steps[i]] = 1;
    int missing = 0, extra_lines = 0, differ = 0, unlogged_all = 0;
    long iv_all = 0, iv_some = 0, prev = 0, iv_wrong = 0;
    for (int s = 1; s <= STEPS; s++) {
        unlogged_all += !all[s].seen;
        iv_all += all[s].iv;
        if (some[s].seen) {
            /* the line stands for the steps since the previous line */
            iv_some += some[s].iv;
            iv_wrong += some[s].iv != s - prev;
            prev = s;
        }
        if (want[s] && !some[s].seen) {
            if (missing++ < 3) fprintf(stderr, "  %s: no line for step %d\n", tag, s);
        } else if (!want[s] && some[s].seen) {
            if (extra_lines++ < 3) fprintf(stderr, "  %s: a line for step %d\n", tag, s);
        } else if (some[s].seen && (!same_num(some[s].loss, all[s].loss) || !same_num(some[s].norm, all[s].norm))) {
            if (differ++ < 3)
                fprintf(stderr, "  %s step %d: loss %.9g norm %.9g, every step: %.9g %.9g\n", tag, s, some[s].loss,
                        some[s].norm, all[s].loss, all[s].norm);
        }
        /* a logged step that trained has its norm (skipped ones: null) */
        if (some[s].seen && !some[s].skipped && isnan(some[s].norm)) differ++;
    }
    CHECK_MSG(unlogged_all == 0, "%s: --log-every 1 left %d steps without a line", tag, unlogged_all);
    CHECK_MSG(missing == 0 && extra_lines == 0, "%s: %d logged steps missing, %d lines for other steps", tag, missing,
              extra_lines);
    CHECK_MSG(differ == 0, "%s: %d logged steps' loss or norm differ from --log-every 1's (or lack a norm)", tag, differ);
    CHECK_MSG(iv_all == STEPS && iv_some == STEPS && iv_wrong == 0,
              "%s: interval_steps add up to %ld (every step) and %ld (--log-every %s), %ld lines with another count "
              "than the steps since the line before; expected %d",
              tag, iv_all, iv_some, every, iv_wrong, STEPS);
    CHECK_MSG(ts.steps_done == STEPS, "%s: %ld steps done", tag, ts.steps_done);
    fprintf(stderr, "  %s: digest %.16s both ways, %ld of %d steps graphed\n", tag, ts.param_digest, ts.graphed_steps,
            STEPS);
}

/* every 7th, the first (1), evals after 10 and 20, the last (23) */
TEST(log_every_lines_and_same_parameters)
{
    const int want[] = {1, 7, 10, 14, 20, 21, 23, 0};
    case_every("plain", "7", NULL, want);
}

/* clipping needs the norm every step: the same parameters either way */
TEST(log_every_with_clipping)
{
    const char *clip[] = {"--clip-grad-norm", "0.05", NULL};
    const int want[] = {1, 10, 11, 20, 22, 23, 0};
    case_every("clip", "11", clip, want);
}

/* a skipped step (--skip-batches 4: the fifth) has its line anyway */
TEST(log_every_skipped_step_has_a_line)
{
    const char *skip[] = {"--skip-batches", "4", NULL};
    const int want[] = {1, 5, 9, 10, 18, 20, 23, 0};
    case_every("skip", "9", skip, want);
}

/* the option's range: 0 and negatives are refused naming it */
TEST(log_every_zero_refused)
{
    struct train_config cfg;
    plumb_err e = {0};
    train_config_defaults(&cfg, workload_find("ctr"));
    CHECK(train_option_set(&cfg, "--log-every", "0", &e) != 0);
    CHECK_MSG(strstr(e.msg, "--log-every") != NULL, "%s", e.msg);
    CHECK(train_option_set(&cfg, "--log-every", "-3", &e) != 0);
}
