/* GPU links from NVML and ROCm SMI (gpu_topo.h). Both libraries are
 * dlopen'ed through core/dynlib.h with our own declarations
 * (health/nvml_api.h, health/rsmi_api.h); every call is checked, and a link
 * query the driver does not support leaves the pair on its PCIe path. */
#include "health/gpu_topo.h"
#include "health/nvml_api.h"
#include "health/rsmi_api.h"
#include "core/dynlib.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gpu_topo_same_bus(const char *a, const char *b)
{
    unsigned d1 = 0, b1, v1, f1, d2 = 0, b2, v2, f2;
    if (sscanf(a, "%x:%x:%x.%x", &d1, &b1, &v1, &f1) != 4 && (d1 = 0, sscanf(a, "%x:%x.%x", &b1, &v1, &f1) != 3))
        return 0;
    if (sscanf(b, "%x:%x:%x.%x", &d2, &b2, &v2, &f2) != 4 && (d2 = 0, sscanf(b, "%x:%x.%x", &b2, &v2, &f2) != 3))
        return 0;
    return d1 == d2 && b1 == b2 && v1 == v2 && f1 == f2;
}

/* ---- NVML ---- */
struct nv_topo_api {
    nvmlReturn_t (*Init)(void);
    nvmlReturn_t (*Shutdown)(void);
    const char *(*ErrorString)(nvmlReturn_t);
    nvmlReturn_t (*GetCount)(unsigned int *);
    nvmlReturn_t (*GetHandleByIndex)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*GetName)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*GetPciInfo)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*GetNvLinkState)(nvmlDevice_t, unsigned int, int *);                 /* optional */
    nvmlReturn_t (*GetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *); /* optional */
    nvmlReturn_t (*GetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int, int *);      /* optional */
};
#define S(field, name, alt, req) DYNLIB_SYM(struct nv_topo_api, field, name, alt, req)
static const struct dynlib_sym nv_syms[] = {
    S(Init, "nvmlInit_v2", NULL, 1),
    S(Shutdown, "nvmlShutdown", NULL, 1),
    S(ErrorString, "nvmlErrorString", NULL, 1),
    S(GetCount, "nvmlDeviceGetCount_v2", NULL, 1),
    S(GetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", NULL, 1),
    S(GetName, "nvmlDeviceGetName", NULL, 1),
    S(GetPciInfo, "nvmlDeviceGetPciInfo_v3", NULL, 1),
    S(GetNvLinkState, "nvmlDeviceGetNvLinkState", NULL, 0),
    S(GetNvLinkRemotePciInfo, "nvmlDeviceGetNvLinkRemotePciInfo_v2", NULL, 0),
    S(GetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType", NULL, 0),
};
#undef S

static int read_nvml(struct gpu_topo *t, plumb_err *e)
{
    struct dynlib lib = {0};
    struct nv_topo_api f;
    static const char *const cands[] = {"libnvidia-ml.so.1"};
    int rc = dynlib_open(&lib, "nvml", getenv("PLUMB_NVML_LIB"), cands, 1, e);
    if (!rc) rc = dynlib_resolve(&lib, "nvml", nv_syms, sizeof nv_syms / sizeof nv_syms[0], &f, e);
    if (rc) {
        dynlib_close(&lib);
        return rc;
    }
    nvmlReturn_t r = f.Init();
    if (r != NVML_SUCCESS) {
        rc = err_set(e, PLUMB_EUNSUPPORTED, "nvml: nvmlInit_v2 failed: %s (%d)", f.ErrorString(r), r);
        dynlib_close(&lib);
        return rc;
    }
    unsigned n = 0;
    nvmlDevice_t dev[GPU_TOPO_MAX];
    if ((r = f.GetCount(&n)) != NVML_SUCCESS) rc = err_set(e, PLUMB_EDEVICE, "nvml: nvmlDeviceGetCount_v2: %s", f.ErrorString(r));
    else if (!n) rc = err_set(e, PLUMB_EUNSUPPORTED, "nvml: no NVIDIA GPU");
    if (n > GPU_TOPO_MAX) n = GPU_TOPO_MAX;
    for (unsigned i = 0; i < n && !rc; i++) {
        struct gpu_topo_gpu *g = &t->gpu[i];
        nvmlPciInfo_t pci;
        memset(&pci, 0, sizeof pci);
        if ((r = f.GetHandleByIndex(i, &dev[i])) != NVML_SUCCESS)
            rc = err_set(e, PLUMB_EDEVICE, "nvml: nvmlDeviceGetHandleByIndex_v2(%u): %s", i, f.ErrorString(r));
        else if ((r = f.GetPciInfo(dev[i], &pci)) != NVML_SUCCESS)
            rc = err_set(e, PLUMB_EDEVICE, "nvml: nvmlDeviceGetPciInfo_v3(GPU %u): %s", i, f.ErrorString(r));
        if (rc) break;
        pci.busId[sizeof pci.busId - 1] = 0;
        snprintf(g->bus_id, sizeof g->bus_id, "%s", pci.busId);
        if (f.GetName(dev[i], g->name, sizeof g->name) != NVML_SUCCESS) g->name[0] = 0;
        g->nvlinks_up = -1;
    }
    if (!rc) {
        t->n = (int)n;
        snprintf(t->vendor, sizeof t->vendor, "nvidia");
        snprintf(t->source, sizeof t->source, "NVML (%s)", lib.path);
    }
    /* NVLinks: where each link that is up goes */
    for (unsigned i = 0; i < n && !rc && f.GetNvLinkState; i++) {
        struct gpu_topo_gpu *g = &t->gpu[i];
        int up = 0, sw = 0;
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            int st = 0;
            if (f.GetNvLinkState(dev[i], l, &st) != NVML_SUCCESS) break; /* past the last link */
            if (st != NVML_FEATURE_ENABLED) continue;
            up++;
            int type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
            if (f.GetNvLinkRemoteDeviceType && f.GetNvLinkRemoteDeviceType(dev[i], l, &type) != NVML_SUCCESS)
                type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
            if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
                sw++;
                continue;
            }
            nvmlPciInfo_t rp;
            memset(&rp, 0, sizeof rp);
            if (!f.GetNvLinkRemotePciInfo || f.GetNvLinkRemotePciInfo(dev[i], l, &rp) != NVML_SUCCESS) continue;
            rp.busId[sizeof rp.busId - 1] = 0;
            for (unsigned j = 0; j < n; j++)
                if (j != i && gpu_topo_same_bus(rp.busId, t->gpu[j].bus_id)) {
                    t->kind[i][j] = GPU_LINK_NVLINK;
                    if (t->links[i][j] < 255) t->links[i][j]++;
                }
        }
        g->nvlinks_up = up;
        g->nvlinks_switch = sw;
    }
    /* GPUs both in the NVSwitch fabric reach each other through it */
    for (unsigned i = 0; i < n && !rc; i++)
        for (unsigned j = 0; j < n; j++) {
            if (i == j || t->kind[i][j] || t->gpu[i].nvlinks_switch <= 0 || t->gpu[j].nvlinks_switch <= 0) continue;
            int k = t->gpu[i].nvlinks_switch < t->gpu[j].nvlinks_switch ? t->gpu[i].nvlinks_switch : t->gpu[j].nvlinks_switch;
            t->kind[i][j] = GPU_LINK_NVSWITCH;
            t->links[i][j] = (unsigned char)(k > 255 ? 255 : k);
        }
    f.Shutdown();
    dynlib_close(&lib);
    if (rc) t->n = 0;
    return rc;
}

/* ---- ROCm SMI ---- */
struct rs_topo_api {
    rsmi_status_t_ (*init)(uint64_t);
    rsmi_status_t_ (*shut_down)(void);
    rsmi_status_t_ (*num_monitor_devices)(uint32_t *);
    rsmi_status_t_ (*dev_name_get)(uint32_t, char *, size_t);
    rsmi_status_t_ (*dev_pci_id_get)(uint32_t, uint64_t *);
    rsmi_status_t_ (*topo_get_link_type)(uint32_t, uint32_t, uint64_t *, int *); /* optional */
};
#define S(field, req) DYNLIB_SYM(struct rs_topo_api, field, "rsmi_" #field, NULL, req)
static const struct dynlib_sym rs_syms[] = {
    S(init, 1), S(shut_down, 1), S(num_monitor_devices, 1), S(dev_name_get, 1), S(dev_pci_id_get, 1),
    S(topo_get_link_type, 0),
};
#undef S

static int read_rsmi(struct gpu_topo *t, plumb_err *e)
{
    const char *env = getenv("PLUMB_RSMI_LIB");
    if ((!env || !*env) && access("/dev/kfd", F_OK) != 0)
        return err_set(e, PLUMB_EUNSUPPORTED, "rocm-smi: no amdgpu driver (/dev/kfd absent)");
    static const char *const cands[] = {"librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5",
                                        "librocm_smi64.so.1", "/opt/rocm/lib/librocm_smi64.so.7",
                                        "/opt/rocm/lib/librocm_smi64.so.6", "/opt/rocm/lib/librocm_smi64.so.5"};
    struct dynlib lib = {0};
    struct rs_topo_api f;
    int rc = dynlib_open(&lib, "rocm-smi", env, cands, sizeof cands / sizeof cands[0], e);
    if (!rc) rc = dynlib_resolve(&lib, "rocm-smi", rs_syms, sizeof rs_syms / sizeof rs_syms[0], &f, e);
    if (rc) {
        dynlib_close(&lib);
        return rc;
    }
    rsmi_status_t_ s = f.init(0);
    if (s != RSMI_OK) {
        dynlib_close(&lib);
        return err_set(e, PLUMB_EUNSUPPORTED, "rocm-smi: rsmi_init failed (status %d)", s);
    }
    uint32_t n = 0;
    if ((s = f.num_monitor_devices(&n)) != RSMI_OK) rc = err_set(e, PLUMB_EDEVICE, "rocm-smi: rsmi_num_monitor_devices: status %d", s);
    else if (!n) rc = err_set(e, PLUMB_EUNSUPPORTED, "rocm-smi: no AMD GPU");
    if (n > GPU_TOPO_MAX) n = GPU_TOPO_MAX;
    for (uint32_t i = 0; i < n && !rc; i++) {
        struct gpu_topo_gpu *g = &t->gpu[i];
        uint64_t bdf = 0;
        if ((s = f.dev_pci_id_get(i, &bdf)) != RSMI_OK) {
            rc = err_set(e, PLUMB_EDEVICE, "rocm-smi: rsmi_dev_pci_id_get(%u): status %d", i, s);
            break;
        }
        /* BDFID = domain << 32 | bus << 8 | device << 3 | function (rocm_smi.h) */
        snprintf(g->bus_id, sizeof g->bus_id, "%04x:%02x:%02x.%x", (unsigned)(bdf >> 32), (unsigned)(bdf >> 8) & 0xff,
                 (unsigned)(bdf >> 3) & 0x1f, (unsigned)bdf & 7);
        if (f.dev_name_get(i, g->name, sizeof g->name) != RSMI_OK) g->name[0] = 0;
        g->nvlinks_up = -1;
    }
    for (uint32_t i = 0; i < n && !rc && f.topo_get_link_type; i++)
        for (uint32_t j = 0; j < n; j++) {
            if (i == j) continue;
            uint64_t hops = 0;
            int type = 0;
            if (f.topo_get_link_type(i, j, &hops, &type) != RSMI_OK) continue;
            if (type == RSMI_LINK_XGMI) {
                t->kind[i][j] = GPU_LINK_XGMI;
                t->hops[i][j] = (unsigned char)(hops > 255 ? 255 : hops);
            }
        }
    if (!rc) {
        t->n = (int)n;
        snprintf(t->vendor, sizeof t->vendor, "amd");
        snprintf(t->source, sizeof t->source, "ROCm SMI (%s)", lib.path);
    }
    f.shut_down();
    dynlib_close(&lib);
    return rc;
}

int gpu_topo_read(struct gpu_topo *t, plumb_err *e)
{
    memset(t, 0, sizeof *t);
    plumb_err en = {0}, ea = {0};
    if (read_nvml(t, &en) == PLUMB_OK) return PLUMB_OK;
    memset(t, 0, sizeof *t);
    if (read_rsmi(t, &ea) == PLUMB_OK) return PLUMB_OK;
    memset(t, 0, sizeof *t);
    return err_set(e, PLUMB_EUNSUPPORTED, "%s; %s", en.msg, ea.msg);
}
