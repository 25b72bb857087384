/* ROCm SMI provider: librocm_smi64.so.{7,6,5,1} by dlopen (PLUMB_RSMI_LIB
 * overrides), our declarations in health/rsmi_api.h. Units are converted to
 * the sample's: millidegrees -> C, microwatts -> W, bytes -> MiB, Hz -> MHz,
 * microjoules -> mJ. ECC counts are summed over the blocks that have ECC
 * enabled (ROCm SMI keeps cumulative per-block counts, no volatile/aggregate
 * split: they are reported as aggregate). Throttle reasons come from the GPU
 * metrics table (ASIC-independent bits from content revision 3; older tables
 * only carry the ASIC-specific word, reported raw). xGMI: peers reached over
 * an XGMI link in one hop. */
#include "health/health.h"
#include "health/rsmi_api.h"
#include "core/log.h"
#include "core/dynlib.h"
#include "core/timer.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rsmi_state {
    struct dynlib lib;
    struct rsmi_api f;
    int major; /* library major version: rsmi_frequencies_t layout */
    uint32_t ndev;
};

#define S(field, req) DYNLIB_SYM(struct rsmi_api, field, "rsmi_" #field, NULL, req)
static const struct dynlib_sym syms[] = {
    S(init, 1), S(shut_down, 1), S(status_string, 1), S(version_get, 0), S(num_monitor_devices, 1),
    S(dev_name_get, 1), S(dev_unique_id_get, 0), S(dev_temp_metric_get, 1), S(dev_power_get, 0),
    S(dev_power_ave_get, 0), S(dev_power_cap_get, 1), S(dev_energy_count_get, 0), S(dev_busy_percent_get, 1),
    S(dev_memory_busy_percent_get, 0), S(dev_memory_usage_get, 1), S(dev_memory_total_get, 1),
    S(dev_gpu_clk_freq_get, 1), S(dev_gpu_metrics_info_get, 0), S(dev_ecc_enabled_get, 1),
    S(dev_ecc_count_get, 1), S(dev_memory_reserved_pages_get, 0), S(dev_pci_bandwidth_get, 0),
    S(dev_pci_replay_counter_get, 0), S(topo_get_link_type, 0),
};
#undef S

static const char *rs_err(struct rsmi_state *st, rsmi_status_t_ r)
{
    const char *s = NULL;
    if (st->f.status_string && st->f.status_string(r, &s) == RSMI_OK && s) return s;
    return "unknown ROCm SMI error";
}

static void rsmi_free(struct rsmi_state *st, int initialised)
{
    if (!st) return;
    if (st->lib.handle) {
        if (initialised && st->f.shut_down) st->f.shut_down();
        dynlib_close(&st->lib);
    }
    free(st);
}

static int rsmi_open(struct health_provider *p, plumb_err *e)
{
    struct rsmi_state *st = calloc(1, sizeof *st);
    if (!st) return err_set(e, PLUMB_ENOMEM, "rocm-smi: out of memory");
    const char *env = getenv("PLUMB_RSMI_LIB");
    static const char *const cands[] = {"librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5",
                                        "librocm_smi64.so.1", "/opt/rocm/lib/librocm_smi64.so.7",
                                        "/opt/rocm/lib/librocm_smi64.so.6", "/opt/rocm/lib/librocm_smi64.so.5",
                                        "/opt/rocm/lib/librocm_smi64.so.1"};
    /* Without the amdgpu kernel driver rsmi_init fails anyway, after printing
     * noise of its own: skip it quietly (unless a library is named). */
    if ((!env || !*env) && access("/dev/kfd", F_OK) != 0) {
        free(st);
        return err_set(e, PLUMB_EUNSUPPORTED, "rocm-smi: no amdgpu driver (/dev/kfd absent)");
    }
    int rc = dynlib_open(&st->lib, "rocm-smi", env, cands, sizeof cands / sizeof cands[0], e);
    if (!rc) rc = dynlib_resolve(&st->lib, "rocm-smi", syms, sizeof syms / sizeof syms[0], &st->f, e);
    if (rc) {
        rsmi_free(st, 0);
        return rc;
    }
    if (!st->f.dev_power_get && !st->f.dev_power_ave_get) {
        int rc = err_set(e, PLUMB_EDEVICE, "rocm-smi: %s has neither rsmi_dev_power_get nor rsmi_dev_power_ave_get", st->lib.path);
        rsmi_free(st, 0);
        return rc;
    }
    rsmi_status_t_ r = st->f.init(0);
    if (r != RSMI_OK) {
        int rc = err_set(e, PLUMB_EUNSUPPORTED, "rocm-smi: rsmi_init failed: %s (%d)", rs_err(st, r), r);
        rsmi_free(st, 0);
        return rc;
    }
    rsmi_version_t_ ver = {0, 0, 0, NULL};
    st->major = st->f.version_get && st->f.version_get(&ver) == RSMI_OK ? (int)ver.major : 5;
    if ((r = st->f.num_monitor_devices(&st->ndev)) != RSMI_OK) {
        int rc = err_set(e, PLUMB_EDEVICE, "rocm-smi: rsmi_num_monitor_devices failed: %s", rs_err(st, r));
        rsmi_free(st, 1);
        return rc;
    }
    if (st->ndev == 0) {
        rsmi_free(st, 1);
        return err_set(e, PLUMB_EUNSUPPORTED, "rocm-smi: no AMD GPU");
    }
    if (st->ndev > HEALTH_MAX_DEVICES) st->ndev = HEALTH_MAX_DEVICES;
    p->state = st;
    p->ndev = (int)st->ndev;
    return PLUMB_OK;
}

/* Current clock in MHz from rsmi_dev_gpu_clk_freq_get, either layout. */
static int freq_current_mhz(struct rsmi_state *st, uint32_t dv, int clk, double *mhz)
{
    union {
        rsmi_freqs5_t f5;
        rsmi_freqs6_t f6;
    } u;
    memset(&u, 0, sizeof u);
    if (st->f.dev_gpu_clk_freq_get(dv, clk, &u) != RSMI_OK) return 0;
    uint32_t n = st->major >= 6 ? u.f6.num_supported : u.f5.num_supported;
    uint32_t c = st->major >= 6 ? u.f6.current : u.f5.current;
    if (n == 0 || c >= n || c >= RSMI_MAX_FREQS) return 0;
    *mhz = (double)(st->major >= 6 ? u.f6.frequency[c] : u.f5.frequency[c]) / 1e6;
    return 1;
}

/* PCIe generation from a transfer rate in T/s (2.5G, 5G, 8G, 16G, 32G, 64G). */
static int gen_of_rate(double gts)
{
    static const double rates[] = {2.5, 5, 8, 16, 32, 64};
    int g = 0;
    for (int i = 0; i < 6; i++)
        if (gts >= rates[i] * 0.99) g = i + 1;
    return g;
}

static int rsmi_sample(struct health_provider *p, struct health_sample *out, int max, int *n, plumb_err *e)
{
    struct rsmi_state *st = p->state;
    unsigned char *mbuf = malloc(RSMI_METRICS_BUF);
    if (!mbuf) return err_set(e, PLUMB_ENOMEM, "rocm-smi: out of memory");
    for (uint32_t dv = 0; dv < st->ndev; dv++) {
        if (*n >= max) {
            free(mbuf);
            return err_set(e, PLUMB_EINTERNAL, "rocm-smi: more than %d devices", max);
        }
        struct health_sample *s = &out[(*n)++];
        memset(s, 0, sizeof *s);
        snprintf(s->device, sizeof s->device, "amd%u", dv);
        snprintf(s->vendor, sizeof s->vendor, "amd");
        s->kind = HEALTH_GPU;
        s->index = (int)dv;
        s->time = timer_wall();
        if (st->f.dev_name_get(dv, s->name, sizeof s->name) != RSMI_OK) s->name[0] = 0;
        uint64_t u64 = 0;
        if (st->f.dev_unique_id_get && st->f.dev_unique_id_get(dv, &u64) == RSMI_OK)
            snprintf(s->uuid, sizeof s->uuid, "0x%016llx", (unsigned long long)u64);
        int64_t t = 0;
        if (st->f.dev_temp_metric_get(dv, RSMI_TEMP_EDGE, RSMI_TEMP_CURRENT_, &t) == RSMI_OK) hs_set(s, HQ_TEMP, t / 1000.0);
        if (st->f.dev_temp_metric_get(dv, RSMI_TEMP_JUNCTION, RSMI_TEMP_CURRENT_, &t) == RSMI_OK)
            hs_set(s, HQ_TEMP_HOTSPOT, t / 1000.0);
        if (st->f.dev_temp_metric_get(dv, RSMI_TEMP_MEMORY, RSMI_TEMP_CURRENT_, &t) == RSMI_OK)
            hs_set(s, HQ_MEM_TEMP, t / 1000.0);
        /* MI200 boards report no edge sensor: junction stands in for the main temperature */
        if (!s->ok[HQ_TEMP] && s->ok[HQ_TEMP_HOTSPOT]) hs_set(s, HQ_TEMP, s->v[HQ_TEMP_HOTSPOT]);
        int ptype = 0;
        if (st->f.dev_power_get && st->f.dev_power_get(dv, &u64, &ptype) == RSMI_OK) hs_set(s, HQ_POWER, u64 / 1e6);
        else if (st->f.dev_power_ave_get && st->f.dev_power_ave_get(dv, 0, &u64) == RSMI_OK) hs_set(s, HQ_POWER, u64 / 1e6);
        if (st->f.dev_power_cap_get(dv, 0, &u64) == RSMI_OK) hs_set(s, HQ_POWER_LIMIT, u64 / 1e6);
        float res = 0;
        uint64_t ts = 0;
        if (st->f.dev_energy_count_get && st->f.dev_energy_count_get(dv, &u64, &res, &ts) == RSMI_OK)
            hs_set(s, HQ_ENERGY, (double)u64 * res / 1000.0);
        uint32_t u32 = 0;
        if (st->f.dev_busy_percent_get(dv, &u32) == RSMI_OK) hs_set(s, HQ_UTIL_GPU, u32);
        if (st->f.dev_memory_busy_percent_get && st->f.dev_memory_busy_percent_get(dv, &u32) == RSMI_OK)
            hs_set(s, HQ_UTIL_MEM, u32);
        if (st->f.dev_memory_usage_get(dv, RSMI_MEM_VRAM, &u64) == RSMI_OK) hs_set(s, HQ_MEM_USED, (double)(u64 >> 20));
        if (st->f.dev_memory_total_get(dv, RSMI_MEM_VRAM, &u64) == RSMI_OK) hs_set(s, HQ_MEM_TOTAL, (double)(u64 >> 20));
        double mhz;
        if (freq_current_mhz(st, dv, RSMI_CLK_SYS, &mhz)) hs_set(s, HQ_CLK_SM, mhz);
        if (freq_current_mhz(st, dv, RSMI_CLK_MEM, &mhz)) hs_set(s, HQ_CLK_MEM, mhz);
        memset(mbuf, 0, RSMI_METRICS_BUF);
        if (st->f.dev_gpu_metrics_info_get && st->f.dev_gpu_metrics_info_get(dv, mbuf) == RSMI_OK) {
            const rsmi_metrics_v1_t *m = (const rsmi_metrics_v1_t *)mbuf;
            if (m->format_revision == 1 && m->content_revision >= 3) {
                s->throttle_bits = m->indep_throttle_status;
                hs_set(s, HQ_THROTTLE, (double)m->indep_throttle_status);
            } else if (m->format_revision == 1) {
                /* ASIC-specific word: exported raw; no names (and so no
                 * throttle alert) since its bits differ per ASIC */
                hs_set(s, HQ_THROTTLE, (double)m->throttle_status);
                s->throttle_bits = 0;
            }
            /* 0xffff = not reported by this ASIC */
            if (m->format_revision == 1 && m->pcie_link_width && m->pcie_link_width != 0xffff) {
                hs_set(s, HQ_PCIE_WIDTH, m->pcie_link_width);
                if (m->pcie_link_speed && m->pcie_link_speed != 0xffff)
                    hs_set(s, HQ_PCIE_GEN, gen_of_rate(m->pcie_link_speed / 10.0));
            }
        }
        if (st->f.dev_pci_bandwidth_get) {
            union {
                rsmi_pcie_bw5_t b5;
                rsmi_pcie_bw6_t b6;
            } bw;
            memset(&bw, 0, sizeof bw);
            if (st->f.dev_pci_bandwidth_get(dv, &bw) == RSMI_OK) {
                const uint64_t *fr = st->major >= 6 ? bw.b6.transfer_rate.frequency : bw.b5.transfer_rate.frequency;
                const uint32_t *lanes = st->major >= 6 ? bw.b6.lanes : bw.b5.lanes;
                uint32_t nf = st->major >= 6 ? bw.b6.transfer_rate.num_supported : bw.b5.transfer_rate.num_supported;
                uint32_t cur = st->major >= 6 ? bw.b6.transfer_rate.current : bw.b5.transfer_rate.current;
                if (nf > RSMI_MAX_FREQS) nf = RSMI_MAX_FREQS;
                int gmax = 0;
                uint32_t wmax = 0;
                for (uint32_t k = 0; k < nf; k++) {
                    int g = gen_of_rate((double)fr[k] / 1e9);
                    if (g > gmax) gmax = g;
                    if (lanes[k] > wmax) wmax = lanes[k];
                }
                if (gmax) hs_set(s, HQ_PCIE_GEN_MAX, gmax);
                if (wmax) hs_set(s, HQ_PCIE_WIDTH_MAX, wmax);
                if (!s->ok[HQ_PCIE_GEN] && nf && cur < nf) hs_set(s, HQ_PCIE_GEN, gen_of_rate((double)fr[cur] / 1e9));
                if (!s->ok[HQ_PCIE_WIDTH] && nf && cur < nf && lanes[cur]) hs_set(s, HQ_PCIE_WIDTH, lanes[cur]);
            }
        }
        if (st->f.dev_pci_replay_counter_get && st->f.dev_pci_replay_counter_get(dv, &u64) == RSMI_OK)
            hs_set(s, HQ_PCIE_REPLAY, (double)u64);
        uint64_t blocks = 0;
        if (st->f.dev_ecc_enabled_get(dv, &blocks) == RSMI_OK) {
            hs_set(s, HQ_ECC_MODE, blocks != 0);
            double corr = 0, unc = 0;
            int any = 0;
            for (int b = 0; b < RSMI_NUM_BLOCKS; b++) {
                if (!(blocks & (1ull << b))) continue;
                rsmi_ecc_count_t_ ec = {0, 0};
                if (st->f.dev_ecc_count_get(dv, 1ull << b, &ec) != RSMI_OK) continue;
                corr += (double)ec.correctable_err;
                unc += (double)ec.uncorrectable_err;
                any = 1;
            }
            if (any) {
                hs_set(s, HQ_ECC_CORR_AGG, corr);
                hs_set(s, HQ_ECC_UNCORR_AGG, unc);
            }
        }
        if (st->f.dev_memory_reserved_pages_get && st->f.dev_memory_reserved_pages_get(dv, &u32, NULL) == RSMI_OK)
            hs_set(s, HQ_RETIRED_PAGES, u32);
        if (st->f.topo_get_link_type && st->ndev > 1) {
            int peers = 0, xgmi = 0, okl = 1;
            for (uint32_t o = 0; o < st->ndev && okl; o++) {
                if (o == dv) continue;
                uint64_t hops = 0;
                int type = 0;
                if (st->f.topo_get_link_type(dv, o, &hops, &type) != RSMI_OK) {
                    okl = 0;
                    break;
                }
                peers++;
                xgmi += type == RSMI_LINK_XGMI && hops == 1;
            }
            if (okl) {
                hs_set(s, HQ_LINKS_UP, xgmi);
                hs_set(s, HQ_LINKS_TOTAL, peers);
            }
        }
    }
    free(mbuf);
    return PLUMB_OK;
}

static json_t *rsmi_info(struct health_provider *p)
{
    struct rsmi_state *st = p->state;
    json_t *o = json_object();
    json_object_set_new(o, "provider", json_string("rocm-smi"));
    json_object_set_new(o, "library", json_string(st->lib.path));
    json_object_set_new(o, "library_major", json_integer(st->major));
    json_object_set_new(o, "devices", json_integer(st->ndev));
    return o;
}

static void rsmi_close(struct health_provider *p)
{
    rsmi_free(p->state, 1);
    p->state = NULL;
}

const struct health_provider_ops health_rsmi_ops = {"rocm-smi", rsmi_open, rsmi_sample, rsmi_info, rsmi_close};
