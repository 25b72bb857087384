/* Quantity table, throttle-reason names, the provider set and sample JSON. */
#include "health/health.h"
#include "core/log.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* key, label, unit, dcgm-exporter name, AMD exporter name, host name, help */
const struct hq_meta hq_meta[HQ_COUNT] = {
    [HQ_TEMP] = {"temp_c", "temp", "C", "DCGM_FI_DEV_GPU_TEMP", "GPU_EDGE_TEMPERATURE",
                 "plumb_host_cpu_temperature_celsius", "Temperature in degrees C (GPU core/edge, hottest CPU package)."},
    [HQ_TEMP_HOTSPOT] = {"temp_hotspot_c", "hotspot", "C", NULL, "GPU_JUNCTION_TEMPERATURE", NULL,
                         "Junction (hotspot) temperature in degrees C."},
    [HQ_MEM_TEMP] = {"mem_temp_c", "memtemp", "C", "DCGM_FI_DEV_MEMORY_TEMP", "GPU_MEMORY_TEMPERATURE", NULL,
                     "Memory (HBM) temperature in degrees C."},
    [HQ_POWER] = {"power_w", "power", "W", "DCGM_FI_DEV_POWER_USAGE", "GPU_POWER_USAGE", NULL,
                  "Power draw in W."},
    [HQ_POWER_LIMIT] = {"power_limit_w", "plimit", "W", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "GPU_POWER_CAP", NULL,
                        "Enforced power limit in W."},
    [HQ_ENERGY] = {"energy_mj", "energy", "mJ", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "GPU_ENERGY_CONSUMED", NULL,
                   "Energy consumed since the driver loaded, in mJ."},
    [HQ_UTIL_GPU] = {"util_gpu_pct", "util", "%", "DCGM_FI_DEV_GPU_UTIL", "GPU_GFX_ACTIVITY", NULL,
                     "GPU utilisation in percent."},
    [HQ_UTIL_MEM] = {"util_mem_pct", "memutil", "%", "DCGM_FI_DEV_MEM_COPY_UTIL", "GPU_UMC_ACTIVITY", NULL,
                     "Memory utilisation in percent."},
    [HQ_MEM_USED] = {"mem_used_mib", "mem_used", "MiB", "DCGM_FI_DEV_FB_USED", "GPU_USED_VRAM",
                     "plumb_host_memory_used_mib", "Memory used in MiB."},
    [HQ_MEM_TOTAL] = {"mem_total_mib", "mem_total", "MiB", "DCGM_FI_DEV_FB_TOTAL", "GPU_TOTAL_VRAM",
                      "plumb_host_memory_total_mib", "Memory total in MiB."},
    [HQ_CLK_SM] = {"clk_sm_mhz", "sm_mhz", "MHz", "DCGM_FI_DEV_SM_CLOCK", "GPU_GFX_CLOCK", NULL,
                   "SM (GFX) clock in MHz."},
    [HQ_CLK_MEM] = {"clk_mem_mhz", "mem_mhz", "MHz", "DCGM_FI_DEV_MEM_CLOCK", "GPU_MEMORY_CLOCK", NULL,
                    "Memory clock in MHz."},
    [HQ_THROTTLE] = {"throttle_bits", "throttle", "bits", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "GPU_THROTTLE_STATUS", NULL,
                     "Clock-event (throttle) reason bit mask (vendor encoding)."},
    [HQ_ECC_CORR_VOL] = {"ecc_corr_vol", "ecc_c_vol", "", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", NULL, NULL,
                         "Corrected ECC errors since the driver loaded."},
    [HQ_ECC_UNCORR_VOL] = {"ecc_uncorr_vol", "ecc_u_vol", "", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", NULL, NULL,
                           "Uncorrected ECC errors since the driver loaded."},
    [HQ_ECC_CORR_AGG] = {"ecc_corr_agg", "ecc_c_agg", "", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "GPU_ECC_CORRECT_TOTAL", NULL,
                         "Corrected ECC errors over the device lifetime."},
    [HQ_ECC_UNCORR_AGG] = {"ecc_uncorr_agg", "ecc_u_agg", "", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "GPU_ECC_UNCORRECT_TOTAL", NULL,
                           "Uncorrected ECC errors over the device lifetime."},
    [HQ_RETIRED_PAGES] = {"retired_pages", "retired", "", "DCGM_FI_DEV_RETIRED_PAGES", "GPU_RETIRED_PAGES", NULL,
                          "Retired (reserved) memory pages."},
    [HQ_REMAP_CORR] = {"remapped_rows_corr", "remap_c", "", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", NULL, NULL,
                       "Rows remapped for corrected errors."},
    [HQ_REMAP_UNCORR] = {"remapped_rows_uncorr", "remap_u", "", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", NULL, NULL,
                         "Rows remapped for uncorrected errors."},
    [HQ_REMAP_PENDING] = {"remap_pending", "remap_pend", "", "DCGM_FI_DEV_ROW_REMAP_PENDING", NULL, NULL,
                          "1 when a row remap waits for a GPU reset."},
    [HQ_REMAP_FAILURE] = {"remap_failure", "remap_fail", "", "DCGM_FI_DEV_ROW_REMAP_FAILURE", NULL, NULL,
                          "1 when a row remap failed."},
    [HQ_PCIE_GEN] = {"pcie_gen", "pcie_gen", "", "DCGM_FI_DEV_PCIE_LINK_GEN", "PCIE_LINK_GEN", NULL,
                     "Current PCIe link generation."},
    [HQ_PCIE_GEN_MAX] = {"pcie_gen_max", "gen_max", "", "DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "PCIE_MAX_LINK_GEN", NULL,
                         "Maximum PCIe link generation of device and slot."},
    [HQ_PCIE_WIDTH] = {"pcie_width", "pcie_w", "", "DCGM_FI_DEV_PCIE_LINK_WIDTH", "PCIE_LINK_WIDTH", NULL,
                       "Current PCIe link width (lanes)."},
    [HQ_PCIE_WIDTH_MAX] = {"pcie_width_max", "w_max", "", "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "PCIE_MAX_LINK_WIDTH", NULL,
                           "Maximum PCIe link width (lanes)."},
    [HQ_PCIE_REPLAY] = {"pcie_replay", "replay", "", "DCGM_FI_DEV_PCIE_REPLAY_COUNT", "PCIE_REPLAY_COUNT", NULL,
                        "PCIe replay counter."},
    [HQ_LINKS_UP] = {"links_up", "links_up", "", "DCGM_FI_DEV_NVLINK_LINKS_UP", "GPU_XGMI_LINKS_UP", NULL,
                     "NVLink links active (AMD: peers reached over xGMI in one hop)."},
    [HQ_LINKS_TOTAL] = {"links_total", "links", "", "DCGM_FI_DEV_NVLINK_LINKS_TOTAL", "GPU_XGMI_LINKS_TOTAL", NULL,
                        "NVLink links present (AMD: peer GPUs)."},
    [HQ_XID_COUNT] = {"xid_count", "xids", "", "DCGM_FI_DEV_XID_ERROR_COUNT", NULL, NULL,
                      "Critical Xid / double-bit ECC events seen since monitoring started."},
    [HQ_XID_LAST] = {"xid_last", "xid", "", "DCGM_FI_DEV_XID_ERRORS", NULL, NULL,
                     "Number of the last critical Xid event."},
    [HQ_ECC_MODE] = {"ecc_mode", "ecc", "", "DCGM_FI_DEV_ECC_CURRENT", "GPU_ECC_ENABLED", NULL,
                     "1 when ECC is enabled."},
    [HQ_PERSISTENCE] = {"persistence", "persist", "", "DCGM_FI_DEV_PERSISTENCE_MODE", NULL, NULL,
                        "1 when persistence mode is on."},
    [HQ_LOAD1] = {"load1", "load1", "", NULL, NULL, "plumb_host_load1", "1-minute load average."},
};

/* ---- throttle reasons ---- */
struct bitname {
    uint64_t bit;
    const char *name;
};
/* NVML clock-event reasons (nvmlClocksEventReason* in nvml.h). */
static const struct bitname nv_bits[] = {
    {0x1, "gpu_idle"},      {0x2, "app_clocks"},  {0x4, "sw_power_cap"},   {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},   {0x20, "sw_thermal"}, {0x40, "hw_thermal"},    {0x80, "hw_power_brake"},
    {0x100, "display_clocks"}, {0, NULL},
};
/* amdgpu's ASIC-independent SMU throttler bits (gpu_metrics v1.3+
 * indep_throttle_status): power 0-7, current 16-23, temperature 32-47. */
static const struct bitname amd_bits[] = {
    {1ull << 0, "ppt0"},        {1ull << 1, "ppt1"},          {1ull << 2, "ppt2"},
    {1ull << 3, "ppt3"},        {1ull << 4, "spl"},           {1ull << 5, "fppt"},
    {1ull << 6, "sppt"},        {1ull << 7, "sppt_apu"},      {1ull << 16, "tdc_gfx"},
    {1ull << 17, "tdc_soc"},    {1ull << 18, "tdc_mem"},      {1ull << 19, "tdc_vdd"},
    {1ull << 20, "tdc_cvip"},   {1ull << 21, "edc_cpu"},      {1ull << 22, "edc_gfx"},
    {1ull << 23, "apcc"},       {1ull << 32, "temp_gpu"},     {1ull << 33, "temp_core"},
    {1ull << 34, "temp_mem"},   {1ull << 35, "temp_edge"},    {1ull << 36, "temp_hotspot"},
    {1ull << 37, "temp_soc"},   {1ull << 38, "temp_vr_gfx"},  {1ull << 39, "temp_vr_soc"},
    {1ull << 40, "temp_vr_mem0"}, {1ull << 41, "temp_vr_mem1"}, {1ull << 42, "temp_liquid0"},
    {1ull << 43, "temp_liquid1"}, {1ull << 44, "vrhot0"},     {1ull << 45, "vrhot1"},
    {1ull << 46, "prochot_cpu"}, {1ull << 47, "prochot_gfx"}, {1ull << 56, "ppm"},
    {1ull << 57, "fit"},        {0, NULL},
};

static const struct bitname *bits_of(const char *vendor)
{
    return vendor && !strcmp(vendor, "amd") ? amd_bits : vendor && !strcmp(vendor, "nvidia") ? nv_bits : NULL;
}

int health_throttle_names(const char *vendor, uint64_t bits, char *out, size_t n)
{
    const struct bitname *t = bits_of(vendor);
    size_t len = 0;
    int count = 0;
    if (n) out[0] = 0;
    uint64_t known = 0;
    for (; t && t->name; t++) {
        known |= t->bit;
        if (!(bits & t->bit)) continue;
        int w = snprintf(out + len, len < n ? n - len : 0, "%s%s", count ? "," : "", t->name);
        if (w > 0) len += (size_t)w;
        count++;
    }
    if (bits & ~known) {
        int w = snprintf(out + len, len < n ? n - len : 0, "%sother_0x%llx", count ? "," : "",
                         (unsigned long long)(bits & ~known));
        if (w > 0) len += (size_t)w;
        count++;
    }
    return count;
}

int health_throttle_parse(const char *vendor, const char *list, uint64_t *bits, plumb_err *e)
{
    *bits = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        if (!strcmp(t, "none")) continue;
        int found = 0;
        const struct bitname *lists[2] = {nv_bits, amd_bits};
        for (int l = 0; l < 2; l++)
            for (const struct bitname *b = lists[l]; b->name; b++)
                if (!strcmp(b->name, t)) {
                    found = 1;
                    if (lists[l] == bits_of(vendor)) *bits |= b->bit;
                }
        if (!found)
            return err_set(e, PLUMB_EUSAGE,
                           "throttle: unknown reason '%s' (expected NVIDIA names such as hw_slowdown, "
                           "sw_thermal, hw_thermal, hw_power_brake, sw_power_cap, or AMD names such as "
                           "temp_edge, temp_hotspot, vrhot0, ppt0)", t);
    }
    return PLUMB_OK;
}

/* ---- provider set ---- */
int health_open(struct health_ctx *h, const char *which, plumb_err *e)
{
    memset(h, 0, sizeof *h);
    const struct health_provider_ops *all[HEALTH_NPROV] = {&health_nvml_ops, &health_rsmi_ops, &health_amdsmi_ops,
                                                           &health_linux_ops};
    int want[HEALTH_NPROV] = {1, 1, 1, 1};
    if (which && strcmp(which, "all")) {
        for (int i = 0; i < HEALTH_NPROV; i++) want[i] = 0;
        char buf[128];
        snprintf(buf, sizeof buf, "%s", which);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int k = -1;
            for (int i = 0; i < HEALTH_NPROV; i++)
                if (!strcmp(t, all[i]->name)) k = i;
            if (k < 0)
                return err_set(e, PLUMB_EUSAGE, "--providers: unknown provider '%s' (expected all or a "
                                                "comma list of nvml, rocm-smi, amdsmi, linux)", t);
            want[k] = 1;
        }
        /* '' or ',' named none: that was exit 3, "no health provider could be opened" */
        int any = 0;
        for (int i = 0; i < HEALTH_NPROV; i++) any |= want[i];
        if (!any)
            return err_set(e, PLUMB_EUSAGE, "--providers '%s': names no provider (expected all or a comma list of "
                           "nvml, rocm-smi, amdsmi, linux)", which);
    }
    int rsmi_open = 0;
    for (int i = 0; i < HEALTH_NPROV; i++) {
        h->names[i] = all[i]->name;
        if (!want[i]) {
            snprintf(h->notes[i], sizeof h->notes[i], "not requested");
            continue;
        }
        if (all[i] == &health_amdsmi_ops && rsmi_open) {
            snprintf(h->notes[i], sizeof h->notes[i], "not used: rocm-smi reports the AMD GPUs");
            continue;
        }
        struct health_provider p = {all[i], NULL, 0};
        plumb_err pe = {0};
        int rc = p.ops->open(&p, &pe);
        if (rc) {
            snprintf(h->notes[i], sizeof h->notes[i], "%s", pe.msg[0] ? pe.msg : err_code_name(rc));
            log_debug("health: provider %s not used: %s", p.ops->name, h->notes[i]);
            continue;
        }
        if (all[i] == &health_rsmi_ops) rsmi_open = 1;
        h->prov[h->nprov++] = p;
    }
    return PLUMB_OK;
}

int health_sample_all(struct health_ctx *h, struct health_sample *out, int max, int *n, plumb_err *e)
{
    *n = 0;
    for (int i = 0; i < h->nprov; i++) {
        int rc = h->prov[i].ops->sample(&h->prov[i], out, max, n, e);
        if (rc) return err_wrap(e, "health provider %s", h->prov[i].ops->name);
    }
    return PLUMB_OK;
}

void health_close(struct health_ctx *h)
{
    for (int i = 0; i < h->nprov; i++) h->prov[i].ops->close(&h->prov[i]);
    h->nprov = 0;
}

/* ---- JSON ---- */
json_t *health_sample_json(const struct health_sample *s)
{
    static const char *kinds[] = {"gpu", "host", "numa"};
    json_t *o = json_object();
    json_object_set_new(o, "device", json_string(s->device));
    if (s->uuid[0]) json_object_set_new(o, "uuid", json_string(s->uuid));
    json_object_set_new(o, "vendor", json_string(s->vendor));
    if (s->name[0]) json_object_set_new(o, "name", json_string(s->name));
    json_object_set_new(o, "kind", json_string(kinds[s->kind]));
    json_object_set_new(o, "time", json_real(s->time));
    json_t *uns = json_array();
    for (int q = 0; q < HQ_COUNT; q++) {
        if (!s->ok[q]) {
            /* quantities that never apply to this kind are left out entirely */
            int applies = s->kind == HEALTH_GPU ? (s->vendor[0] == 'n' ? hq_meta[q].prom_nv != NULL
                                                                         : hq_meta[q].prom_amd != NULL)
                                                 : hq_meta[q].prom_host != NULL;
            if (applies) json_array_append_new(uns, json_string(hq_meta[q].key));
            continue;
        }
        double v = s->v[q];
        if (v == floor(v) && fabs(v) < 9e15) json_object_set_new(o, hq_meta[q].key, json_integer((json_int_t)v));
        else json_object_set_new(o, hq_meta[q].key, json_real(v));
    }
    if (s->ok[HQ_THROTTLE]) {
        char names[512];
        health_throttle_names(s->vendor, s->throttle_bits, names, sizeof names);
        json_object_set_new(o, "throttle_reasons", json_string(names));
    }
    json_object_set_new(o, "unsupported", uns);
    return o;
}
