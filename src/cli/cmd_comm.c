/* plumb comm: collective bandwidth as nccl-tests reports it, with an exact
 * correctness check (accept/comm_check.h), over the comm interface: MPI on
 * host buffers, NCCL/RCCL on GPU buffers. Under mpirun/srun every rank runs
 * it; rank 0 prints the table and writes the run folder. */
#include "accept/comm_check.h"
#include "accept/comm_thresholds.h"
#include "accept/topology.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "comm/comm.h"
#include "core/hostinfo.h"
#include "core/log.h"
#include "core/watchdog.h"
#include "dev/dev.h"
#include "report/results.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int parse_inject(const char *s, struct comm_check_opts *o, plumb_err *e)
{
    if (!s) return PLUMB_OK;
    const char *at = strchr(s, '@');
    char *end = NULL;
    long r = at ? strtol(at + 1, &end, 10) : -1;
    if (!at || end == at + 1 || *end || r < 0 || r > 1 << 20)
        return err_set(e, PLUMB_EUSAGE, "--inject: '%s' is not corrupt@RANK or hang@RANK", s);
    if (!strncmp(s, "corrupt@", 8)) o->corrupt_rank = (int)r;
    else if (!strncmp(s, "hang@", 5)) o->hang_rank = (int)r;
    else return err_set(e, PLUMB_EUSAGE, "--inject: '%s' is not corrupt@RANK or hang@RANK", s);
    return PLUMB_OK;
}

static int parse_ops(const char *s, unsigned *colls, plumb_err *e)
{
    char buf[256], *items[16];
    int n = args_split_list(s, buf, sizeof buf, items, 16);
    *colls = 0;
    if (n <= 0) return err_set(e, PLUMB_EUSAGE, "--ops: '%s' is not a comma list of collectives", s);
    for (int i = 0; i < n; i++) {
        if (!strcmp(items[i], "all")) {
            *colls = (1u << COMM_COLL_N) - 1;
            continue;
        }
        int c = comm_coll_parse(items[i]);
        if (c < 0)
            return err_set(e, PLUMB_EUSAGE, "--ops: '%s' is not one of allreduce, allgather, reduce-scatter, broadcast, "
                           "reduce, alltoall, all", items[i]);
        *colls |= 1u << c;
    }
    return PLUMB_OK;
}

static int parse_dtypes(const char *s, struct comm_check_opts *o, plumb_err *e)
{
    char buf[256], *items[16];
    int n = args_split_list(s, buf, sizeof buf, items, 16);
    o->ndtypes = 0;
    if (n <= 0) return err_set(e, PLUMB_EUSAGE, "--dtype: '%s' is not a comma list of dtypes", s);
    static const struct {
        const char *name;
        dtype_t t;
    } names[] = {{"fp32", DT_F32},  {"float", DT_F32},    {"bf16", DT_BF16}, {"bfloat16", DT_BF16}, {"fp16", DT_F16},
                 {"half", DT_F16},  {"int64", DT_I64},    {"i64", DT_I64},   {"fp64", DT_F64},      {"double", DT_F64},
                 {"int32", DT_I32}, {"i32", DT_I32}};
    for (int i = 0; i < n; i++) {
        if (!strcmp(items[i], "all")) {
            dtype_t four[] = {DT_F32, DT_BF16, DT_F16, DT_I64};
            for (int k = 0; k < 4 && o->ndtypes < COMM_CHECK_MAX_DTYPES; k++) o->dtypes[o->ndtypes++] = four[k];
            continue;
        }
        int found = -1;
        for (size_t k = 0; k < sizeof names / sizeof names[0] && found < 0; k++)
            if (!strcmp(items[i], names[k].name)) found = (int)names[k].t;
        if (found < 0)
            return err_set(e, PLUMB_EUSAGE, "--dtype: '%s' is not one of fp32, bf16, fp16, int64 (also fp64, int32, all)",
                           items[i]);
        if (o->ndtypes >= COMM_CHECK_MAX_DTYPES) return err_set(e, PLUMB_EUSAGE, "--dtype: too many dtypes");
        o->dtypes[o->ndtypes++] = (dtype_t)found;
    }
    return PLUMB_OK;
}

/* nccl-tests' "#  Rank  0 Group  0 Pid ... on HOST device 0 [bus] NAME" lines, gathered on rank 0 */
static int print_ranks(struct comm *host, const char *devdesc, plumb_err *e)
{
    char line[256], hn[64] = "?";
    gethostname(hn, sizeof hn - 1);
    int n = snprintf(line, sizeof line, "#  Rank %3d Pid %7d on %s device %s", host->rank, (int)getpid(), hn, devdesc);
    void *all = NULL;
    size_t total = 0;
    int rc = comm_allgatherv_alloc(host, line, (size_t)n + 1, &all, &total, NULL, "comm: rank table", e);
    if (rc) return rc;
    if (host->rank == 0)
        for (size_t off = 0; off < total; off += strlen((char *)all + off) + 1) printf("%s\n", (char *)all + off);
    free(all);
    return PLUMB_OK;
}

/* After a failed arrival: the reporter ends the job; the others wait for
 * that, bounded by the watchdog. */
static void end_broken_job(struct comm *host, const struct comm_check_outcome *out)
{
    if (out->reporter) comm_abort(host, 1);
    watchdog_enter("waiting for the lowest live rank to end the job after a missing rank");
    for (;;) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
}

/* An error after comm_init: what this rank opened is released (the comm,
 * the device, the watchdog), so nothing leaks. A usage error is seen by every
 * rank alike, and on one rank nobody waits, so each finalizes. Any other
 * error on several ranks may have left the others inside a collective: this
 * rank returns without finalizing and leaves the ending to each rank's own
 * deadline and the watchdog, which name the missing rank (an abort here would
 * pre-empt them: the others would see "remote process exited" instead). */
static int comm_fail(struct comm *host, struct comm *c, struct dev *d, const plumb_err *e)
{
    const int code = cli_fail("comm", e);
    if (host->world > 1 && e->code != PLUMB_EUSAGE) return code;
    watchdog_stop();
    if (c && c != host) comm_finalize(c);
    if (d) dev_close(d);
    comm_finalize(host);
    return code;
}

int cmd_comm(int argc, char **argv)
{
    const char *minb = NULL, *maxb = NULL, *stepb = NULL, *ops = NULL, *dtypes = NULL, *redop = NULL, *device = NULL;
    const char *comm_kind = NULL, *transport = NULL, *thr_file = NULL, *sku = NULL, *inject = NULL, *out = NULL;
    const char *topo_xml = NULL, *timing = NULL;
    long warmup = 5, iters = 20, check = 1, root = 0, seed = 20;
    double factor = 2, timeout = 60, min_busbw = 0, min_avg = 0;
    int topology = 0;
    static const char *usage = "plumb comm [options]   (under mpirun/srun: every rank)";
    static const char *summary =
        "Collective bandwidth as nccl-tests reports it, with an exact correctness check. Sweeps sizes -b..-e (times\n"
        "-f, or plus -i when -f is 1) for each collective and dtype asked for, out of place and in place, and prints\n"
        "nccl-tests' columns: size, count, type, redop, root, then time (us), algbw and busbw (GB/s = 1e9 B/s) and\n"
        "#wrong for each placement. algbw = size / time; busbw = algbw x 2(n-1)/n (allreduce), (n-1)/n (allgather,\n"
        "reduce-scatter, alltoall), 1 (broadcast, reduce). Inputs are small integers, exact in any summation order, so\n"
        "any wrong element fails the check, named by rank, offset, expected and got. --device cpu: MPI on host\n"
        "buffers; cuda|hip: NCCL/RCCL on device buffers, one GPU per local rank. A rank that does not arrive\n"
        "within --timeout is named and the job fails. --topology prints GPUs, NUMA, NICs and links with binding\n"
        "advice instead. Exit 0 pass, 1 a check failed, 2 bad arguments, 124 a collective hung (watchdog).";
    const struct opt opts[] = {
        {"-b", OPT_STR, &minb, "8", "smallest size, bytes (K, M, G suffixes: powers of 1024)", NULL, "SIZE"},
        {"-e", OPT_STR, &maxb, "64M", "largest size", NULL, "SIZE"},
        {"-f", OPT_DOUBLE, &factor, "2", "size factor between steps (1: add -i instead)", NULL, "X"},
        {"-i", OPT_STR, &stepb, "1M", "size increment when -f is 1", NULL, "SIZE"},
        {"-w", OPT_INT, &warmup, "5", "warm-up iterations before every timed batch", "0..100000", "N"},
        {"-n", OPT_INT, &iters, "20", "timed iterations per size and placement", "1..10000000", "N"},
        {"-c", OPT_INT, &check, "1", "check the data (1) or only time (0)", "0..1", "0|1"},
        {"--timing", OPT_CHOICE, &timing, "loop",
         "loop: -n calls back to back, time / n (nccl-tests); each: every call timed alone, a barrier between (OSU)",
         "loop|each", NULL},
        {"--ops", OPT_STR, &ops, "allreduce", "collectives: allreduce, allgather, reduce-scatter, broadcast, reduce, alltoall, all",
         NULL, "LIST"},
        {"--dtype", OPT_STR, &dtypes, "fp32", "dtypes: fp32, bf16, fp16, int64 (also fp64, int32; all = the first four)", NULL,
         "LIST"},
        {"--redop", OPT_CHOICE, &redop, "sum", "reduction of allreduce, reduce, reduce-scatter", "sum|max|min", NULL},
        {"--root", OPT_INT, &root, "0", "root rank of broadcast and reduce", "0..1048576", "R"},
        {"--device", OPT_STR, &device, "cpu", "cpu (host buffers), cuda or hip (a GPU per local rank), cuda:N / hip:N (one rank)",
         NULL, "D"},
        {"--comm", OPT_CHOICE, &comm_kind, "auto", "host comm: auto (mpi under a launcher, else self), mpi, self", "auto|mpi|self",
         NULL},
        {"--transport", OPT_CHOICE, &transport, "auto",
         "GPU buffers: nccl (NCCL/RCCL), host (staged through host memory), auto (nccl when it loads)", "auto|nccl|host", NULL},
        {"--timeout", OPT_DOUBLE, &timeout, "60",
         "seconds: a rank later than this is named and the job fails; NCCL waits are aborted after 0.8 S; a collective "
         "still blocked at S ends the process (watchdog, exit 124)", NULL, "S"},
        {"--min-busbw", OPT_DOUBLE, &min_busbw, "0",
         "fail when busbw at the largest size (out of place or in place) of any sweep is below X GB/s (0 = off)", NULL, "X"},
        {"--min-avg-busbw", OPT_DOUBLE, &min_avg, "0",
         "nccl-tests' NCCL_TESTS_MIN_BW: fail when a sweep's mean busbw over every row is below 0.9 X (0 = off)", NULL, "X"},
        {"--thresholds", OPT_STR, &thr_file, NULL, "per-SKU threshold file read over the built-in one (docs/COMM.md)", NULL, "FILE"},
        {"--sku", OPT_STR, &sku, NULL, "match threshold sections against this name instead of the device's", NULL, "NAME"},
        {"--seed", OPT_INT, &seed, "20", "seed of the check inputs", "0..", "N"},
        {"--inject", OPT_STR, &inject, NULL, "test only: corrupt@R (rank R flips a bit it received) or hang@R (rank R never arrives)",
         NULL, "WHAT"},
        {"--out", OPT_STR, &out, NULL, "run folder for results.json and report.html (rank 0)", NULL, "DIR"},
        {"--topology", OPT_FLAG, &topology, NULL, "print GPUs, NUMA nodes, CPUs, nearest NICs, the GPU link matrix and binding advice",
         NULL, NULL},
        {"--topology-xml", OPT_STR, &topo_xml, NULL, "--topology from an hwloc XML file (lstopo --of xml) instead of this machine",
         NULL, "FILE"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("comm", &e);
    if (topology || topo_xml) {
        rc = topology_print(stdout, topo_xml, &e);
        return rc ? cli_fail("comm", &e) : 0;
    }
    struct comm_check_opts o;
    comm_check_opts_default(&o);
    if ((rc = comm_parse_bytes(minb, "-b", &o.min_bytes, &e)) || (rc = comm_parse_bytes(maxb, "-e", &o.max_bytes, &e)) ||
        (rc = comm_parse_bytes(stepb, "-i", &o.step_bytes, &e)) || (rc = parse_ops(ops, &o.colls, &e)) ||
        (rc = parse_dtypes(dtypes, &o, &e)) || (rc = parse_inject(inject, &o, &e)))
        return cli_fail("comm", &e);
    if (o.min_bytes < 1 || o.max_bytes < o.min_bytes) {
        err_set(&e, PLUMB_EUSAGE, "-b %s -e %s: expected 1 <= -b <= -e", minb, maxb);
        return cli_fail("comm", &e);
    }
    if (factor < 1 || (factor == 1 && o.step_bytes < 1)) {
        err_set(&e, PLUMB_EUSAGE, "-f %g: expected > 1, or 1 with -i > 0", factor);
        return cli_fail("comm", &e);
    }
    if (!(timeout > 0) || !(min_busbw >= 0) || !(min_avg >= 0)) {
        if (!(timeout > 0)) err_set(&e, PLUMB_EUSAGE, "--timeout %g: expected seconds > 0", timeout);
        else err_set(&e, PLUMB_EUSAGE, "%s %g: expected GB/s >= 0 (0 = off)", !(min_busbw >= 0) ? "--min-busbw" : "--min-avg-busbw",
                     !(min_busbw >= 0) ? min_busbw : min_avg);
        return cli_fail("comm", &e);
    }
    o.step_factor = factor;
    o.warmup = (int)warmup;
    o.iters = (int)iters;
    o.check = (int)check;
    o.time_each = !strcmp(timing, "each");
    o.op = !strcmp(redop, "max") ? COMM_MAX : !strcmp(redop, "min") ? COMM_MIN : COMM_SUM;
    o.root = (int)root;
    o.seed = (unsigned long long)seed;
    o.timeout_s = timeout;
    o.min_busbw = min_busbw;
    o.min_avg_busbw = min_avg;
    int gpu = strncmp(device, "cpu", 3) != 0;
    if (!gpu && strcmp(device, "cpu")) {
        err_set(&e, PLUMB_EUSAGE, "--device: '%s' is not cpu, cuda, hip, cuda:N or hip:N", device);
        return cli_fail("comm", &e);
    }
    if (gpu && strncmp(device, "cuda", 4) && strncmp(device, "hip", 3)) {
        err_set(&e, PLUMB_EUSAGE, "--device: '%s' is not cpu, cuda, hip, cuda:N or hip:N", device);
        return cli_fail("comm", &e);
    }

    /* every collective, the rank table and the exchanges under the watchdog */
    watchdog_start(timeout);
    struct comm *host = NULL, *c = NULL;
    if (comm_init(comm_kind, &host, &e)) return cli_fail("comm", &e);
    struct dev *d = NULL;
    char devdesc[200];
    const char *skuname = sku;
    if (gpu) {
        char spec[32];
        if (strchr(device, ':')) {
            if (host->world > 1) {
                err_set(&e, PLUMB_EUSAGE, "--device %s names one GPU, but there are %d ranks (give --device %.*s: a GPU per "
                        "local rank)", device, host->world, (int)strcspn(device, ":"), device);
                return comm_fail(host, c, d, &e);
            }
            snprintf(spec, sizeof spec, "%s", device);
        } else if (dev_spec_for_local_rank(device, host->local_rank, host->local_world, spec, &e)) {
            return comm_fail(host, c, d, &e);
        }
        if (dev_open(spec, &d, &e)) return comm_fail(host, c, d, &e);
        /* NCCL's own deadline comes first, so a hang inside NCCL is a named,
         * recorded failure (communicator aborted) before the watchdog ends
         * the process */
        if (comm_open_device(host, d, transport, 0.8 * timeout, &c, &e)) return comm_fail(host, c, d, &e);
        snprintf(devdesc, sizeof devdesc, "%s [%s]", d->label, d->info.name);
        if (!skuname) skuname = d->info.name;
    } else {
        c = host;
        const char *model = hostinfo_cpu_model(hostinfo_this());
        snprintf(devdesc, sizeof devdesc, "cpu [%s]", model && *model ? model : "host memory");
        if (!skuname) skuname = model;
    }
    struct comm_thresholds thr;
    if (comm_thresholds_resolve(thr_file, skuname, &thr, &e)) return comm_fail(host, c, d, &e);
    o.thr = &thr;
    int r0 = host->rank == 0;
    if (r0) {
        char lo[32], hi[32];
        snprintf(lo, sizeof lo, "%zu", o.min_bytes);
        snprintf(hi, sizeof hi, "%zu", o.max_bytes);
        printf("# plumb comm: minBytes %s maxBytes %s step: %g%s warmup iters: %d iters: %d validation: %d timeout: %.0f s\n",
               lo, hi, factor > 1 ? factor : (double)o.step_bytes, factor > 1 ? "(factor)" : "(bytes)", o.warmup, o.iters,
               o.check, timeout);
        printf("# transport: %s\n", c->desc);
    }
    if (print_ranks(host, devdesc, &e)) return comm_fail(host, c, d, &e);
    fflush(stdout);

    struct results res;
    int have_res = 0;
    if (r0 && out) {
        char cmdline[1024];
        args_command_line(argc, argv, cmdline, sizeof cmdline);
        if (results_open(&res, out, cmdline, &e)) return comm_fail(host, c, d, &e);
        have_res = 1;
    }
    o.table = r0 ? stdout : NULL;
    struct check_ctx ctx = {.run_dir = have_res ? res.dir : NULL, .device = d ? d->label : "cpu", .level = "standard"};
    struct check_result r;
    struct comm_check_outcome oc;
    rc = check_comm_run(&ctx, host, c, &o, &r, &oc, &e);
    if (rc) {
        if (have_res) results_close(&res);
        return comm_fail(host, c, d, &e);
    }
    if (oc.broken) log_error("comm: %s", json_string_value(json_object_get(r.obj, "reason")));
    int failed = r.status == CHECK_FAIL;
    if (r0) {
        printf("#\n# comm: %s: %s\n", check_status_name(r.status), json_string_value(json_object_get(r.obj, "reason")));
        if (have_res) {
            results_add_check(&res, &r);
            if (d) results_add_device(&res, d);
            if (results_write(&res, &e)) {
                results_close(&res);
                check_free(&r);
                return comm_fail(host, c, d, &e);
            }
            printf("results: %s/results.json\n", res.dir);
            results_close(&res);
        }
    }
    fflush(stdout);
    check_free(&r);
    if (oc.broken) end_broken_job(host, &oc); /* does not return */
    if (c != host) comm_finalize(c);
    if (d) dev_close(d);
    watchdog_stop();
    comm_finalize(host);
    return failed ? 1 : 0;
}
