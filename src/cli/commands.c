#include "cli/commands.h"
#include <stddef.h>

/* Alphabetical; add a line per new cmd_<name>.c. */
const struct command plumb_commands[] = {
    {"accept", "accept this platform: run the checks at a level, write a run folder and report", cmd_accept},
    {"attribute", "the attribution ladder: K seeds per rung, golden -> strict fp32 -> vendor defaults -> bf16 -> fp16", cmd_attribute},
    {"bench", "throughput: device ceilings (copy bandwidth, GEMM TFLOP/s), ctr/resnet/gpt training speed, vs PyTorch", cmd_bench},
    {"comm", "collective bandwidth (nccl-tests' algbw/busbw) and exact correctness over MPI or NCCL/RCCL; --topology", cmd_comm},
    {"compare", "two run folders (or devices, or per-seed metric files) side by side: digests, parity verdict, ladder", cmd_compare},
    {"data", "dataset utilities: synth-criteo, synth-cifar, synth-tokens (synthetic data as files), cache (a Criteo file parsed once)", cmd_data},
    {"doctor", "preflight checklist: host, libraries, GPU plugins, risky environment variables", cmd_doctor},
    {"faults", "fault drills: rank kill, hang, OOM, NaN, corrupt checkpoint, SIGTERM under plumb launch + mpirun", cmd_faults},
    {"health", "device health table, thresholds and alerts, Prometheus exporter", cmd_health},
    {"launch", "supervise a command (mpirun ... plumb train): restart it on failure", cmd_launch},
    {"numerics", "every numerics op vs float64, determinism, golden digests", cmd_numerics},
    {"report", "re-render report.html from a run folder's results.json; keygen, sign, verify: signed run folders", cmd_report},
    {"rng", "Philox streams: known answers, KS tests, digests, histograms", cmd_rng},
    {"train", "train a reference workload (ctr, gpt, resnet, toy) on 1..N ranks: fast or golden, fp32/bf16/fp16, checkpoints", cmd_train},
    {"version", "print the version and build configuration", cmd_version},
    {NULL, NULL, NULL},
};
