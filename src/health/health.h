/* Health monitoring (docs/health.md): providers fill one sample per
 * device (GPU via NVML or ROCm SMI, the host and its NUMA nodes via Linux
 * sysfs/procfs); thresholds turn samples into alerts; the same samples render
 * as a table, JSON, and Prometheus text.
 *
 * Every quantity carries a supported flag: a quantity a device (or driver)
 * does not report is marked unsupported and is never shown or exported as 0.
 * Vendor libraries are dlopen'ed (no link-time dependency); their functions
 * are declared in our own headers (health/nvml_api.h, health/rsmi_api.h). */
#ifndef PLUMB_HEALTH_H
#define PLUMB_HEALTH_H
#include <stdint.h>
#include <jansson.h>
#include "core/err.h"

/* The quantities, in a fixed order. Units are in the json key. */
enum hq {
    HQ_TEMP,           /* GPU core (NVIDIA) / edge (AMD) / hottest CPU package, C */
    HQ_TEMP_HOTSPOT,   /* AMD junction temperature, C                        */
    HQ_MEM_TEMP,       /* HBM temperature, C                                 */
    HQ_POWER,          /* power draw, W                                      */
    HQ_POWER_LIMIT,    /* enforced power limit / cap, W                      */
    HQ_ENERGY,         /* energy since driver load, mJ                       */
    HQ_UTIL_GPU,       /* GPU busy, percent                                  */
    HQ_UTIL_MEM,       /* memory controller busy, percent                    */
    HQ_MEM_USED,       /* device (or host / NUMA node) memory used, MiB      */
    HQ_MEM_TOTAL,      /* MiB                                                */
    HQ_CLK_SM,         /* SM / GFX clock, MHz                                */
    HQ_CLK_MEM,        /* memory clock, MHz                                  */
    HQ_THROTTLE,       /* clock-event (throttle) reason bits, vendor encoding */
    HQ_ECC_CORR_VOL,   /* corrected ECC errors since driver load             */
    HQ_ECC_UNCORR_VOL, /* uncorrected ECC errors since driver load           */
    HQ_ECC_CORR_AGG,   /* corrected ECC errors, lifetime (AMD: per-block sum) */
    HQ_ECC_UNCORR_AGG, /* uncorrected ECC errors, lifetime                   */
    HQ_RETIRED_PAGES,  /* retired (NVIDIA pre-Ampere) / reserved (AMD) pages */
    HQ_REMAP_CORR,     /* rows remapped for corrected errors (Ampere+)       */
    HQ_REMAP_UNCORR,   /* rows remapped for uncorrected errors               */
    HQ_REMAP_PENDING,  /* 1 when a remap waits for a GPU reset               */
    HQ_REMAP_FAILURE,  /* 1 when a remap failed                              */
    HQ_PCIE_GEN,       /* current PCIe generation                            */
    HQ_PCIE_GEN_MAX,   /* maximum PCIe generation (device and slot)          */
    HQ_PCIE_WIDTH,     /* current lanes                                      */
    HQ_PCIE_WIDTH_MAX, /* maximum lanes                                      */
    HQ_PCIE_REPLAY,    /* PCIe replay counter                                */
    HQ_LINKS_UP,       /* NVLink links active / xGMI peers                   */
    HQ_LINKS_TOTAL,    /* NVLink links present / peers                       */
    HQ_XID_COUNT,      /* critical events (Xid, DBE) seen since we started   */
    HQ_XID_LAST,       /* the last Xid number seen                           */
    HQ_ECC_MODE,       /* 1 when ECC is enabled                              */
    HQ_PERSISTENCE,    /* 1 when persistence mode is on                      */
    HQ_LOAD1,          /* host 1-minute load average                         */
    HQ_COUNT
};

struct hq_meta {
    const char *key;      /* JSON key, e.g. "temp_c" */
    const char *label;    /* table column / alert quantity name */
    const char *unit;
    const char *prom_nv;  /* dcgm-exporter style name for NVIDIA devices (NULL: none) */
    const char *prom_amd; /* AMD device-metrics-exporter style name (NULL: none) */
    const char *prom_host;/* name for the host and NUMA nodes (NULL: none) */
    const char *help;
};
extern const struct hq_meta hq_meta[HQ_COUNT];

enum health_kind { HEALTH_GPU = 0, HEALTH_HOST = 1, HEALTH_NUMA = 2 };

#define HEALTH_MAX_DEVICES 64

struct health_sample {
    char device[32];   /* "nvidia0", "amd1", "cpu", "numa0" */
    char uuid[96];     /* vendor UUID ("GPU-..."), or "" */
    char vendor[16];   /* "nvidia", "amd", "linux" */
    char name[96];     /* product name, CPU model */
    int kind;          /* enum health_kind */
    int index;         /* vendor index */
    double time;       /* wall-clock seconds since the epoch */
    double v[HQ_COUNT];
    unsigned char ok[HQ_COUNT]; /* 1 = supported and read */
    uint64_t throttle_bits;     /* exact bits (v[HQ_THROTTLE] is a double) */
};

static inline void hs_set(struct health_sample *s, int q, double v)
{
    s->v[q] = v;
    s->ok[q] = 1;
}

/* Names of the set throttle bits ("hw_slowdown,sw_thermal"), "" when none.
 * vendor: "nvidia" (NVML clock-event reasons) or "amd" (ASIC-independent
 * SMU throttler bits). Returns the number of names written. */
int health_throttle_names(const char *vendor, uint64_t bits, char *out, size_t n);
/* Bits of throttle names in a comma list ("hw_slowdown,sw_thermal") for the
 * vendor; an unknown name is a PLUMB_EUSAGE error. */
int health_throttle_parse(const char *vendor, const char *list, uint64_t *bits, plumb_err *e);

/* ---- providers ---- */
struct health_provider;
struct health_provider_ops {
    const char *name; /* "nvml", "rocm-smi", "linux" */
    /* Loads the library and counts devices. PLUMB_EUNSUPPORTED when the
     * library or the hardware is absent (not an error for callers). */
    int (*open)(struct health_provider *p, plumb_err *e);
    /* Appends this provider's samples to out[*n..max). */
    int (*sample)(struct health_provider *p, struct health_sample *out, int max, int *n, plumb_err *e);
    /* Extra per-device facts for doctor (driver version...): JSON object or NULL. */
    json_t *(*info)(struct health_provider *p);
    void (*close)(struct health_provider *p);
};
struct health_provider {
    const struct health_provider_ops *ops;
    void *state;
    int ndev;
};
extern const struct health_provider_ops health_nvml_ops, health_rsmi_ops, health_amdsmi_ops, health_linux_ops;

/* All providers that opened. which: "all" or a comma list of provider names
 * (nvml, rocm-smi, amdsmi, linux); amdsmi is opened only when rocm-smi did not
 * (they would report the same GPUs).
 * Library paths: PLUMB_NVML_LIB, PLUMB_RSMI_LIB and PLUMB_AMDSMI_LIB override the search
 * (tests point them at fake libraries); PLUMB_HEALTH_SYSFS / PLUMB_HEALTH_PROCFS
 * override /sys and /proc for the linux provider. */
#define HEALTH_NPROV 4
struct health_ctx {
    struct health_provider prov[HEALTH_NPROV];
    int nprov;
    char notes[HEALTH_NPROV][256]; /* why a provider did not open ("" when it did) */
    const char *names[HEALTH_NPROV];
};
int health_open(struct health_ctx *h, const char *which, plumb_err *e);
int health_sample_all(struct health_ctx *h, struct health_sample *out, int max, int *n, plumb_err *e);
void health_close(struct health_ctx *h);

/* ---- thresholds and alerts ----
 * File format (key = value, '#' starts a comment, blank lines ignored):
 *   gpu_temp_c = 85             alert when a GPU's temperature >= 85 C
 *   gpu_temp_critical_c = 90    critical alert (training stops with --on-overheat stop)
 *   mem_temp_c = 95             alert when HBM temperature >= 95 C
 *   cpu_temp_c = 95             alert when the hottest CPU package >= 95 C
 *   power_w = 450               alert when power draw >= 450 W
 *   ecc_per_hour = 10           alert when ECC errors (corrected + uncorrected) in the
 *                               trailing window, scaled to one hour, reach 10
 *   ecc_window_s = 3600         that window, seconds
 *   uncorrected_ecc = 1         alert on any new uncorrected ECC error (0 = off)
 *   throttle = hw_slowdown,sw_thermal,hw_thermal,hw_power_brake
 *                               clock-event reasons that alert (NVIDIA names; AMD
 *                               thermal/power classes map onto them); "none" = off
 *   pcie_width_downgrade = 1    alert when lanes < max lanes
 *   pcie_gen_downgrade = 0      alert when gen < max gen (off by default: idle GPUs
 *                               drop the link generation to save power)
 *   xid = 1                     alert on each critical Xid / DBE event
 * A limit of 0 (or "off") disables a numeric rule. Each rule alerts when it
 * becomes true (value >= limit) and again only after it was false once. */
struct health_thresholds {
    double gpu_temp_c, gpu_temp_critical_c, mem_temp_c, cpu_temp_c, power_w;
    double ecc_per_hour, ecc_window_s;
    int uncorrected_ecc, pcie_width_downgrade, pcie_gen_downgrade, xid;
    char throttle[256];
};
void health_thresholds_default(struct health_thresholds *t);
/* Reads a file over the defaults; errors name the file, line and key. */
int health_thresholds_load(struct health_thresholds *t, const char *path, plumb_err *e);
/* Same from a string (tests, --thresholds-inline). */
int health_thresholds_parse(struct health_thresholds *t, const char *text, const char *origin,
                            plumb_err *e);
json_t *health_thresholds_json(const struct health_thresholds *t);

struct health_alert {
    char device[32], uuid[96], vendor[16];
    char quantity[32]; /* "temp_c", "power_w", "ecc_per_hour", "throttle", ... */
    double value, limit, time;
    int critical;
    char detail[160];  /* "hw_slowdown,sw_thermal", "gen 3 < max 5" ... */
};

/* Evaluation state: which rules are currently true per device (for the
 * edge-triggered alerts and the alerts gauge) and the ECC history for rates. */
#define HEALTH_ECC_HIST 512
enum { HR_TEMP, HR_TEMP_CRIT, HR_MEM_TEMP, HR_POWER, HR_ECC_RATE, HR_ECC_UNCORR, HR_THROTTLE,
       HR_PCIE_WIDTH, HR_PCIE_GEN, HR_XID, HR_COUNT };
struct health_eval_dev {
    char device[32];
    unsigned char active[HR_COUNT];
    double active_value[HR_COUNT];
    int nhist, hist_head;
    double hist_t[HEALTH_ECC_HIST], hist_n[HEALTH_ECC_HIST];
    double first_uncorr; int have_uncorr;
    double last_xid_count; int have_xid;
};
struct health_eval {
    struct health_thresholds thr;
    struct health_eval_dev dev[HEALTH_MAX_DEVICES];
    int ndev;
};
void health_eval_init(struct health_eval *ev, const struct health_thresholds *t);
/* Applies the rules to n samples; appends new alerts (rules that just became
 * true) to out[*nout..max). Every alert is logged as a warning (critical ones as
 * errors). */
void health_eval_samples(struct health_eval *ev, const struct health_sample *s, int n,
                         struct health_alert *out, int max, int *nout);
/* Number of rules currently true for a device, and their names (comma list). */
int health_eval_active(const struct health_eval *ev, const char *device, char *names, size_t n);
json_t *health_alert_json(const struct health_alert *a);

/* Rows for plumb doctor from the GPU providers: [{"item","status":"pass|warn|fail",
 * "value","reason"}] for ECC mode, PCIe link vs max, persistence, links up,
 * row-remap state. Empty when no GPU provider opens. (health/doctor.c) */
json_t *health_doctor_rows(void);

/* ---- output ---- */
/* {"device","uuid","vendor","name","kind","time", quantities..., "unsupported":[keys],
 *  "throttle_reasons":"..."} */
json_t *health_sample_json(const struct health_sample *s);
/* Prometheus text exposition format 0.0.4 for n samples; alerts gauges from ev
 * (may be NULL). Returns a malloc'ed string. */
char *health_prom_render(const struct health_sample *s, int n, const struct health_eval *ev);

#endif
