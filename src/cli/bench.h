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

/* The step split's forward and backward (bench gpt, bench resnet): the
 * forward is timed alone, op by op, and the backward is the step's forward
 * and backward less it. Where the timed steps were replayed as one graph
 * (train/trainer.c: forward and backward deferred and captured together)
 * that difference mixes a graph with op-by-op launches (resnet152 bf16/64 on
 * an H100: a 27 ms forward alone against a 33 ms graphed whole), so the split
 * gives only the whole: forward and backward NaN, printed "-", null in JSON. */
#include <math.h>
struct bench_split {
    double fwd_ms, bwd_ms; /* NaN where graphed */
    double fb_ms;          /* forward and backward together */
    int graphed;
};
static inline void bench_split_set(struct bench_split *s, double fwd_s, double fb_s, double steps, int graphed)
{
    s->graphed = graphed;
    s->fb_ms = 1e3 * fb_s / steps;
    s->fwd_ms = graphed ? NAN : 1e3 * fwd_s / steps;
    s->bwd_ms = graphed ? NAN : 1e3 * (fb_s - fwd_s) / steps;
}
/* a table cell of w characters: the milliseconds, or "-" */
static inline const char *bench_ms_cell(char *buf, size_t n, int w, double ms)
{
    if (isfinite(ms)) snprintf(buf, n, "%*.2f", w, ms);
    else snprintf(buf, n, "%*s", w, "-");
    return buf;
}
static inline json_t *bench_ms_json(double ms) { return isfinite(ms) ? json_real(ms) : json_null(); }
/* the note under a table whose rows include a graphed split */
static inline void bench_split_note(int any_graphed)
{
    if (any_graphed)
        printf("fwd and bwd \"-\": the step ran as one graph replay (forward and backward captured together), "
               "so it has no split; the JSON's forward_backward_ms is the two together\n");
}

#endif
