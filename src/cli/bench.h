/* plumb bench workloads (cmd_bench.c dispatches): each is
 * `int bench_<name>(int argc, char **argv)` with argv[0] the workload name,
 * returning the process exit code like a command. */
#ifndef PLUMB_BENCH_H
#define PLUMB_BENCH_H

struct bench_workload {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
};

int bench_ceilings(int argc, char **argv);
int bench_ctr(int argc, char **argv);
int bench_resnet(int argc, char **argv);
int bench_gpt(int argc, char **argv);

/* The PLUMB_* settings the benchmark runs under (bench_env.c): printed as one
 * line to print_to (NULL: not printed), returned as a JSON object. */
#include <jansson.h>
#include <stdio.h>
json_t *bench_env(FILE *print_to);

/* The untimed steps of a benchmark cycling nb device batches: warmup, and on
 * a device with graphs at least 2 nb, so each batch's step graph (captured at
 * its second step: train/trainer.c) exists before the timed steps. */
#include "dev/dev.h"
static inline long bench_warm_steps(const struct dev *d, long warmup, int nb)
{
    return d->be->graph_begin && warmup < 2L * nb ? 2L * nb : warmup;
}

/* The step split (bench gpt, bench resnet; bench_split.c). Where the
 * trainer can mark the device's time inside a step (trainer_phase_marks:
 * dev.h's event_mark, and a model that calls forward_done), forward and
 * backward are device time between those marks, graphed or not, and the
 * gradient checks and norm after the backward are in neither. Elsewhere the
 * forward is timed alone, op by op, and the backward is the step's compute
 * phase less it; where those steps were replayed as one graph that
 * difference would mix a graph with op-by-op launches (resnet152 bf16/64 on
 * an H100: a 27 ms forward alone against a 33 ms graphed whole), so the
 * split gives only the whole: forward and backward NaN, printed "-", null
 * in JSON. */
#include <math.h>
struct bench_split {
    double fwd_ms, bwd_ms; /* NaN: no split */
    double fb_ms;          /* the trainer's compute phase: forward and backward together */
    double comm_ms, opt_ms;
    int graphed;           /* the timed steps were graph replays */
    int marked;            /* fwd_ms, bwd_ms from the trainer's marks */
};
struct trainer;
struct batch;
/* Runs `steps` more training steps from *step (advanced), each timed apart
 * with a synchronisation, and fills s; first, with the marks, untimed steps
 * (bench_warm_steps over nb batches, at least one) so the step graphs are
 * captured again with them, and the marks dropped when that step had no
 * split. next(ctx, step) gives each step's device batch of `global_valid`
 * samples. */
int bench_split_run(struct trainer *tr, long *step, long steps, long global_valid, int nb,
                    struct batch (*next)(void *ctx, long step), void *ctx, struct bench_split *s, plumb_err *e);
/* a table cell of w characters: the milliseconds, or "-" */
static inline const char *bench_ms_cell(char *buf, size_t n, int w, double ms)
{
    if (isfinite(ms)) snprintf(buf, n, "%*.2f", w, ms);
    else snprintf(buf, n, "%*s", w, "-");
    return buf;
}
static inline json_t *bench_ms_json(double ms) { return isfinite(ms) ? json_real(ms) : json_null(); }
/* where a row's forward / backward came from, for the JSON */
static inline const char *bench_split_from(const struct bench_split *s)
{
    return s->marked ? "device marks" : isfinite(s->fwd_ms) ? "forward timed alone" : "none (one graph replay)";
}
/* the note under a table where some row has no forward / backward split */
static inline void bench_split_note(int any_unsplit)
{
    if (any_unsplit)
        printf("fwd and bwd \"-\": the step ran as one graph replay and the device or model cannot mark the "
               "forward's end inside it, so it has no split; the JSON's forward_backward_ms is the two together\n");
}

#endif
