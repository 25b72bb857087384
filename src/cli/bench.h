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

#endif
