/* A fake libnvidia-ml.so.1 for tests: exports the NVML symbols plumb's nvml
 * provider dlopens, with values scripted by the test through fake_nvml_set()
 * (found with dlsym on the same library handle). A value of NAN makes the
 * quantity answer NVML_ERROR_NOT_SUPPORTED. Built by the test build as
 * build/tests/libfake_nvml.so; FAKE_NVML_DEVICES sets the device count
 * (default 2), FAKE_NVML_INIT_FAIL=1 makes nvmlInit_v2 fail, FAKE_NVML_TEMP sets
 * every device's temperature. Topology (plumb comm --topology):
 * FAKE_NVML_PCI="0000:12:00.0,..." the devices' PCI bus ids (default
 * 00000000:<0x10 + i>:00.0), FAKE_NVML_NVLINK the NVLinks: "switch" (every
 * link up goes to an NVSwitch) or "I-J:N,..." (N links between GPUs I and
 * J; the links up are exactly these); unset, the remote end of a link is
 * not supported. */
#include "health/nvml_api.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

enum {
    K_TEMP, K_MEM_TEMP, K_POWER_MW, K_LIMIT_MW, K_ENERGY_MJ, K_UTIL_GPU, K_UTIL_MEM, K_MEM_TOTAL, K_MEM_USED,
    K_MEM_RESERVED, K_CLK_SM, K_CLK_MEM, K_THROTTLE, K_ECC_CV, K_ECC_UV, K_ECC_CA, K_ECC_UA, K_ECC_MODE,
    K_RETIRED_SBE, K_RETIRED_DBE, K_REMAP_C, K_REMAP_U, K_REMAP_P, K_REMAP_F, K_PCIE_GEN, K_PCIE_GEN_MAX,
    K_PCIE_W, K_PCIE_W_MAX, K_REPLAY, K_NVLINKS, K_NVLINKS_UP, K_PERSIST, K_LOST, K_EVENTS, NK
};
static const char *knames[NK] = {
    "temp", "mem_temp", "power_mw", "limit_mw", "energy_mj", "util_gpu", "util_mem", "mem_total", "mem_used",
    "mem_reserved", "clk_sm", "clk_mem", "throttle", "ecc_cv", "ecc_uv", "ecc_ca", "ecc_ua", "ecc_mode",
    "retired_sbe", "retired_dbe", "remap_c", "remap_u", "remap_p", "remap_f", "pcie_gen", "pcie_gen_max",
    "pcie_w", "pcie_w_max", "replay", "nvlinks", "nvlinks_up", "persist", "lost", "events",
};

#define FAKE_MAX 8
struct fdev {
    double v[NK];
};
static struct fdev devs[FAKE_MAX];
static unsigned ndev;
static int inited, initialised_defaults;
static struct {
    unsigned dev;
    unsigned long long type, data;
} queue[64];
static int qhead, qlen;
/* NVLink far ends: peer GPU index, or -2 an NVSwitch; -1 unknown */
#define FAKE_LINKS 18
static int link_peer[FAKE_MAX][FAKE_LINKS];
static char bus_ids[FAKE_MAX][32];

static void topo_reset(void)
{
    for (unsigned i = 0; i < FAKE_MAX; i++) {
        snprintf(bus_ids[i], sizeof bus_ids[i], "00000000:%02X:00.0", 0x10 + i);
        for (int l = 0; l < FAKE_LINKS; l++) link_peer[i][l] = -1;
    }
    const char *pci = getenv("FAKE_NVML_PCI");
    if (pci && *pci) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s", pci);
        unsigned i = 0;
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && i < FAKE_MAX; t = strtok_r(NULL, ",", &save))
            snprintf(bus_ids[i++], sizeof bus_ids[0], "%s", t);
    }
    const char *nv = getenv("FAKE_NVML_NVLINK");
    if (!nv || !*nv) return;
    if (!strcmp(nv, "switch")) {
        for (unsigned i = 0; i < FAKE_MAX; i++)
            for (int l = 0; l < FAKE_LINKS; l++) link_peer[i][l] = -2;
        return;
    }
    int used[FAKE_MAX] = {0};
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", nv);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        unsigned a, b, n;
        if (sscanf(t, "%u-%u:%u", &a, &b, &n) != 3 || a >= FAKE_MAX || b >= FAKE_MAX) continue;
        for (unsigned k = 0; k < n && used[a] < FAKE_LINKS && used[b] < FAKE_LINKS; k++) {
            link_peer[a][used[a]++] = (int)b;
            link_peer[b][used[b]++] = (int)a;
        }
    }
    for (unsigned i = 0; i < FAKE_MAX; i++) devs[i].v[K_NVLINKS_UP] = used[i];
}

void fake_nvml_reset(void)
{
    const char *nd = getenv("FAKE_NVML_DEVICES");
    ndev = nd ? (unsigned)atoi(nd) : 2;
    if (ndev > FAKE_MAX) ndev = FAKE_MAX;
    for (unsigned i = 0; i < FAKE_MAX; i++) {
        double *v = devs[i].v;
        v[K_TEMP] = 40 + i;
        v[K_MEM_TEMP] = 50 + i;
        v[K_POWER_MW] = 123456;
        v[K_LIMIT_MW] = 700000;
        v[K_ENERGY_MJ] = 987654321;
        v[K_UTIL_GPU] = 37;
        v[K_UTIL_MEM] = 12;
        v[K_MEM_TOTAL] = 150754820096.0; /* 143771 MiB, an H200's */
        v[K_MEM_USED] = 1048576.0 * 1234;
        v[K_MEM_RESERVED] = 1048576.0 * 560;
        v[K_CLK_SM] = 1980;
        v[K_CLK_MEM] = 3201;
        v[K_THROTTLE] = 0x1; /* gpu_idle */
        v[K_ECC_CV] = 0;
        v[K_ECC_UV] = 0;
        v[K_ECC_CA] = 5;
        v[K_ECC_UA] = 0;
        v[K_ECC_MODE] = 1;
        v[K_RETIRED_SBE] = NAN; /* Hopper: row remapping instead of page retirement */
        v[K_RETIRED_DBE] = NAN;
        v[K_REMAP_C] = 0;
        v[K_REMAP_U] = 0;
        v[K_REMAP_P] = 0;
        v[K_REMAP_F] = 0;
        v[K_PCIE_GEN] = 5;
        v[K_PCIE_GEN_MAX] = 5;
        v[K_PCIE_W] = 16;
        v[K_PCIE_W_MAX] = 16;
        v[K_REPLAY] = 0;
        v[K_NVLINKS] = 18;
        v[K_NVLINKS_UP] = 18;
        v[K_PERSIST] = 1;
        v[K_LOST] = 0;
        v[K_EVENTS] = 1;
    }
    /* FAKE_NVML_TEMP sets every device's temperature (CLI tests) */
    const char *ft = getenv("FAKE_NVML_TEMP");
    if (ft && *ft)
        for (unsigned i = 0; i < FAKE_MAX; i++) devs[i].v[K_TEMP] = atof(ft);
    qhead = qlen = 0;
    topo_reset();
    initialised_defaults = 1;
}

static void ensure(void)
{
    if (!initialised_defaults) fake_nvml_reset();
}

/* Returns 0, or -1 for an unknown key or device. */
int fake_nvml_set(unsigned dev, const char *key, double value)
{
    ensure();
    if (dev >= FAKE_MAX) return -1;
    for (int k = 0; k < NK; k++)
        if (!strcmp(knames[k], key)) {
            devs[dev].v[k] = value;
            return 0;
        }
    fprintf(stderr, "fake_nvml_set: unknown key %s\n", key);
    return -1;
}

/* Queues a critical Xid event for the device. */
void fake_nvml_xid(unsigned dev, unsigned long long xid)
{
    ensure();
    if (qlen >= 64) return;
    int i = (qhead + qlen++) % 64;
    queue[i].dev = dev;
    queue[i].type = NVML_EVENT_TYPE_XID;
    queue[i].data = xid;
}

static struct fdev *D(nvmlDevice_t d)
{
    struct fdev *f = (struct fdev *)d;
    if (f < devs || f >= devs + ndev) return NULL;
    return f;
}
#define GET(d, k, out, T)                                       \
    do {                                                        \
        struct fdev *f_ = D(d);                                 \
        if (!inited) return NVML_ERROR_UNINITIALIZED;           \
        if (!f_ || !(out)) return NVML_ERROR_INVALID_ARGUMENT;  \
        if (f_->v[K_LOST] != 0) return NVML_ERROR_GPU_IS_LOST;  \
        if (isnan(f_->v[k])) return NVML_ERROR_NOT_SUPPORTED;   \
        *(out) = (T)f_->v[k];                                   \
        return NVML_SUCCESS;                                    \
    } while (0)

nvmlReturn_t nvmlInit_v2(void)
{
    ensure();
    const char *f = getenv("FAKE_NVML_INIT_FAIL");
    if (f && *f == '1') return NVML_ERROR_DRIVER_NOT_LOADED;
    inited = 1;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlShutdown(void)
{
    inited = 0;
    return NVML_SUCCESS;
}
const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    default: return "Unknown Error";
    }
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned n)
{
    snprintf(v, n, "999.99-fake");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    *n = ndev;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d)
{
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if (i >= ndev) return NVML_ERROR_INVALID_ARGUMENT;
    *d = (nvmlDevice_t)&devs[i];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned n)
{
    if (!D(d)) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(s, n, "Fake H200");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned n)
{
    if (!D(d)) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(s, n, "GPU-fake-%02d", (int)(D(d) - devs));
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *t)
{
    if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    GET(d, K_TEMP, t, unsigned);
}
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *fv)
{
    struct fdev *f = D(d);
    if (!f) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < n; i++) {
        if (fv[i].fieldId == NVML_FI_DEV_MEMORY_TEMP && !isnan(f->v[K_MEM_TEMP])) {
            fv[i].nvmlReturn = NVML_SUCCESS;
            fv[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
            fv[i].value.uiVal = (unsigned)f->v[K_MEM_TEMP];
        } else {
            fv[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        }
    }
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *p) { GET(d, K_POWER_MW, p, unsigned); }
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned *p) { GET(d, K_LIMIT_MW, p, unsigned); }
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *e)
{
    GET(d, K_ENERGY_MJ, e, unsigned long long);
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    struct fdev *f = D(d);
    if (!f) return NVML_ERROR_INVALID_ARGUMENT;
    if (isnan(f->v[K_UTIL_GPU])) return NVML_ERROR_NOT_SUPPORTED;
    u->gpu = (unsigned)f->v[K_UTIL_GPU];
    u->memory = (unsigned)f->v[K_UTIL_MEM];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    struct fdev *f = D(d);
    if (!f) return NVML_ERROR_INVALID_ARGUMENT;
    /* v1: used includes the driver's reservation */
    m->total = (unsigned long long)f->v[K_MEM_TOTAL];
    m->used = (unsigned long long)(f->v[K_MEM_USED] + f->v[K_MEM_RESERVED]);
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    struct fdev *f = D(d);
    if (!f) return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != NVML_MEMORY_V2_VERSION) return NVML_ERROR_INVALID_ARGUMENT;
    m->total = (unsigned long long)f->v[K_MEM_TOTAL];
    m->reserved = (unsigned long long)f->v[K_MEM_RESERVED];
    m->used = (unsigned long long)f->v[K_MEM_USED];
    m->free = m->total - m->reserved - m->used;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *c)
{
    if (type == NVML_CLOCK_SM) GET(d, K_CLK_SM, c, unsigned);
    if (type == NVML_CLOCK_MEM) GET(d, K_CLK_MEM, c, unsigned);
    return NVML_ERROR_INVALID_ARGUMENT;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r)
{
    GET(d, K_THROTTLE, r, unsigned long long);
}
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long *n)
{
    int k = type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? (counter == NVML_VOLATILE_ECC ? K_ECC_CV : K_ECC_CA)
                                                     : (counter == NVML_VOLATILE_ECC ? K_ECC_UV : K_ECC_UA);
    GET(d, k, n, unsigned long long);
}
nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, int *cur, int *pend)
{
    if (pend) *pend = 0;
    GET(d, K_ECC_MODE, cur, int);
}
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned *count, unsigned long long *addr)
{
    (void)addr;
    struct fdev *f = D(d);
    if (!f) return NVML_ERROR_INVALID_ARGUMENT;
    double v = f->v[cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT ? K_RETIRED_DBE : K_RETIRED_SBE];
    if (isnan(v)) return NVML_ERROR_NOT_SUPPORTED;
    unsigned have = *count;
    *count = (unsigned)v;
    return have < (unsigned)v ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned *c, unsigned *u, unsigned *p, unsigned *fl)
{
    struct fdev *f = D(d);
    if (!f) return NVML_ERROR_INVALID_ARGUMENT;
    if (isnan(f->v[K_REMAP_C])) return NVML_ERROR_NOT_SUPPORTED;
    *c = (unsigned)f->v[K_REMAP_C];
    *u = (unsigned)f->v[K_REMAP_U];
    *p = (unsigned)f->v[K_REMAP_P];
    *fl = (unsigned)f->v[K_REMAP_F];
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned *g) { GET(d, K_PCIE_GEN, g, unsigned); }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned *g) { GET(d, K_PCIE_GEN_MAX, g, unsigned); }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned *w) { GET(d, K_PCIE_W, w, unsigned); }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned *w) { GET(d, K_PCIE_W_MAX, w, unsigned); }
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned *r) { GET(d, K_REPLAY, r, unsigned); }
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, int *state)
{
    struct fdev *f = D(d);
    if (!f) return NVML_ERROR_INVALID_ARGUMENT;
    if (isnan(f->v[K_NVLINKS]) || link >= (unsigned)f->v[K_NVLINKS]) return NVML_ERROR_NOT_SUPPORTED;
    *state = link < (unsigned)f->v[K_NVLINKS_UP] ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
    struct fdev *f = D(d);
    if (!inited) return NVML_ERROR_UNINITIALIZED;
    if (!f || !p) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned i = (unsigned)(f - devs), dom = 0, bus = 0, dv = 0, fn = 0;
    memset(p, 0, sizeof *p);
    snprintf(p->busId, sizeof p->busId, "%s", bus_ids[i]);
    sscanf(bus_ids[i], "%x:%x:%x.%x", &dom, &bus, &dv, &fn);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04X:%02X:%02X.%X", dom & 0xffff, bus, dv, fn);
    p->domain = dom, p->bus = bus, p->device = dv;
    p->pciDeviceId = 0x233510de;
    return NVML_SUCCESS;
}
static int up_link(nvmlDevice_t d, unsigned link, unsigned *i)
{
    struct fdev *f = D(d);
    if (!f || link >= FAKE_LINKS || isnan(f->v[K_NVLINKS]) || link >= (unsigned)f->v[K_NVLINKS_UP]) return 0;
    *i = (unsigned)(f - devs);
    return 1;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned link, int *type)
{
    unsigned i;
    if (!up_link(d, link, &i)) return NVML_ERROR_INVALID_ARGUMENT;
    if (link_peer[i][link] == -1) return NVML_ERROR_NOT_SUPPORTED;
    *type = link_peer[i][link] == -2 ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link, nvmlPciInfo_t *p)
{
    unsigned i;
    if (!up_link(d, link, &i)) return NVML_ERROR_INVALID_ARGUMENT;
    int peer = link_peer[i][link];
    if (peer == -1) return NVML_ERROR_NOT_SUPPORTED;
    memset(p, 0, sizeof *p);
    /* an NVSwitch has a bus id of its own */
    snprintf(p->busId, sizeof p->busId, "%s", peer == -2 ? "00000000:C0:00.0" : bus_ids[peer]);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *m) { GET(d, K_PERSIST, m, int); }

static int the_set;
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *s)
{
    *s = (nvmlEventSet_t)&the_set;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long mask, nvmlEventSet_t s)
{
    struct fdev *f = D(d);
    (void)mask;
    if (!f || s != (nvmlEventSet_t)&the_set) return NVML_ERROR_INVALID_ARGUMENT;
    return f->v[K_EVENTS] != 0 ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t s, nvmlEventData_t *data, unsigned timeout_ms)
{
    (void)timeout_ms;
    if (s != (nvmlEventSet_t)&the_set) return NVML_ERROR_INVALID_ARGUMENT;
    if (!qlen) return NVML_ERROR_TIMEOUT;
    memset(data, 0, sizeof *data);
    data->device = (nvmlDevice_t)&devs[queue[qhead].dev];
    data->eventType = queue[qhead].type;
    data->eventData = queue[qhead].data;
    qhead = (qhead + 1) % 64;
    qlen--;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t s)
{
    (void)s;
    return NVML_SUCCESS;
}
