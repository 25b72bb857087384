/* kprof: a kernel-time profiler for any CUDA program, loaded by the driver
 * through CUDA_INJECTION64_PATH (no change to the program, no stream
 * synchronisation added). It records CUPTI activity (kernels, memcpys,
 * memsets) with device timestamps and, at exit, prints per kernel name:
 * calls, total ms, mean us, share of the recorded GPU time. Used to see
 * where a training step's time goes (plumb's PLUMB_TRAIN_PROF times ops
 * between synchronisations, which inflates short ops; this does not).
 *
 *   CUDA_INJECTION64_PATH=build/libplumb-kprof.so [KPROF_OUT=file] \
 *   [KPROF_TOP=40] [KPROF_AFTER_S=seconds] plumb bench ctr ...
 *
 * KPROF_AFTER_S drops activity that starts less than that many seconds
 * after the first recorded one (warm-up, plan searches). KPROF_SEQ=N also
 * prints the last N kept records in start order, each with its grid and
 * block and its own time: one step's timeline, where the per-name table
 * cannot tell a layer's call from another's (a model's calls come in a
 * fixed order, so position in the step names the layer). The table goes to
 * KPROF_OUT (default stderr; %p in it becomes the process id). Needs libcupti.so.13 on the library path.
 * Built by `make kprof` (bench tool, not part of plumb). */
#include <cupti.h>
#include <cxxabi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <map>
#include <string>
#include <vector>
#include <algorithm>

namespace {

struct agg {
    long calls = 0;
    double ns = 0;
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
std::map<std::string, agg> *g_by_name;
uint64_t g_first = 0, g_last = 0; /* device ns of the kept records */
uint64_t g_t0 = 0;                 /* first record seen at all */
double g_after_ns = 0;
int g_reported = 0;

/* the KPROF_SEQ timeline: a ring of the last g_seq_n kept records */
struct rec {
    uint64_t start, end;
    unsigned grid[3], block[3];
    std::string name;
};
std::vector<rec> *g_seq;
size_t g_seq_n = 0, g_seq_at = 0;

#define CUPTI_OK(call)                                                                     \
    do {                                                                                   \
        CUptiResult r_ = (call);                                                           \
        if (r_ != CUPTI_SUCCESS) {                                                         \
            const char *s_ = "?";                                                          \
            cuptiGetResultString(r_, &s_);                                                 \
            fprintf(stderr, "kprof: %s failed: %s\n", #call, s_);                          \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

std::string short_name(const char *mangled)
{
    int st = 0;
    char *d = abi::__cxa_demangle(mangled, nullptr, nullptr, &st);
    std::string s = st == 0 && d ? d : mangled;
    free(d);
    /* drop the argument list of plain functions; keep template arguments
     * (cuBLAS kernels are told apart by them) but cut them short */
    size_t par = s.find('(');
    if (par != std::string::npos) s.resize(par);
    if (s.size() > 110) s = s.substr(0, 107) + "...";
    return s;
}

void keep(const std::string &name, uint64_t start, uint64_t end, const unsigned *grid = nullptr,
          const unsigned *block = nullptr)
{
    if (!g_t0 || start < g_t0) g_t0 = start;
    if ((double)(start - g_t0) < g_after_ns) return;
    if (g_seq_n) {
        rec r{start, end, {0, 0, 0}, {0, 0, 0}, name};
        for (int i = 0; i < 3; i++) r.grid[i] = grid ? grid[i] : 0, r.block[i] = block ? block[i] : 0;
        if (g_seq->size() < g_seq_n) g_seq->push_back(r);
        else (*g_seq)[g_seq_at++ % g_seq_n] = r;
    }
    agg &a = (*g_by_name)[name];
    a.calls++;
    a.ns += (double)(end - start);
    if (!g_first || start < g_first) g_first = start;
    if (end > g_last) g_last = end;
}

void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *size = 8u << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    *max_records = 0;
}

void CUPTIAPI buf_completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid)
{
    CUpti_Activity *rec = nullptr;
    pthread_mutex_lock(&g_lock);
    while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            auto *k = (CUpti_ActivityKernel10 *)rec;
            const unsigned grid[3] = {(unsigned)k->gridX, (unsigned)k->gridY, (unsigned)k->gridZ};
            const unsigned block[3] = {(unsigned)k->blockX, (unsigned)k->blockY, (unsigned)k->blockZ};
            keep(short_name(k->name), k->start, k->end, grid, block);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            auto *m = (CUpti_ActivityMemcpy6 *)rec;
            static const char *kinds[] = {"?", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
            char nm[64];
            snprintf(nm, sizeof nm, "[memcpy %s]", m->copyKind < 11 ? kinds[m->copyKind] : "?");
            keep(nm, m->start, m->end);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            auto *m = (CUpti_ActivityMemset4 *)rec;
            keep("[memset]", m->start, m->end);
            break;
        }
        default:
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    free(buf);
}

void report(void)
{
    if (g_reported) return;
    g_reported = 1;
    cuptiActivityFlushAll(1);
    pthread_mutex_lock(&g_lock);
    /* KPROF_OUT may hold %p (the process id): a program and its children */
    std::string path = getenv("KPROF_OUT") ? getenv("KPROF_OUT") : "";
    size_t pp = path.find("%p");
    if (pp != std::string::npos) path.replace(pp, 2, std::to_string((long)getpid()));
    FILE *f = !path.empty() ? fopen(path.c_str(), "w") : stderr;
    if (!f) f = stderr;
    std::vector<std::pair<std::string, agg>> v(g_by_name->begin(), g_by_name->end());
    std::sort(v.begin(), v.end(), [](const auto &a, const auto &b) { return a.second.ns > b.second.ns; });
    double total = 0;
    for (auto &p : v) total += p.second.ns;
    double span = g_last > g_first ? (double)(g_last - g_first) : 0;
    const char *tp = getenv("KPROF_TOP");
    size_t top = tp ? (size_t)atol(tp) : 40;
    fprintf(f, "\nkprof: %zu names, GPU busy %.3f ms in a span of %.3f ms (%.1f%%)\n", v.size(), total / 1e6,
            span / 1e6, span > 0 ? 100.0 * total / span : 0.0);
    fprintf(f, "%10s %12s %10s %6s  %s\n", "calls", "total ms", "mean us", "share", "name");
    for (size_t i = 0; i < v.size() && i < top; i++)
        fprintf(f, "%10ld %12.3f %10.2f %5.1f%%  %s\n", v[i].second.calls, v[i].second.ns / 1e6,
                v[i].second.ns / 1e3 / (double)v[i].second.calls, 100.0 * v[i].second.ns / total,
                v[i].first.c_str());
    if (g_seq_n && !g_seq->empty()) {
        /* records arrive per buffer, not strictly in start order */
        std::vector<rec> q(*g_seq);
        std::sort(q.begin(), q.end(), [](const rec &a, const rec &b) { return a.start < b.start; });
        fprintf(f, "\nkprof: the last %zu records in start order (gap: idle us before it)\n", q.size());
        fprintf(f, "%6s %10s %8s %18s %14s  %s\n", "#", "us", "gap", "grid", "block", "name");
        for (size_t i = 0; i < q.size(); i++) {
            const double gap = i ? ((double)q[i].start - (double)q[i - 1].end) / 1e3 : 0.0;
            char gr[48], bl[48];
            snprintf(gr, sizeof gr, "%u,%u,%u", q[i].grid[0], q[i].grid[1], q[i].grid[2]);
            snprintf(bl, sizeof bl, "%u,%u,%u", q[i].block[0], q[i].block[1], q[i].block[2]);
            fprintf(f, "%6zu %10.2f %8.2f %18s %14s  %s\n", i, (double)(q[i].end - q[i].start) / 1e3, gap, gr, bl,
                    q[i].name.c_str());
        }
    }
    if (f != stderr) fclose(f);
    pthread_mutex_unlock(&g_lock);
}

} // namespace

extern "C" int InitializeInjection(void)
{
    g_by_name = new std::map<std::string, agg>();
    const char *a = getenv("KPROF_AFTER_S");
    g_after_ns = a ? atof(a) * 1e9 : 0;
    const char *sq = getenv("KPROF_SEQ");
    g_seq_n = sq ? (size_t)atol(sq) : 0;
    g_seq = new std::vector<rec>();
    CUPTI_OK(cuptiActivityRegisterCallbacks(buf_requested, buf_completed));
    CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    atexit(report);
    return 1;
}
