/* plumb doctor: a preflight checklist of this host. One row per fact
 * (OS, kernel, CPU, NUMA, memory, compiler, BLAS, MPI, JSON library, GPU
 * plugins and devices) and one per environment variable that changes
 * numerics or communication, each pass/warn/fail with a reason. Rows go to
 * details.rows ([{"item","value","status","reason"}]); the check's status is
 * the worst row and its reason that row's. */
#include "accept/checks.h"
#include "core/jsonx.h"
#include "dev/dev.h"
#include "health/health.h"
#include "report/sysinfo.h"
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

struct doc {
    struct check_result *r;
    json_t *rows;
    int n[4];
};

static void row(struct doc *d, const char *item, enum check_status st, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void row(struct doc *d, const char *item, enum check_status st, const char *value, const char *fmt, ...)
{
    char reason[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    char v[256];
    snprintf(v, sizeof v, "%s", value ? value : "");
    if (value && strlen(value) >= sizeof v) strcpy(v + sizeof v - 4, "...");
    json_array_append_new(d->rows, json_pack("{s:s, s:s, s:s, s:s}", "item", item, "value", v, "status",
                                             check_status_name(st), "reason", reason));
    d->n[st]++;
    if (st == CHECK_WARN || st == CHECK_FAIL) check_set_status(d->r, st, "%s: %s", item, reason);
}

/* "4" or "4,2" (OpenMP nested lists): the first number; -1 when not a positive integer. */
static long first_positive(const char *v)
{
    if (!v || !isdigit((unsigned char)*v)) return -1;
    char *end;
    long n = strtol(v, &end, 10);
    if (n <= 0 || (*end && *end != ',')) return -1;
    return n;
}

static int is_true(const char *v) { return v && *v && strcmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "no") && strcasecmp(v, "off"); }

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* CUBLAS_WORKSPACE_CONFIG: one or more ":SIZE_KIB:COUNT" pairs. */
static int valid_workspace_config(const char *v)
{
    if (!*v) return 0;
    while (*v) {
        for (int part = 0; part < 2; part++) {
            if (*v++ != ':') return 0;
            if (!isdigit((unsigned char)*v)) return 0;
            while (isdigit((unsigned char)*v)) v++;
        }
    }
    return 1;
}

/* The environment rules. Returns 1 when the variable is one doctor knows as
 * changing numerics or communication (a row is added), else 0. */
static int env_rule(struct doc *d, const char *name, const char *v, int cores, int have_cuda)
{
    char item[160];
    snprintf(item, sizeof item, "env %s", name);
    long n;
    /* ---- NVIDIA ---- */
    if (!strcmp(name, "NVIDIA_TF32_OVERRIDE")) {
        if (!strcmp(v, "0"))
            row(d, item, CHECK_WARN, v, "disables TF32 in every NVIDIA library for the whole process: --allow-tf32 and "
                "fast-mode throughput figures will not show TF32");
        else
            row(d, item, CHECK_WARN, v, "changes cuBLAS/cuDNN fp32 math process-wide (only 0 is documented: it disables "
                "TF32); unset it and choose TF32 per run with --allow-tf32");
    } else if (!strcmp(name, "CUBLAS_WORKSPACE_CONFIG")) {
        if (valid_workspace_config(v))
            row(d, item, CHECK_PASS, v, "fixed cuBLAS workspaces per stream: cuBLAS results are reproducible run to run");
        else
            row(d, item, CHECK_FAIL, v, "malformed: expected one or more :SIZE_KIB:COUNT pairs such as :4096:8 "
                "(cuBLAS rejects or ignores anything else)");
    } else if (starts(name, "CUBLASLT_LOG") || starts(name, "CUBLAS_LOG")) {
        row(d, item, strcmp(v, "0") ? CHECK_WARN : CHECK_PASS, v, "%s", strcmp(v, "0") ? "cuBLAS logging is on: every call is slowed" : "logging off");
    } else if (starts(name, "CUBLAS") || starts(name, "CUDNN_")) {
        row(d, item, CHECK_PASS, v, "changes cuBLAS/cuDNN behaviour: check it is intended");
    } else if (!strcmp(name, "CUDA_LAUNCH_BLOCKING")) {
        row(d, item, is_true(v) ? CHECK_WARN : CHECK_PASS, v, "%s",
            is_true(v) ? "every kernel launch waits for completion: throughput figures are meaningless" : "not blocking");
    } else if (!strcmp(name, "CUDA_VISIBLE_DEVICES") || !strcmp(name, "HIP_VISIBLE_DEVICES") ||
               !strcmp(name, "ROCR_VISIBLE_DEVICES") || !strcmp(name, "GPU_DEVICE_ORDINAL")) {
        if (!*v || !strcmp(v, "-1") || !strcasecmp(v, "none") || !strcasecmp(v, "NoDevFiles"))
            row(d, item, CHECK_WARN, v, "hides every GPU of this vendor from plumb");
        else
            row(d, item, CHECK_PASS, v, "limits the GPUs plumb sees to these");
    } else if (!strcmp(name, "CUDA_HOME") || !strcmp(name, "CUDA_PATH")) {
        return 0; /* where the toolkit is: matters to builds, not to runs */
    } else if (starts(name, "CUDA_")) {
        row(d, item, CHECK_PASS, v, "changes the CUDA runtime's behaviour: check it is intended");
    }
    /* ---- NCCL / RCCL ---- */
    else if (!strcmp(name, "NCCL_NVLS_ENABLE")) {
        if (!strcmp(v, "0")) row(d, item, CHECK_PASS, v, "NVLink SHARP off, as these H200 hosts need");
        else row(d, item, CHECK_WARN, v, "NVLink SHARP (NVLS) enabled: keep NCCL_NVLS_ENABLE=0 on the H200 hosts plumb is "
                 "tested on; NVLS also changes the all-reduce summation order");
    } else if (!strcmp(name, "NCCL_DEBUG")) {
        if (!strcasecmp(v, "INFO") || !strcasecmp(v, "TRACE"))
            row(d, item, CHECK_WARN, v, "verbose NCCL logging on every rank: slower start-up and very large logs");
        else row(d, item, CHECK_PASS, v, "NCCL prints warnings only");
    } else if (!strcmp(name, "NCCL_ALGO") || !strcmp(name, "NCCL_PROTO")) {
        row(d, item, CHECK_WARN, v, "forces the collective %s: changes the all-reduce summation order (result bits) "
            "and bandwidth", !strcmp(name, "NCCL_ALGO") ? "algorithm" : "protocol");
    } else if (!strcmp(name, "NCCL_P2P_DISABLE") || !strcmp(name, "NCCL_SHM_DISABLE") ||
               !strcmp(name, "NCCL_IB_DISABLE") || !strcmp(name, "NCCL_NET_GDR_DISABLE") ||
               !strcmp(name, "NCCL_CUMEM_ENABLE")) {
        int off = starts(name + 5, "CUMEM") ? !is_true(v) : is_true(v);
        row(d, item, off ? CHECK_WARN : CHECK_PASS, v, "%s",
            off ? "disables a transport or feature: collectives take a slower path" : "transport left enabled");
    } else if (starts(name, "NCCL_MIN_NCHANNELS") || starts(name, "NCCL_MAX_NCHANNELS") ||
               starts(name, "NCCL_MIN_CTAS") || starts(name, "NCCL_MAX_CTAS") || !strcmp(name, "NCCL_BUFFSIZE")) {
        row(d, item, CHECK_WARN, v, "changes how NCCL splits collectives: bandwidth and summation order change");
    } else if (starts(name, "NCCL_") || starts(name, "RCCL_")) {
        row(d, item, CHECK_PASS, v, "tunes NCCL/RCCL: check it is intended on every node");
    }
    /* ---- AMD ---- */
    else if (!strcmp(name, "HSA_OVERRIDE_GFX_VERSION")) {
        row(d, item, CHECK_WARN, v, "makes the runtime treat the GPU as another ISA: kernels built for that target "
            "may compute wrong results or fault");
    } else if (!strcmp(name, "HSA_ENABLE_SDMA")) {
        row(d, item, CHECK_PASS, v, "%s", !strcmp(v, "0") ? "copies by shader kernels instead of SDMA engines (a known "
            "workaround)" : "SDMA copy engines in use");
    } else if (starts(name, "HSA_")) {
        row(d, item, CHECK_PASS, v, "changes the ROCm runtime's behaviour: check it is intended");
    } else if (!strcmp(name, "HIP_LAUNCH_BLOCKING") || !strcmp(name, "AMD_SERIALIZE_KERNEL") ||
               !strcmp(name, "AMD_SERIALIZE_COPY")) {
        row(d, item, is_true(v) ? CHECK_WARN : CHECK_PASS, v, "%s",
            is_true(v) ? "serialises kernels or copies: throughput figures are meaningless" : "not serialising");
    } else if (!strcmp(name, "AMD_LOG_LEVEL") || !strcmp(name, "ROCBLAS_LAYER") ||
               !strcmp(name, "HIPBLASLT_LOG_LEVEL") || !strcmp(name, "MIOPEN_LOG_LEVEL")) {
        int on = is_true(v) && !(starts(name, "MIOPEN") && atoi(v) <= 4);
        row(d, item, on ? CHECK_WARN : CHECK_PASS, v, "%s", on ? "library logging is on: every call is slowed" : "logging off");
    } else if (!strcmp(name, "ROCBLAS_DEFAULT_ATOMICS_MODE")) {
        if (!strcmp(v, "0")) row(d, item, CHECK_PASS, v, "rocBLAS atomics off: GEMM results are reproducible");
        else row(d, item, CHECK_WARN, v, "rocBLAS may use atomics: GEMM results are not bitwise reproducible run to run");
    } else if (starts(name, "MIOPEN_DEBUG_")) {
        row(d, item, CHECK_WARN, v, "disables or forces MIOpen solvers: convolution algorithms (and result bits) differ "
            "from a default install");
    } else if (starts(name, "ROCBLAS_") || starts(name, "HIPBLASLT_") || starts(name, "MIOPEN_") || starts(name, "HIP_") ||
               starts(name, "AMD_") || starts(name, "ROCR_") || starts(name, "GPU_MAX_")) {
        row(d, item, CHECK_PASS, v, "changes ROCm library behaviour: check it is intended");
    }
    /* ---- CPU threads and BLAS ---- */
    else if (!strcmp(name, "OMP_NUM_THREADS") || !strcmp(name, "OPENBLAS_NUM_THREADS") ||
             !strcmp(name, "GOTO_NUM_THREADS") || !strcmp(name, "MKL_NUM_THREADS")) {
        if ((n = first_positive(v)) < 0)
            row(d, item, CHECK_FAIL, v, "not a positive integer: the runtime ignores it or refuses to start");
        else if (n > cores)
            row(d, item, CHECK_WARN, v, "%ld threads on %d usable cores: oversubscribed, slower and noisier timings", n, cores);
        else row(d, item, CHECK_PASS, v, "%ld of %d usable cores", n, cores);
    } else if (!strcmp(name, "OPENBLAS_CORETYPE")) {
        row(d, item, CHECK_WARN, v, "forces OpenBLAS kernels for this CPU type instead of the detected one: BLAS results "
            "and speed differ from a default run");
    } else if (starts(name, "OPENBLAS_") || starts(name, "GOTO_") || starts(name, "MKL_") || starts(name, "OMP_") ||
               starts(name, "GOMP_") || starts(name, "KMP_")) {
        row(d, item, CHECK_PASS, v, "changes CPU threading or BLAS behaviour: check it is intended");
    }
    /* ---- MPI, loader, plumb ---- */
    else if (starts(name, "OMPI_MCA_") || starts(name, "UCX_") || starts(name, "PMIX_MCA_")) {
        row(d, item, CHECK_PASS, v, "MPI/UCX parameter");
    } else if (!strcmp(name, "LD_PRELOAD")) {
        row(d, item, CHECK_WARN, v, "preloaded libraries may replace the BLAS, allocator or MPI plumb measures");
    } else if (starts(name, "PLUMB_")) {
        row(d, item, CHECK_PASS, v, "plumb setting");
    } else {
        return 0;
    }
    (void)have_cuda;
    return 1;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void env_rows(struct doc *d, int cores, int have_cuda)
{
    /* sorted, so the table reads the same every run */
    size_t cnt = 0;
    for (char **p = environ; p && *p; p++) cnt++;
    char **names = calloc(cnt + 1, sizeof *names);
    if (!names) return;
    size_t k = 0;
    for (char **p = environ; p && *p; p++) names[k++] = *p;
    qsort(names, k, sizeof *names, cmp_str);
    int shown = 0, nvls_seen = 0;
    for (size_t i = 0; i < k; i++) {
        const char *eq = strchr(names[i], '=');
        if (!eq) continue;
        char name[128];
        size_t L = (size_t)(eq - names[i]);
        if (L >= sizeof name) continue;
        memcpy(name, names[i], L);
        name[L] = '\0';
        if (!strcmp(name, "NCCL_NVLS_ENABLE")) nvls_seen = 1;
        shown += env_rule(d, name, eq + 1, cores, have_cuda);
    }
    free(names);
    if (have_cuda && !nvls_seen) {
        row(d, "env NCCL_NVLS_ENABLE", CHECK_WARN, "(unset)",
            "unset: NCCL turns NVLink SHARP on where NVSwitch supports it; set NCCL_NVLS_ENABLE=0 on the H200 hosts "
            "plumb is tested on");
        shown++;
    }
    if (!shown)
        row(d, "environment", CHECK_PASS, "", "no variable that changes numerics or communication is set");
}

/* A GPU vendor device node without a working plugin is worth a warning. */
static const char *gpu_node(const char *backend)
{
    static const char *nv[] = {"/dev/nvidiactl", "/dev/nvidia0", NULL};
    static const char *amd[] = {"/dev/kfd", NULL};
    const char **list = !strcmp(backend, "cuda") ? nv : amd;
    for (int i = 0; list[i]; i++)
        if (access(list[i], F_OK) == 0) return list[i];
    return NULL;
}

static int gpu_rows(struct doc *d, const char *backend, json_t *devices)
{
    char item[64];
    snprintf(item, sizeof item, "%s plugin", backend);
    plumb_err e = {0};
    const struct dev_backend *be = dev_backend_get(backend, &e);
    const char *node = gpu_node(backend);
    if (!be) {
        const char *why = strstr(e.msg, "unavailable: ") ? strstr(e.msg, "unavailable: ") + 13 : e.msg;
        int absent = strstr(e.msg, "not found next to the executable") != NULL;
        if (absent && !node)
            row(d, item, CHECK_PASS, "not installed", "no %s GPU device node, so cpu only: %s",
                !strcmp(backend, "cuda") ? "NVIDIA" : "AMD", why);
        else if (absent)
            row(d, item, CHECK_WARN, "not installed", "%s exists but libplumb-%s.so was not found (build it with 'make %s', "
                "or set PLUMB_BACKEND_PATH): %s", node, backend, backend, why);
        else
            row(d, item, node ? CHECK_WARN : CHECK_PASS, "cannot load", "%s%s", node ? "" : "no GPU on this host: ", why);
        return 0;
    }
    int count = 0;
    if (be->device_count(&count, &e) != PLUMB_OK) {
        row(d, item, node ? CHECK_WARN : CHECK_PASS, "loaded, no devices", "%s", e.msg);
        return 0;
    }
    char v[64];
    snprintf(v, sizeof v, "loaded, %d device%s", count, count == 1 ? "" : "s");
    row(d, item, count ? CHECK_PASS : (node ? CHECK_WARN : CHECK_PASS), v, "%s",
        count ? "plugin and driver work" : "the plugin loaded but the driver reports no device");
    int opened = 0;
    for (int i = 0; i < count && i < 64; i++) {
        char spec[32];
        snprintf(spec, sizeof spec, "%s:%d", backend, i);
        struct dev *dv = NULL;
        if (dev_open(spec, &dv, &e) != PLUMB_OK) {
            row(d, spec, CHECK_FAIL, "cannot open", "%s", e.msg);
            continue;
        }
        opened++;
        char val[256];
        snprintf(val, sizeof val, "%s, %s, %.1f GiB, %d units", dv->info.name, dv->info.arch,
                 (double)dv->info.mem_total / (1024.0 * 1024 * 1024), dv->info.compute_units);
        row(d, spec, CHECK_PASS, val, "driver %s; %s", dv->info.driver[0] ? dv->info.driver : "?",
            dv->info.libs[0] ? dv->info.libs : "no library versions reported");
        json_array_append_new(devices, json_pack("{s:s, s:s, s:s, s:s, s:I}", "label", spec, "name", dv->info.name,
                                                 "arch", dv->info.arch, "driver", dv->info.driver, "mem_total_bytes",
                                                 (json_int_t)dv->info.mem_total));
        dev_close(dv);
    }
    return opened;
}

/* GPU facts from the health providers (NVML / ROCm SMI): ECC mode, PCIe link
 * at max, persistence, links up. */
static void health_rows(struct doc *d)
{
    json_t *hr = health_doctor_rows();
    size_t i;
    json_t *x;
    json_array_foreach(hr, i, x) {
        const char *st = jsonx_str(x, "status");
        enum check_status cs = !strcmp(st, "fail") ? CHECK_FAIL : !strcmp(st, "warn") ? CHECK_WARN : CHECK_PASS;
        row(d, jsonx_str(x, "item"), cs, jsonx_str(x, "value"), "%s", jsonx_str(x, "reason"));
    }
    json_decref(hr);
}

int check_doctor_run(const struct check_ctx *ctx, struct check_result *r, plumb_err *e)
{
    (void)ctx;
    if (check_begin(r, "doctor", NULL)) return err_set(e, PLUMB_ENOMEM, "out of memory");
    struct doc d = {.r = r, .rows = json_array()};
    struct sysinfo_host h;
    sysinfo_host_get(&h);
    char v[1024];

    row(&d, "os", h.os[0] ? CHECK_PASS : CHECK_WARN, h.os[0] ? h.os : "unknown", "%s",
        h.os[0] ? "from /etc/os-release" : "no /etc/os-release: distribution unknown");
    row(&d, "kernel", CHECK_PASS, h.kernel, "%s", h.arch);
    snprintf(v, sizeof v, "%s, %d cores", h.cpu_model[0] ? h.cpu_model : "unknown CPU", h.cpus_online);
    if (h.cpus_allowed && h.cpus_allowed < h.cpus_online)
        row(&d, "cpu", CHECK_PASS, v, "this process may use %d of the %d cores (affinity or cgroup)", h.cpus_allowed,
            h.cpus_online);
    else row(&d, "cpu", CHECK_PASS, v, "all %d cores usable", h.cpus_online);
    if (h.numa_nodes > 0) {
        int w = snprintf(v, sizeof v, "%d node%s", h.numa_nodes, h.numa_nodes == 1 ? "" : "s");
        for (int i = 0; i < h.numa_nodes && i < 8 && w < (int)sizeof v - 40; i++)
            w += snprintf(v + w, sizeof v - (size_t)w, "%s node%d: cpus %s", i ? ";" : ",", h.numa_os[i], h.numa_cpus[i]);
        row(&d, "numa", CHECK_PASS, v, "%s",
            h.numa_nodes > 1 ? "bind each rank to the NUMA node of its GPU (mpirun --bind-to numa)" : "one memory node");
    } else {
        row(&d, "numa", CHECK_PASS, "unknown", "hwloc could not read this host's topology: NUMA layout unknown");
    }
    double gib = 1024.0 * 1024 * 1024;
    snprintf(v, sizeof v, "%.1f GiB total, %.1f GiB available", (double)h.mem_total / gib, (double)h.mem_available / gib);
    if (!h.mem_total) row(&d, "memory", CHECK_WARN, "unknown", "cannot read /proc/meminfo");
    else if ((double)h.mem_available < 1.0 * gib)
        row(&d, "memory", CHECK_FAIL, v, "less than 1 GiB available: checks and training will run out of memory");
    else if ((double)h.mem_available < 0.10 * (double)h.mem_total)
        row(&d, "memory", CHECK_WARN, v, "less than 10%% of memory available: other processes are using the host");
    else row(&d, "memory", CHECK_PASS, v, "enough free memory");

    sysinfo_compiler(v, sizeof v);
    row(&d, "compiler", CHECK_PASS, v, "plumb was built with -ffp-contract=off (no implicit fma)");
    sysinfo_blas(v, sizeof v);
    int bt = sysinfo_blas_threads(), cores = h.cpus_allowed ? h.cpus_allowed : (h.cpus_online ? h.cpus_online : 1);
    if (bt > cores)
        row(&d, "blas", CHECK_WARN, v, "%d BLAS threads on %d usable cores: oversubscribed", bt, cores);
    else row(&d, "blas", CHECK_PASS, v, "%d BLAS thread%s", bt, bt == 1 ? "" : "s");
    char hdr[128];
    sysinfo_mpi(v, sizeof v);
    sysinfo_mpi_header(hdr, sizeof hdr);
    {
        int rmaj = -1, rmin = -1, cmaj = -2, cmin = -2;
        const char *p = strstr(v, "Open MPI v");
        if (p) sscanf(p, "Open MPI v%d.%d", &rmaj, &rmin);
        if (!strncmp(hdr, "Open MPI ", 9)) sscanf(hdr, "Open MPI %d.%d", &cmaj, &cmin);
        if (!v[0]) row(&d, "mpi", CHECK_FAIL, "unknown", "MPI_Get_library_version failed");
        else if (p && cmaj >= 0 && (rmaj != cmaj))
            row(&d, "mpi", CHECK_FAIL, v, "plumb was compiled against %s but runs with a different major version: ABI "
                "mismatch", hdr);
        else if (p && cmaj >= 0 && rmin != cmin)
            row(&d, "mpi", CHECK_WARN, v, "compiled against %s, running a different minor version", hdr);
        else row(&d, "mpi", CHECK_PASS, v, "matches the headers plumb was built with (%s)", hdr);
    }
    sysinfo_jansson(v, sizeof v);
    row(&d, "json", CHECK_PASS, v, "results.json writer");

    json_t *devices = json_array();
    int ncuda = gpu_rows(&d, "cuda", devices);
    gpu_rows(&d, "hip", devices);
    env_rows(&d, cores, ncuda > 0);
    health_rows(&d);

    check_metric(r, "cores", h.cpus_online, "");
    check_metric(r, "numa_nodes", h.numa_nodes, "");
    check_metric(r, "mem_total", (double)h.mem_total / gib, "GiB");
    check_metric(r, "mem_available", (double)h.mem_available / gib, "GiB");
    check_metric(r, "gpu_devices", (double)json_array_size(devices), "");
    check_metric(r, "rows_warn", d.n[CHECK_WARN], "");
    check_metric(r, "rows_fail", d.n[CHECK_FAIL], "");
    check_threshold(r, "mem_available_min_gib", 1.0);
    check_detail(r, "rows", d.rows);
    check_detail(r, "gpu_devices", devices);
    if (r->status == CHECK_PASS)
        check_set_status(r, CHECK_PASS, "%zu rows, all pass", json_array_size(d.rows));
    check_end(r);
    return PLUMB_OK;
}
