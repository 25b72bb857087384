/* NVML provider: libnvidia-ml.so.1 by dlopen, our declarations in
 * health/nvml_api.h. Every call is checked; NVML_ERROR_NOT_SUPPORTED (and any
 * other failure of an optional quantity) marks the quantity unsupported. A lost
 * GPU is an error naming the device. Xid and double-bit ECC events are drained
 * from an event set on each sample (timeout 0: sampling never blocks). */
#include "health/health.h"
#include "health/nvml_api.h"
#include "core/log.h"
#include "core/dynlib.h"
#include "core/timer.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nvml_state {
    struct dynlib lib;
    struct nvml_api f;
    unsigned ndev;
    nvmlDevice_t dev[HEALTH_MAX_DEVICES];
    char uuid[HEALTH_MAX_DEVICES][96], name[HEALTH_MAX_DEVICES][96];
    nvmlEventSet_t events;
    int events_ok[HEALTH_MAX_DEVICES];
    double xid_count[HEALTH_MAX_DEVICES], xid_last[HEALTH_MAX_DEVICES];
    int have_xid_last[HEALTH_MAX_DEVICES];
    char driver[80];
};

#define S(field, name, alt, req) DYNLIB_SYM(struct nvml_api, field, name, alt, req)
static const struct dynlib_sym syms[] = {
    S(Init, "nvmlInit_v2", NULL, 1),
    S(Shutdown, "nvmlShutdown", NULL, 1),
    S(ErrorString, "nvmlErrorString", NULL, 1),
    S(SystemGetDriverVersion, "nvmlSystemGetDriverVersion", NULL, 0),
    S(GetCount, "nvmlDeviceGetCount_v2", NULL, 1),
    S(GetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", NULL, 1),
    S(GetName, "nvmlDeviceGetName", NULL, 1),
    S(GetUUID, "nvmlDeviceGetUUID", NULL, 1),
    S(GetTemperature, "nvmlDeviceGetTemperature", NULL, 1),
    S(GetFieldValues, "nvmlDeviceGetFieldValues", NULL, 0),
    S(GetPowerUsage, "nvmlDeviceGetPowerUsage", NULL, 1),
    S(GetEnforcedPowerLimit, "nvmlDeviceGetEnforcedPowerLimit", NULL, 1),
    S(GetTotalEnergyConsumption, "nvmlDeviceGetTotalEnergyConsumption", NULL, 0),
    S(GetUtilizationRates, "nvmlDeviceGetUtilizationRates", NULL, 1),
    S(GetMemoryInfo, "nvmlDeviceGetMemoryInfo", NULL, 1),
    S(GetMemoryInfo_v2, "nvmlDeviceGetMemoryInfo_v2", NULL, 0),
    S(GetClockInfo, "nvmlDeviceGetClockInfo", NULL, 1),
    S(GetClocksEventReasons, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons", 0),
    S(GetTotalEccErrors, "nvmlDeviceGetTotalEccErrors", NULL, 1),
    S(GetEccMode, "nvmlDeviceGetEccMode", NULL, 1),
    S(GetRetiredPages, "nvmlDeviceGetRetiredPages", NULL, 0),
    S(GetRemappedRows, "nvmlDeviceGetRemappedRows", NULL, 0),
    S(GetCurrPcieLinkGeneration, "nvmlDeviceGetCurrPcieLinkGeneration", NULL, 1),
    S(GetMaxPcieLinkGeneration, "nvmlDeviceGetMaxPcieLinkGeneration", NULL, 1),
    S(GetCurrPcieLinkWidth, "nvmlDeviceGetCurrPcieLinkWidth", NULL, 1),
    S(GetMaxPcieLinkWidth, "nvmlDeviceGetMaxPcieLinkWidth", NULL, 1),
    S(GetPcieReplayCounter, "nvmlDeviceGetPcieReplayCounter", NULL, 0),
    S(GetNvLinkState, "nvmlDeviceGetNvLinkState", NULL, 0),
    S(GetPersistenceMode, "nvmlDeviceGetPersistenceMode", NULL, 0),
    S(EventSetCreate, "nvmlEventSetCreate", NULL, 0),
    S(RegisterEvents, "nvmlDeviceRegisterEvents", NULL, 0),
    S(EventSetWait, "nvmlEventSetWait_v2", NULL, 0),
    S(EventSetFree, "nvmlEventSetFree", NULL, 0),
};
#undef S

static const char *nv_err(struct nvml_state *st, nvmlReturn_t r)
{
    const char *s = st->f.ErrorString ? st->f.ErrorString(r) : NULL;
    return s ? s : "unknown NVML error";
}

static void nvml_free(struct nvml_state *st)
{
    if (!st) return;
    if (st->events && st->f.EventSetFree) st->f.EventSetFree(st->events);
    if (st->lib.handle) {
        if (st->f.Shutdown) st->f.Shutdown();
        dynlib_close(&st->lib);
    }
    free(st);
}

static int nvml_open(struct health_provider *p, plumb_err *e)
{
    struct nvml_state *st = calloc(1, sizeof *st);
    if (!st) return err_set(e, PLUMB_ENOMEM, "nvml: out of memory");
    static const char *const cands[] = {"libnvidia-ml.so.1"};
    int rc = dynlib_open(&st->lib, "nvml", getenv("PLUMB_NVML_LIB"), cands, 1, e);
    /* a required symbol missing: a driver older than the versioned names */
    if (!rc) rc = dynlib_resolve(&st->lib, "nvml", syms, sizeof syms / sizeof syms[0], &st->f, e);
    if (rc) {
        memset(&st->f, 0, sizeof st->f); /* nothing to shut down */
        nvml_free(st);
        return rc;
    }
    nvmlReturn_t r = st->f.Init();
    if (r != NVML_SUCCESS) {
        int rc = err_set(e, PLUMB_EUNSUPPORTED, "nvml: nvmlInit_v2 failed: %s (%d)", nv_err(st, r), r);
        st->f.Shutdown = NULL; /* not initialised: nothing to shut down */
        nvml_free(st);
        return rc;
    }
    if (st->f.SystemGetDriverVersion && st->f.SystemGetDriverVersion(st->driver, sizeof st->driver) != NVML_SUCCESS)
        st->driver[0] = 0;
    unsigned n = 0;
    if ((r = st->f.GetCount(&n)) != NVML_SUCCESS) {
        int rc = err_set(e, PLUMB_EDEVICE, "nvml: nvmlDeviceGetCount_v2 failed: %s", nv_err(st, r));
        nvml_free(st);
        return rc;
    }
    if (n == 0) {
        nvml_free(st);
        return err_set(e, PLUMB_EUNSUPPORTED, "nvml: no NVIDIA GPU");
    }
    if (n > HEALTH_MAX_DEVICES) n = HEALTH_MAX_DEVICES;
    for (unsigned i = 0; i < n; i++) {
        if ((r = st->f.GetHandleByIndex(i, &st->dev[i])) != NVML_SUCCESS) {
            int rc = err_set(e, PLUMB_EDEVICE, "nvml: nvmlDeviceGetHandleByIndex_v2(%u) failed: %s", i, nv_err(st, r));
            nvml_free(st);
            return rc;
        }
        if (st->f.GetUUID(st->dev[i], st->uuid[i], sizeof st->uuid[i]) != NVML_SUCCESS) st->uuid[i][0] = 0;
        if (st->f.GetName(st->dev[i], st->name[i], sizeof st->name[i]) != NVML_SUCCESS) st->name[i][0] = 0;
    }
    st->ndev = n;
    /* Critical events: Xid and double-bit ECC. Not every GPU supports event
     * registration (then xid_* are unsupported for that device). */
    if (st->f.EventSetCreate && st->f.RegisterEvents && st->f.EventSetWait &&
        st->f.EventSetCreate(&st->events) == NVML_SUCCESS) {
        for (unsigned i = 0; i < n; i++) {
            r = st->f.RegisterEvents(st->dev[i], NVML_EVENT_TYPE_XID | NVML_EVENT_TYPE_DBE, st->events);
            if (r != NVML_SUCCESS) r = st->f.RegisterEvents(st->dev[i], NVML_EVENT_TYPE_XID, st->events);
            st->events_ok[i] = r == NVML_SUCCESS;
            if (r != NVML_SUCCESS) log_debug("nvml: device %u: event registration: %s", i, nv_err(st, r));
        }
    } else {
        st->events = NULL;
    }
    p->state = st;
    p->ndev = (int)n;
    return PLUMB_OK;
}

static void drain_events(struct nvml_state *st)
{
    if (!st->events) return;
    for (int guard = 0; guard < 10000; guard++) {
        nvmlEventData_t d;
        memset(&d, 0, sizeof d);
        nvmlReturn_t r = st->f.EventSetWait(st->events, &d, 0);
        if (r != NVML_SUCCESS) {
            if (r != NVML_ERROR_TIMEOUT) log_debug("nvml: nvmlEventSetWait_v2: %s", nv_err(st, r));
            return;
        }
        for (unsigned i = 0; i < st->ndev; i++) {
            if (st->dev[i] != d.device) continue;
            st->xid_count[i] += 1;
            if (d.eventType & NVML_EVENT_TYPE_XID) {
                st->xid_last[i] = (double)d.eventData;
                st->have_xid_last[i] = 1;
            }
            log_warn("nvml: nvidia%u: critical event %s %llu", i,
                     (d.eventType & NVML_EVENT_TYPE_XID) ? "Xid" : "double-bit ECC", d.eventData);
        }
    }
}

static int nvml_sample(struct health_provider *p, struct health_sample *out, int max, int *n, plumb_err *e)
{
    struct nvml_state *st = p->state;
    drain_events(st);
    for (unsigned i = 0; i < st->ndev; i++) {
        if (*n >= max) return err_set(e, PLUMB_EINTERNAL, "nvml: more than %d devices", max);
        struct health_sample *s = &out[(*n)++];
        memset(s, 0, sizeof *s);
        nvmlDevice_t d = st->dev[i];
        snprintf(s->device, sizeof s->device, "nvidia%u", i);
        snprintf(s->uuid, sizeof s->uuid, "%s", st->uuid[i]);
        snprintf(s->vendor, sizeof s->vendor, "nvidia");
        snprintf(s->name, sizeof s->name, "%s", st->name[i]);
        s->kind = HEALTH_GPU;
        s->index = (int)i;
        s->time = timer_wall();
        unsigned u = 0;
        unsigned long long ull = 0;
        nvmlReturn_t r = st->f.GetTemperature(d, NVML_TEMPERATURE_GPU, &u);
        if (r == NVML_ERROR_GPU_IS_LOST)
            return err_set(e, PLUMB_EDEVICE, "nvml: nvidia%u (%s) has fallen off the bus (GPU is lost)", i, st->uuid[i]);
        if (r == NVML_SUCCESS) hs_set(s, HQ_TEMP, u);
        if (st->f.GetFieldValues) {
            nvmlFieldValue_t fv;
            memset(&fv, 0, sizeof fv);
            fv.fieldId = NVML_FI_DEV_MEMORY_TEMP;
            if (st->f.GetFieldValues(d, 1, &fv) == NVML_SUCCESS && fv.nvmlReturn == NVML_SUCCESS) {
                double t = fv.valueType == NVML_VALUE_TYPE_DOUBLE ? fv.value.dVal
                           : fv.valueType == NVML_VALUE_TYPE_UNSIGNED_LONG_LONG ? (double)fv.value.ullVal
                           : fv.valueType == NVML_VALUE_TYPE_SIGNED_LONG_LONG ? (double)fv.value.sllVal
                           : fv.valueType == NVML_VALUE_TYPE_UNSIGNED_LONG ? (double)fv.value.ulVal
                           : fv.valueType == NVML_VALUE_TYPE_SIGNED_INT ? (double)fv.value.siVal
                           : (double)fv.value.uiVal;
                /* NVML reports 0 when the board has no memory sensor */
                if (t > 0) hs_set(s, HQ_MEM_TEMP, t);
            }
        }
        if (st->f.GetPowerUsage(d, &u) == NVML_SUCCESS) hs_set(s, HQ_POWER, u / 1000.0);
        if (st->f.GetEnforcedPowerLimit(d, &u) == NVML_SUCCESS) hs_set(s, HQ_POWER_LIMIT, u / 1000.0);
        if (st->f.GetTotalEnergyConsumption && st->f.GetTotalEnergyConsumption(d, &ull) == NVML_SUCCESS)
            hs_set(s, HQ_ENERGY, (double)ull);
        nvmlUtilization_t ut;
        if (st->f.GetUtilizationRates(d, &ut) == NVML_SUCCESS) {
            hs_set(s, HQ_UTIL_GPU, ut.gpu);
            hs_set(s, HQ_UTIL_MEM, ut.memory);
        }
        /* v2 separates driver-reserved memory from used, as nvidia-smi does */
        nvmlMemory_v2_t m2;
        memset(&m2, 0, sizeof m2);
        m2.version = NVML_MEMORY_V2_VERSION;
        if (st->f.GetMemoryInfo_v2 && st->f.GetMemoryInfo_v2(d, &m2) == NVML_SUCCESS) {
            hs_set(s, HQ_MEM_USED, (double)(m2.used >> 20));
            hs_set(s, HQ_MEM_TOTAL, (double)(m2.total >> 20));
        } else {
            nvmlMemory_t m;
            if (st->f.GetMemoryInfo(d, &m) == NVML_SUCCESS) {
                hs_set(s, HQ_MEM_USED, (double)(m.used >> 20));
                hs_set(s, HQ_MEM_TOTAL, (double)(m.total >> 20));
            }
        }
        if (st->f.GetClockInfo(d, NVML_CLOCK_SM, &u) == NVML_SUCCESS) hs_set(s, HQ_CLK_SM, u);
        if (st->f.GetClockInfo(d, NVML_CLOCK_MEM, &u) == NVML_SUCCESS) hs_set(s, HQ_CLK_MEM, u);
        if (st->f.GetClocksEventReasons && st->f.GetClocksEventReasons(d, &ull) == NVML_SUCCESS) {
            hs_set(s, HQ_THROTTLE, (double)ull);
            s->throttle_bits = ull;
        }
        int cur = 0, pend = 0;
        if (st->f.GetEccMode(d, &cur, &pend) == NVML_SUCCESS) hs_set(s, HQ_ECC_MODE, cur == NVML_FEATURE_ENABLED);
        static const int ecc_q[4][3] = {
            {HQ_ECC_CORR_VOL, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC},
            {HQ_ECC_UNCORR_VOL, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC},
            {HQ_ECC_CORR_AGG, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC},
            {HQ_ECC_UNCORR_AGG, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC},
        };
        for (int k = 0; k < 4; k++)
            if (st->f.GetTotalEccErrors(d, ecc_q[k][1], ecc_q[k][2], &ull) == NVML_SUCCESS)
                hs_set(s, ecc_q[k][0], (double)ull);
        if (st->f.GetRetiredPages) {
            double tot = 0;
            int okc = 0;
            for (int cause = 0; cause < 2; cause++) {
                unsigned cnt = 0;
                r = st->f.GetRetiredPages(d, cause, &cnt, NULL);
                if (r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE) {
                    tot += cnt;
                    okc++;
                }
            }
            if (okc == 2) hs_set(s, HQ_RETIRED_PAGES, tot);
        }
        unsigned rc_ = 0, ru = 0, rp = 0, rf = 0;
        if (st->f.GetRemappedRows && st->f.GetRemappedRows(d, &rc_, &ru, &rp, &rf) == NVML_SUCCESS) {
            hs_set(s, HQ_REMAP_CORR, rc_);
            hs_set(s, HQ_REMAP_UNCORR, ru);
            hs_set(s, HQ_REMAP_PENDING, rp != 0);
            hs_set(s, HQ_REMAP_FAILURE, rf != 0);
        }
        if (st->f.GetCurrPcieLinkGeneration(d, &u) == NVML_SUCCESS) hs_set(s, HQ_PCIE_GEN, u);
        if (st->f.GetMaxPcieLinkGeneration(d, &u) == NVML_SUCCESS) hs_set(s, HQ_PCIE_GEN_MAX, u);
        if (st->f.GetCurrPcieLinkWidth(d, &u) == NVML_SUCCESS) hs_set(s, HQ_PCIE_WIDTH, u);
        if (st->f.GetMaxPcieLinkWidth(d, &u) == NVML_SUCCESS) hs_set(s, HQ_PCIE_WIDTH_MAX, u);
        if (st->f.GetPcieReplayCounter && st->f.GetPcieReplayCounter(d, &u) == NVML_SUCCESS)
            hs_set(s, HQ_PCIE_REPLAY, u);
        if (st->f.GetNvLinkState) {
            int up = 0, total = 0;
            for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
                int state = 0;
                /* links that do not exist answer NOT_SUPPORTED / INVALID_ARGUMENT */
                if (st->f.GetNvLinkState(d, l, &state) != NVML_SUCCESS) continue;
                total++;
                up += state == NVML_FEATURE_ENABLED;
            }
            if (total) {
                hs_set(s, HQ_LINKS_UP, up);
                hs_set(s, HQ_LINKS_TOTAL, total);
            }
        }
        if (st->f.GetPersistenceMode && st->f.GetPersistenceMode(d, &cur) == NVML_SUCCESS)
            hs_set(s, HQ_PERSISTENCE, cur == NVML_FEATURE_ENABLED);
        if (st->events_ok[i]) {
            hs_set(s, HQ_XID_COUNT, st->xid_count[i]);
            if (st->have_xid_last[i]) hs_set(s, HQ_XID_LAST, st->xid_last[i]);
        }
    }
    return PLUMB_OK;
}

static json_t *nvml_info(struct health_provider *p)
{
    struct nvml_state *st = p->state;
    json_t *o = json_object();
    json_object_set_new(o, "provider", json_string("nvml"));
    if (st->driver[0]) json_object_set_new(o, "driver", json_string(st->driver));
    json_object_set_new(o, "devices", json_integer(st->ndev));
    return o;
}

static void nvml_close(struct health_provider *p)
{
    nvml_free(p->state);
    p->state = NULL;
}

const struct health_provider_ops health_nvml_ops = {"nvml", nvml_open, nvml_sample, nvml_info, nvml_close};
