/* The step split of bench gpt and bench resnet (cli/bench_split.c) and the
 * trainer's phase marks under it (trainer_phase_marks, model.h's
 * forward_done, dev.h's event_mark), on test_device(): gpt-tiny in fast
 * numerics, so on a device with graphs the timed steps are graph replays.
 *   - the split comes from the marks, forward and backward both positive
 *     and together within the step's compute phase, graphed or not;
 *   - each mark was recorded by the step just run and not by an earlier one
 *     (a mark captured as a plain record would keep an older time): a
 *     reference event recorded before the step precedes the first mark, and
 *     one recorded after it follows the last;
 *   - no split where the step is not one forward_backward (golden numerics'
 *     shards) or the marks are off;
 *   - the table cells and JSON of a split and of none. */
#include "test.h"
#include "cli/bench.h"
#include "comm/comm.h"
#include "core/philox.h"
#include "dev/dev.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <math.h>
#include <string.h>

#define NB 4
#define BATCH 4
#define SEQ 64

struct fixture {
    struct train_config cfg; /* the trainer keeps a pointer to it */
    struct comm *c;
    struct trainer *tr;
    struct dev *d;
    int32_t *dt[NB][2]; /* tokens, targets: [BATCH * SEQ] each */
    int32_t h[NB][2][BATCH * SEQ]; /* the same on the host */
    int host;                      /* next_batch gives the host's */
};

static struct batch next_batch(void *ctx, long step)
{
    struct fixture *f = ctx;
    if (f->host)
        return (struct batch){.B = BATCH, .n_valid = BATCH, .field = {f->h[step % NB][0], f->h[step % NB][1]}};
    return (struct batch){.B = BATCH, .n_valid = BATCH, .on_device = 1,
                          .field = {f->dt[step % NB][0], f->dt[step % NB][1]}};
}

static int fixture_open(struct fixture *f, const char *numerics, plumb_err *e)
{
    memset(f, 0, sizeof *f);
    struct train_config *cfg = &f->cfg;
    train_config_defaults(cfg, workload_find("gpt"));
    const char *words[] = {"--preset", "gpt-tiny", "--device", test_device(), "--numerics", numerics, "--batch", "4",
                           "--steps", "200", "--warmup", "0", "--schedule", "constant", "--train-samples", "256",
                           "--eval-samples", "8", "--micro-shard", "4", "--comm", "self", "--watchdog-timeout", "0",
                           "--health-interval", "0", "--quiet", NULL, NULL};
    int rc = 0;
    for (int i = 0; words[i] && !rc; i += 2) rc = train_option_set(cfg, words[i], words[i + 1], e);
    if (!rc) rc = train_config_finish(cfg, e);
    if (!rc) rc = comm_init("self", &f->c, e);
    if (!rc) rc = trainer_open(cfg, f->c, &f->tr, e);
    if (rc) return rc;
    f->d = trainer_dev(f->tr);
    for (int i = 0; i < NB && !rc; i++) {
        int32_t (*h)[BATCH * SEQ] = f->h[i];
        for (int k = 0; k <= BATCH * SEQ; k++) {
            const int32_t v = (int32_t)(philox_u32_at(5, RNG_DATA, 3, (uint32_t)i, (uint64_t)k) % 256u);
            if (k < BATCH * SEQ) h[0][k] = v;
            if (k > 0) h[1][k - 1] = v;
        }
        for (int j = 0; j < 2 && !rc; j++) {
            rc = dev_alloc(f->d, sizeof h[j], (void **)&f->dt[i][j], e);
            if (!rc) rc = dev_upload(f->d, f->dt[i][j], h[j], sizeof h[j], e);
        }
    }
    return rc;
}

static void fixture_close(struct fixture *f)
{
    for (int i = 0; i < NB; i++)
        for (int j = 0; j < 2; j++)
            if (f->dt[i][j]) dev_free(f->d, f->dt[i][j]);
    trainer_close(f->tr);
    comm_finalize(f->c);
}

TEST(bench_split_from_the_marks_graphed_or_not)
{
    struct fixture f;
    plumb_err e = {0};
    REQUIRE_MSG(fixture_open(&f, "fast", &e) == 0, "%s", e.msg);
    long step = 0;
    struct bench_split s;
    memset(&s, 0, sizeof s);
    const int rc = bench_split_run(f.tr, &step, 6, BATCH, NB, next_batch, &f, &s, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK_MSG(s.marked, "the split did not come from the marks (%s)", bench_split_from(&s));
    /* where the device has graphs the timed steps were replays */
    if (f.d->be->graph_begin) CHECK(s.graphed);
    CHECK_MSG(s.fwd_ms > 0 && s.bwd_ms > 0, "forward %g ms, backward %g ms", s.fwd_ms, s.bwd_ms);
    /* device time inside the compute phase's host interval (a sync ends it) */
    CHECK_MSG(s.fwd_ms + s.bwd_ms <= s.fb_ms * 1.001 + 1e-3, "forward %g + backward %g ms > compute %g ms", s.fwd_ms,
              s.bwd_ms, s.fb_ms);
    CHECK_STREQ(bench_split_from(&s), "device marks");
    /* bench_split_run leaves the marks off */
    double fw, bw;
    struct trainer_step_stats ss;
    struct batch b = next_batch(&f, step);
    CHECK(trainer_step_on(f.tr, &b, step, BATCH, &ss, &e) == 0 && dev_sync(f.d, &e) == 0);
    step++;
    CHECK(trainer_phase_ms(f.tr, &fw, &bw, &e) == 0 && isnan(fw) && isnan(bw));
    fixture_close(&f);
}

TEST(bench_split_marks_belong_to_the_last_step)
{
    struct fixture f;
    plumb_err e = {0};
    REQUIRE_MSG(fixture_open(&f, "fast", &e) == 0, "%s", e.msg);
    REQUIRE_MSG(trainer_phase_marks(f.tr, 1, &e) == 0, "%s", e.msg);
    dev_event *ref[2] = {NULL, NULL};
    REQUIRE(f.d->be->event_create(f.d, &ref[0], &e) == 0 && f.d->be->event_create(f.d, &ref[1], &e) == 0);
    struct trainer_step_stats ss;
    long graphed0 = 0, graphed1 = 0;
    for (long step = 0; step < 3 * NB; step++) {
        if (step == 2 * NB) trainer_step_kinds(f.tr, NULL, &graphed0); /* each batch captured by now */
        struct batch b = next_batch(&f, step);
        int rc = f.d->be->event_record(f.d, ref[0], NULL, &e);
        if (!rc) rc = trainer_step_on(f.tr, &b, step, BATCH, &ss, &e);
        if (!rc) rc = f.d->be->event_record(f.d, ref[1], NULL, &e);
        if (!rc) rc = dev_sync(f.d, &e);
        REQUIRE_MSG(rc == 0, "step %ld: %s", step, e.msg);
        double fw, bw;
        REQUIRE(trainer_phase_ms(f.tr, &fw, &bw, &e) == 0);
        CHECK_MSG(fw > 0 && bw > 0, "step %ld: forward %g ms, backward %g ms", step, fw, bw);
        float before = -1, after = -1;
        REQUIRE(f.d->be->event_elapsed_ms(f.d, ref[0], trainer_phase_event(f.tr, 0), &before, &e) == 0);
        REQUIRE(f.d->be->event_elapsed_ms(f.d, trainer_phase_event(f.tr, 2), ref[1], &after, &e) == 0);
        CHECK_MSG(before >= 0 && after >= 0, "step %ld: the marks are not this step's (%g ms after the step's start, "
                  "%g ms before its end)", step, before, after);
    }
    trainer_step_kinds(f.tr, NULL, &graphed1);
    if (f.d->be->graph_begin) CHECK_MSG(graphed1 - graphed0 == NB, "%ld of the last %d steps were replays", graphed1 - graphed0, NB);
    f.d->be->event_destroy(f.d, ref[0]);
    f.d->be->event_destroy(f.d, ref[1]);
    fixture_close(&f);
}

TEST(bench_split_none_for_golden_shards_or_marks_off)
{
    struct fixture f;
    plumb_err e = {0};
    REQUIRE_MSG(fixture_open(&f, "golden", &e) == 0, "%s", e.msg);
    f.host = 1; /* golden numerics take host batches (the trainer shards them) */
    REQUIRE(trainer_phase_marks(f.tr, 1, &e) == 0);
    struct trainer_step_stats ss;
    struct batch b = next_batch(&f, 0);
    REQUIRE_MSG(trainer_step_on(f.tr, &b, 0, BATCH, &ss, &e) == 0 && dev_sync(f.d, &e) == 0, "%s", e.msg);
    double fw = 0, bw = 0;
    CHECK(trainer_phase_ms(f.tr, &fw, &bw, &e) == 0 && isnan(fw) && isnan(bw));
    /* the split then falls back to a forward timed alone (no graphs in golden numerics) */
    long step = 1;
    struct bench_split s;
    CHECK_MSG(bench_split_run(f.tr, &step, 2, BATCH, NB, next_batch, &f, &s, &e) == 0, "%s", e.msg);
    CHECK_MSG(!s.marked && !s.graphed && s.fwd_ms > 0 && isfinite(s.bwd_ms), "marked %d graphed %d forward %g",
              s.marked, s.graphed, s.fwd_ms);
    CHECK_STREQ(bench_split_from(&s), "forward timed alone");
    /* a forward that really ran alone: a real share of the step, not a bare synchronisation */
    CHECK_MSG(s.fwd_ms > 0.1 * s.fb_ms, "forward %g ms of a %g ms step", s.fwd_ms, s.fb_ms);
    fixture_close(&f);
}

TEST(bench_split_cells_and_json)
{
    struct bench_split s = {.fwd_ms = 20.0, .bwd_ms = NAN, .fb_ms = 50.0};
    char c[24];
    CHECK_MSG(!strcmp(bench_ms_cell(c, sizeof c, 8, s.fwd_ms), "   20.00"), "cell '%s'", c);
    CHECK_MSG(!strcmp(bench_ms_cell(c, sizeof c, 8, s.bwd_ms), "       -"), "cell '%s'", c);
    json_t *j = bench_ms_json(s.fwd_ms);
    CHECK(j && json_is_real(j) && fabs(json_real_value(j) - 20.0) < 1e-9);
    json_decref(j);
    j = bench_ms_json(s.bwd_ms);
    CHECK(j && json_is_null(j));
    json_decref(j);
    s.fwd_ms = NAN;
    CHECK_STREQ(bench_split_from(&s), "none (one graph replay)");
}
