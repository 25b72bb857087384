/* plumb bench WORKLOAD [options]: throughput measurements that print a table
 * and write JSON. Each workload is one row of g_workloads; add a line (and a
 * bench_<name>.c) for a new one. */
#include "cli/commands.h"
#include "cli/bench.h"
#include <stdio.h>
#include <string.h>

static const struct bench_workload g_workloads[] = {
    {"ceilings", "device ceilings: D2D copy bandwidth and GEMM TFLOP/s per precision vs datasheet peaks",
     bench_ceilings},
    {"ctr", "DLRM training samples/s per precision and batch, step split, memory, leak check, vs PyTorch", bench_ctr},
    {"resnet", "ResNet training images/s per precision and batch, step split, memory, leak check, vs PyTorch",
     bench_resnet},
    {"gpt", "GPT-2 training tokens/s, model TFLOP/s and MFU, step split, peak memory, vs PyTorch", bench_gpt},
    {NULL, NULL, NULL},
};

static void bench_usage(FILE *f)
{
    fprintf(f, "usage: plumb bench WORKLOAD [options]\n\nMeasures throughput; prints a table and writes JSON "
               "(--json). Timing lives here, never in tests.\n\nworkloads:\n");
    for (const struct bench_workload *w = g_workloads; w->name; w++) fprintf(f, "  %-10s %s\n", w->name, w->summary);
    fprintf(f, "\nRun 'plumb bench WORKLOAD --help' for its options and their defaults.\n");
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        bench_usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        bench_usage(stdout);
        return 0;
    }
    for (const struct bench_workload *w = g_workloads; w->name; w++)
        if (!strcmp(argv[1], w->name)) return w->run(argc - 1, argv + 1);
    fprintf(stderr, "plumb bench: unknown workload '%s' (expected one of:", argv[1]);
    for (const struct bench_workload *w = g_workloads; w->name; w++) fprintf(stderr, " %s", w->name);
    fprintf(stderr, ")\n");
    return 2;
}
