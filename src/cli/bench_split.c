/* The step split of bench gpt and bench resnet (bench.h): each step timed
 * apart, its forward and backward from the trainer's phase marks where the
 * device and model give them, else from a forward timed alone. */
#include "cli/bench.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "train/model.h"
#include "train/trainer.h"

int bench_split_run(struct trainer *tr, long *step, long steps, long global_valid, int nb,
                    struct batch (*next)(void *ctx, long step), void *ctx, struct bench_split *s, plumb_err *e)
{
    struct dev *d = trainer_dev(tr);
    struct model *m;
    const struct model_ops *mo = trainer_model(tr, &m);
    struct trainer_step_stats ss;
    /* the marks, and untimed steps so the batches' step graphs are captured
     * again with them (trainer_phase_marks drops the old ones); at least one,
     * to learn whether this trainer's steps give a split at all (a model
     * without forward_done, golden numerics' shards): if not, the marks go
     * and the forward is timed alone */
    plumb_err me = {0};
    int marks = trainer_phase_marks(tr, 1, &me) == PLUMB_OK;
    int rc = PLUMB_OK;
    const long w = marks ? bench_warm_steps(d, 1, nb) : 0;
    for (long i = 0; i < w && !rc; i++, (*step)++) {
        struct batch b = next(ctx, *step);
        rc = trainer_step_on(tr, &b, *step, global_valid, &ss, e);
    }
    if (!rc) rc = dev_sync(d, e);
    if (!rc && marks) {
        double f, bw;
        rc = trainer_phase_ms(tr, &f, &bw, e);
        if (!rc && !isfinite(f)) {
            marks = 0;
            rc = trainer_phase_marks(tr, 0, e);
        }
    }
    double tf = 0, tfb = 0, tc = 0, to = 0, mf = 0, mb = 0;
    long g0 = 0, g1 = 0, n_marked = 0;
    trainer_step_kinds(tr, NULL, &g0);
    for (long i = 0; i < steps && !rc; i++, (*step)++) {
        struct batch b = next(ctx, *step);
        const double a = timer_now();
        /* the forward alone only where the marks cannot split the step */
        if (!marks && mo->forward) rc = mo->forward(m, &b, e);
        if (!rc) rc = dev_sync(d, e);
        const double b1 = timer_now();
        if (!rc) rc = trainer_step_on(tr, &b, *step, global_valid, &ss, e);
        if (!rc) rc = dev_sync(d, e);
        const double e1 = timer_now();
        double f = NAN, bw = NAN;
        if (!rc && marks) rc = trainer_phase_ms(tr, &f, &bw, e);
        if (isfinite(f) && isfinite(bw)) mf += f, mb += bw, n_marked++;
        tf += b1 - a;
        tfb += ss.compute_s;
        tc += ss.comm_s;
        to += (e1 - b1) - ss.compute_s - ss.comm_s;
    }
    trainer_step_kinds(tr, NULL, &g1);
    if (marks) {
        plumb_err oe = {0};
        int orc = trainer_phase_marks(tr, 0, &oe);
        if (!rc && orc) rc = orc, *e = oe;
    }
    const double ns = (double)steps;
    s->graphed = g1 > g0;
    s->fb_ms = 1e3 * tfb / ns;
    /* every timed step split by its marks, or none: a mean over some would
     * not be the step's; without marks, the forward that ran alone where the
     * step did not run as one graph */
    s->marked = marks && n_marked == steps;
    const int alone = !marks && !s->graphed && mo->forward;
    s->fwd_ms = s->marked ? mf / ns : alone ? 1e3 * tf / ns : NAN;
    s->bwd_ms = s->marked ? mb / ns : alone ? 1e3 * (tfb - tf) / ns : NAN;
    s->comm_ms = 1e3 * tc / ns;
    s->opt_ms = 1e3 * to / ns;
    return rc;
}
