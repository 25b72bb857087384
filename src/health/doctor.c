/* Doctor rows from the GPU health providers: ECC mode, PCIe link at its
 * maximum, persistence mode, NVLink / xGMI links up. One row per GPU and
 * fact; a fact the device does not report gives no row. */
#include "health/health.h"
#include <stdio.h>
#include <string.h>

static void add(json_t *rows, const char *item, const char *status, const char *value, const char *reason)
{
    json_array_append_new(rows, json_pack("{s:s, s:s, s:s, s:s}", "item", item, "status", status, "value", value,
                                           "reason", reason));
}

json_t *health_doctor_rows(void)
{
    json_t *rows = json_array();
    struct health_ctx ctx;
    plumb_err e = {0};
    if (health_open(&ctx, "nvml,rocm-smi,amdsmi", &e)) return rows;
    struct health_sample s[HEALTH_MAX_DEVICES];
    int n = 0;
    if (ctx.nprov && health_sample_all(&ctx, s, HEALTH_MAX_DEVICES, &n, &e)) {
        add(rows, "gpu health", "fail", "", e.msg);
        n = 0;
    }
    health_close(&ctx);
    char item[96], value[96], reason[256];
    for (int i = 0; i < n; i++) {
        const struct health_sample *x = &s[i];
        if (x->ok[HQ_ECC_MODE]) {
            snprintf(item, sizeof item, "%s ECC", x->device);
            int on = x->v[HQ_ECC_MODE] != 0;
            add(rows, item, on ? "pass" : "warn", on ? "enabled" : "disabled",
                on ? "memory errors are corrected and counted" : "ECC is off: memory errors go undetected");
        }
        if (x->ok[HQ_PCIE_WIDTH] && x->ok[HQ_PCIE_WIDTH_MAX]) {
            snprintf(item, sizeof item, "%s PCIe link", x->device);
            int gen = x->ok[HQ_PCIE_GEN] && x->ok[HQ_PCIE_GEN_MAX];
            if (gen)
                snprintf(value, sizeof value, "gen %.0f x%.0f (max gen %.0f x%.0f)", x->v[HQ_PCIE_GEN],
                         x->v[HQ_PCIE_WIDTH], x->v[HQ_PCIE_GEN_MAX], x->v[HQ_PCIE_WIDTH_MAX]);
            else snprintf(value, sizeof value, "x%.0f (max x%.0f)", x->v[HQ_PCIE_WIDTH], x->v[HQ_PCIE_WIDTH_MAX]);
            if (x->v[HQ_PCIE_WIDTH] < x->v[HQ_PCIE_WIDTH_MAX])
                add(rows, item, "warn", value, "link trained below its maximum width: reseat the card or check the slot");
            else if (gen && x->v[HQ_PCIE_GEN] < x->v[HQ_PCIE_GEN_MAX])
                add(rows, item, "pass", value, "full width; the generation drops while the GPU is idle and rises under load");
            else add(rows, item, "pass", value, "at its maximum");
        }
        if (x->ok[HQ_PERSISTENCE]) {
            snprintf(item, sizeof item, "%s persistence", x->device);
            int on = x->v[HQ_PERSISTENCE] != 0;
            add(rows, item, on ? "pass" : "warn", on ? "on" : "off",
                on ? "the driver stays loaded between jobs"
                   : "off: each job pays driver initialisation (nvidia-smi -pm 1 or nvidia-persistenced)");
        }
        if (x->ok[HQ_LINKS_UP] && x->ok[HQ_LINKS_TOTAL]) {
            snprintf(item, sizeof item, "%s %s", x->device, strcmp(x->vendor, "amd") ? "NVLink" : "xGMI");
            snprintf(value, sizeof value, "%.0f of %.0f up", x->v[HQ_LINKS_UP], x->v[HQ_LINKS_TOTAL]);
            int all = x->v[HQ_LINKS_UP] >= x->v[HQ_LINKS_TOTAL];
            snprintf(reason, sizeof reason, "%s", all ? "every link is up" : "some links are down: collectives fall back to slower paths");
            add(rows, item, all ? "pass" : "warn", value, reason);
        }
        if (x->ok[HQ_REMAP_PENDING] && x->v[HQ_REMAP_PENDING] != 0) {
            snprintf(item, sizeof item, "%s row remap", x->device);
            add(rows, item, "warn", "pending", "a memory row remap waits for a GPU reset");
        }
        if (x->ok[HQ_REMAP_FAILURE] && x->v[HQ_REMAP_FAILURE] != 0) {
            snprintf(item, sizeof item, "%s row remap", x->device);
            add(rows, item, "fail", "failed", "a memory row remap failed: the GPU needs service");
        }
    }
    return rows;
}
