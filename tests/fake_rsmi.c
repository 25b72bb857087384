/* A fake librocm_smi64 for tests, compiled against Debian's real
 * rocm_smi.h (librocm-smi-dev, ROCm SMI 5.2): the compiler checks that these
 * definitions match the real prototypes, and the static assertions below check
 * that plumb's own declarations (health/rsmi_api.h) have the real shapes.
 * Values are scripted with fake_rsmi_set(dev, key, value); NAN makes a
 * function answer RSMI_STATUS_NOT_SUPPORTED. FAKE_RSMI_DEVICES (default 2).
 * Topology: FAKE_RSMI_PCI="0000:c1:00.0,..." the devices' bus ids (default
 * 0000:<0xc1 + i>:00.0); FAKE_RSMI_XGMI="0-1,2-3" the pairs joined by xGMI
 * (one hop), every other pair PCIe; unset, each pair gets device a's
 * link_type and hops keys. */
#include <rocm_smi/rocm_smi.h>
#include "health/rsmi_api.h"
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(rsmi_freqs5_t) == sizeof(rsmi_frequencies_t), "rsmi_frequencies_t shape");
_Static_assert(offsetof(rsmi_freqs5_t, frequency) == offsetof(rsmi_frequencies_t, frequency), "frequency offset");
_Static_assert(sizeof(rsmi_pcie_bw5_t) == sizeof(rsmi_pcie_bandwidth_t), "rsmi_pcie_bandwidth_t shape");
_Static_assert(offsetof(rsmi_pcie_bw5_t, lanes) == offsetof(rsmi_pcie_bandwidth_t, lanes), "lanes offset");
_Static_assert(sizeof(rsmi_ecc_count_t_) == sizeof(rsmi_error_count_t), "rsmi_error_count_t shape");
_Static_assert(sizeof(rsmi_gpu_block_t) == sizeof(uint64_t), "rsmi_gpu_block_t is 64-bit");
_Static_assert(sizeof(rsmi_memory_type_t) == sizeof(int), "enum args are int");
_Static_assert(offsetof(rsmi_metrics_v1_t, throttle_status) == offsetof(rsmi_gpu_metrics_t, throttle_status), "throttle_status");
_Static_assert(offsetof(rsmi_metrics_v1_t, pcie_link_speed) == offsetof(rsmi_gpu_metrics_t, pcie_link_speed), "pcie_link_speed");
_Static_assert(offsetof(rsmi_metrics_v1_t, temperature_hbm) == offsetof(rsmi_gpu_metrics_t, temperature_hbm), "temperature_hbm");
_Static_assert(sizeof(rsmi_gpu_metrics_t) <= RSMI_METRICS_BUF, "metrics buffer");
_Static_assert((int)RSMI_TEMP_TYPE_JUNCTION == (int)RSMI_TEMP_JUNCTION && (int)RSMI_TEMP_TYPE_MEMORY == (int)RSMI_TEMP_MEMORY, "sensors");
_Static_assert((int)RSMI_CLK_TYPE_MEM == (int)RSMI_CLK_MEM && (int)RSMI_IOLINK_TYPE_XGMI == (int)RSMI_LINK_XGMI, "enums");
_Static_assert((int)RSMI_STATUS_NOT_SUPPORTED == (int)RSMI_NOT_SUPPORTED, "status");

enum {
    K_EDGE, K_JUNCTION, K_MEMT, K_POWER_UW, K_CAP_UW, K_ENERGY_COUNT, K_ENERGY_RES, K_BUSY, K_MEM_BUSY,
    K_VRAM_USED, K_VRAM_TOTAL, K_SCLK_HZ, K_MCLK_HZ, K_ECC_BLOCKS, K_ECC_UMC_C, K_ECC_UMC_U, K_ECC_SDMA_C,
    K_ECC_SDMA_U, K_RESERVED, K_METRICS_REV, K_THR_INDEP, K_THR_ASIC, K_PCIE_W, K_PCIE_SPEED, K_BW_MAX_HZ,
    K_BW_LANES, K_REPLAY, K_LINK_TYPE, K_HOPS, NK
};
static const char *knames[NK] = {
    "edge_md", "junction_md", "mem_md", "power_uw", "cap_uw", "energy_count", "energy_res", "busy", "mem_busy",
    "vram_used", "vram_total", "sclk_hz", "mclk_hz", "ecc_blocks", "ecc_umc_c", "ecc_umc_u", "ecc_sdma_c",
    "ecc_sdma_u", "reserved_pages", "metrics_rev", "throttle_indep", "throttle_asic", "pcie_w", "pcie_speed",
    "bw_max_hz", "bw_lanes", "replay", "link_type", "hops",
};
#define FAKE_MAX 8
static double val[FAKE_MAX][NK];
static unsigned ndev;
static int have_defaults, inited;

void fake_rsmi_reset(void)
{
    const char *nd = getenv("FAKE_RSMI_DEVICES");
    ndev = nd ? (unsigned)atoi(nd) : 2;
    if (ndev > FAKE_MAX) ndev = FAKE_MAX;
    for (int i = 0; i < FAKE_MAX; i++) {
        double *v = val[i];
        v[K_EDGE] = 45000;     /* 45 C */
        v[K_JUNCTION] = 52500; /* 52.5 C */
        v[K_MEMT] = 61000;
        v[K_POWER_UW] = 312500000; /* 312.5 W */
        v[K_CAP_UW] = 560000000;
        v[K_ENERGY_COUNT] = 1000000;
        v[K_ENERGY_RES] = 15.3f; /* uJ per count */
        v[K_BUSY] = 88;
        v[K_MEM_BUSY] = 40;
        v[K_VRAM_USED] = 2048.0 * 1048576;
        v[K_VRAM_TOTAL] = 65536.0 * 1048576;
        v[K_SCLK_HZ] = 1700e6;
        v[K_MCLK_HZ] = 1600e6;
        v[K_ECC_BLOCKS] = (double)(RSMI_GPU_BLOCK_UMC | RSMI_GPU_BLOCK_SDMA);
        v[K_ECC_UMC_C] = 3;
        v[K_ECC_UMC_U] = 0;
        v[K_ECC_SDMA_C] = 4;
        v[K_ECC_SDMA_U] = 0;
        v[K_RESERVED] = 0;
        v[K_METRICS_REV] = 3;
        v[K_THR_INDEP] = 0;
        v[K_THR_ASIC] = 0;
        v[K_PCIE_W] = 16;
        v[K_PCIE_SPEED] = 160; /* 16 GT/s: gen 4 */
        v[K_BW_MAX_HZ] = 16e9;
        v[K_BW_LANES] = 16;
        v[K_REPLAY] = 2;
        v[K_LINK_TYPE] = RSMI_IOLINK_TYPE_XGMI;
        v[K_HOPS] = 1;
    }
    have_defaults = 1;
}
static void ensure(void)
{
    if (!have_defaults) fake_rsmi_reset();
}
int fake_rsmi_set(unsigned dev, const char *key, double value)
{
    ensure();
    if (dev >= FAKE_MAX) return -1;
    for (int k = 0; k < NK; k++)
        if (!strcmp(knames[k], key)) {
            val[dev][k] = value;
            return 0;
        }
    fprintf(stderr, "fake_rsmi_set: unknown key %s\n", key);
    return -1;
}

#define CHK(dv)                                              \
    do {                                                     \
        if (!inited) return RSMI_STATUS_INIT_ERROR;          \
        if ((dv) >= ndev) return RSMI_STATUS_INVALID_ARGS;   \
    } while (0)
#define GET1(dv, k, out, T)                                          \
    do {                                                             \
        CHK(dv);                                                     \
        if (isnan(val[dv][k])) return RSMI_STATUS_NOT_SUPPORTED;     \
        *(out) = (T)val[dv][k];                                      \
        return RSMI_STATUS_SUCCESS;                                  \
    } while (0)

rsmi_status_t rsmi_init(uint64_t flags)
{
    (void)flags;
    ensure();
    inited = 1;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_shut_down(void)
{
    inited = 0;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_status_string(rsmi_status_t s, const char **str)
{
    *str = s == RSMI_STATUS_SUCCESS ? "RSMI_STATUS_SUCCESS" : s == RSMI_STATUS_NOT_SUPPORTED ? "RSMI_STATUS_NOT_SUPPORTED" : "RSMI_STATUS_UNKNOWN_ERROR";
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_version_get(rsmi_version_t *v)
{
    v->major = 5;
    v->minor = 2;
    v->patch = 3;
    v->build = "fake";
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_num_monitor_devices(uint32_t *n)
{
    if (!inited) return RSMI_STATUS_INIT_ERROR;
    *n = ndev;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_name_get(uint32_t dv, char *name, size_t len)
{
    CHK(dv);
    snprintf(name, len, "Fake MI250X");
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_unique_id_get(uint32_t dv, uint64_t *id)
{
    CHK(dv);
    *id = 0xabc0000000000000ull + dv;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_temp_metric_get(uint32_t dv, uint32_t sensor, rsmi_temperature_metric_t metric, int64_t *t)
{
    if (metric != RSMI_TEMP_CURRENT) return RSMI_STATUS_INVALID_ARGS;
    int k = sensor == RSMI_TEMP_TYPE_EDGE ? K_EDGE : sensor == RSMI_TEMP_TYPE_JUNCTION ? K_JUNCTION
            : sensor == RSMI_TEMP_TYPE_MEMORY ? K_MEMT : -1;
    if (k < 0) return RSMI_STATUS_NOT_SUPPORTED;
    GET1(dv, k, t, int64_t);
}
rsmi_status_t rsmi_dev_power_ave_get(uint32_t dv, uint32_t sensor, uint64_t *p)
{
    (void)sensor;
    GET1(dv, K_POWER_UW, p, uint64_t);
}
rsmi_status_t rsmi_dev_power_cap_get(uint32_t dv, uint32_t sensor, uint64_t *p)
{
    (void)sensor;
    GET1(dv, K_CAP_UW, p, uint64_t);
}
rsmi_status_t rsmi_dev_energy_count_get(uint32_t dv, uint64_t *count, float *res, uint64_t *ts)
{
    CHK(dv);
    if (isnan(val[dv][K_ENERGY_COUNT])) return RSMI_STATUS_NOT_SUPPORTED;
    *count = (uint64_t)val[dv][K_ENERGY_COUNT];
    *res = (float)val[dv][K_ENERGY_RES];
    *ts = 12345;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_busy_percent_get(uint32_t dv, uint32_t *b) { GET1(dv, K_BUSY, b, uint32_t); }
rsmi_status_t rsmi_dev_memory_busy_percent_get(uint32_t dv, uint32_t *b) { GET1(dv, K_MEM_BUSY, b, uint32_t); }
rsmi_status_t rsmi_dev_memory_usage_get(uint32_t dv, rsmi_memory_type_t t, uint64_t *u)
{
    if (t != RSMI_MEM_TYPE_VRAM) return RSMI_STATUS_NOT_SUPPORTED;
    GET1(dv, K_VRAM_USED, u, uint64_t);
}
rsmi_status_t rsmi_dev_memory_total_get(uint32_t dv, rsmi_memory_type_t t, uint64_t *u)
{
    if (t != RSMI_MEM_TYPE_VRAM) return RSMI_STATUS_NOT_SUPPORTED;
    GET1(dv, K_VRAM_TOTAL, u, uint64_t);
}
rsmi_status_t rsmi_dev_gpu_clk_freq_get(uint32_t dv, rsmi_clk_type_t clk, rsmi_frequencies_t *f)
{
    CHK(dv);
    int k = clk == RSMI_CLK_TYPE_SYS ? K_SCLK_HZ : clk == RSMI_CLK_TYPE_MEM ? K_MCLK_HZ : -1;
    if (k < 0 || isnan(val[dv][k])) return RSMI_STATUS_NOT_SUPPORTED;
    memset(f, 0, sizeof *f);
    f->num_supported = 3;
    f->current = 1;
    f->frequency[0] = 500000000;
    f->frequency[1] = (uint64_t)val[dv][k];
    f->frequency[2] = 2100000000;
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_gpu_metrics_info_get(uint32_t dv, rsmi_gpu_metrics_t *m)
{
    CHK(dv);
    if (isnan(val[dv][K_METRICS_REV])) return RSMI_STATUS_NOT_SUPPORTED;
    /* The caller's buffer is RSMI_METRICS_BUF bytes: the v1.3 fields past the
     * 5.2 struct are written through plumb's prefix layout. */
    rsmi_metrics_v1_t *x = (rsmi_metrics_v1_t *)m;
    memset(x, 0, sizeof *x);
    x->format_revision = 1;
    x->content_revision = (uint8_t)val[dv][K_METRICS_REV];
    x->throttle_status = (uint32_t)val[dv][K_THR_ASIC];
    x->indep_throttle_status = (uint64_t)val[dv][K_THR_INDEP];
    x->pcie_link_width = (uint16_t)val[dv][K_PCIE_W];
    x->pcie_link_speed = (uint16_t)val[dv][K_PCIE_SPEED];
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_ecc_enabled_get(uint32_t dv, uint64_t *b) { GET1(dv, K_ECC_BLOCKS, b, uint64_t); }
rsmi_status_t rsmi_dev_ecc_count_get(uint32_t dv, rsmi_gpu_block_t block, rsmi_error_count_t *ec)
{
    CHK(dv);
    if (block == RSMI_GPU_BLOCK_UMC) {
        ec->correctable_err = (uint64_t)val[dv][K_ECC_UMC_C];
        ec->uncorrectable_err = (uint64_t)val[dv][K_ECC_UMC_U];
    } else if (block == RSMI_GPU_BLOCK_SDMA) {
        ec->correctable_err = (uint64_t)val[dv][K_ECC_SDMA_C];
        ec->uncorrectable_err = (uint64_t)val[dv][K_ECC_SDMA_U];
    } else {
        return RSMI_STATUS_NOT_SUPPORTED;
    }
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_memory_reserved_pages_get(uint32_t dv, uint32_t *n, rsmi_retired_page_record_t *rec)
{
    (void)rec;
    GET1(dv, K_RESERVED, n, uint32_t);
}
rsmi_status_t rsmi_dev_pci_bandwidth_get(uint32_t dv, rsmi_pcie_bandwidth_t *bw)
{
    CHK(dv);
    if (isnan(val[dv][K_BW_MAX_HZ])) return RSMI_STATUS_NOT_SUPPORTED;
    memset(bw, 0, sizeof *bw);
    bw->transfer_rate.num_supported = 2;
    bw->transfer_rate.current = 1;
    bw->transfer_rate.frequency[0] = 2500000000ull;
    bw->transfer_rate.frequency[1] = (uint64_t)val[dv][K_BW_MAX_HZ];
    bw->lanes[0] = 1;
    bw->lanes[1] = (uint32_t)val[dv][K_BW_LANES];
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_dev_pci_replay_counter_get(uint32_t dv, uint64_t *c) { GET1(dv, K_REPLAY, c, uint64_t); }
static int xgmi_pair(uint32_t a, uint32_t b, int *listed)
{
    const char *x = getenv("FAKE_RSMI_XGMI");
    *listed = x && *x;
    if (!*listed) return 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", x);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        unsigned p, q;
        if (sscanf(t, "%u-%u", &p, &q) == 2 && ((p == a && q == b) || (p == b && q == a))) return 1;
    }
    return 0;
}
rsmi_status_t rsmi_dev_pci_id_get(uint32_t dv, uint64_t *bdfid)
{
    CHK(dv);
    unsigned dom = 0, bus = 0xc1 + dv, dev = 0, fn = 0;
    const char *pci = getenv("FAKE_RSMI_PCI");
    if (pci && *pci) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", pci);
        uint32_t i = 0;
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), i++)
            if (i == dv) sscanf(t, "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
    }
    *bdfid = (uint64_t)dom << 32 | (uint64_t)(bus & 0xff) << 8 | (uint64_t)(dev & 0x1f) << 3 | (fn & 7);
    return RSMI_STATUS_SUCCESS;
}
rsmi_status_t rsmi_topo_get_link_type(uint32_t a, uint32_t b, uint64_t *hops, RSMI_IO_LINK_TYPE *type)
{
    CHK(a);
    CHK(b);
    int listed;
    int x = xgmi_pair(a, b, &listed);
    if (listed) {
        *hops = x ? 1 : 2;
        *type = x ? RSMI_IOLINK_TYPE_XGMI : RSMI_IOLINK_TYPE_PCIEXPRESS;
        return RSMI_STATUS_SUCCESS;
    }
    *hops = (uint64_t)val[a][K_HOPS];
    *type = (RSMI_IO_LINK_TYPE)(int)val[a][K_LINK_TYPE];
    return RSMI_STATUS_SUCCESS;
}
