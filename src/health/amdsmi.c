/* amdsmi provider: libamd_smi.so by dlopen (PLUMB_AMDSMI_LIB overrides), for
 * ROCm installs where ROCm SMI is missing; health_open uses it only when the
 * rocm-smi provider did not open (both would report the same GPUs).
 *
 * Only functions with scalar arguments or with structs whose leading fields
 * have kept their place across ROCm 6.x are used, and every struct is read
 * from a zeroed buffer larger than any version's (amdsmi grew its structs'
 * reserved tails between releases). Power comes from the energy accumulator:
 * (energy delta) / (time delta) between two readings, since
 * amdsmi_power_info_t changed shape between releases. Temperatures are in
 * degrees C (docs/health.md: the header's "millidegrees" is not what it returns),
 * power caps in microwatts, memory in bytes, clocks in MHz. */
#include "health/health.h"
#include "core/dynlib.h"
#include "core/log.h"
#include "core/timer.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int amdsmi_status_t_;
typedef void *amdsmi_handle_t_;
enum { AMDSMI_OK = 0 };
enum { AMDSMI_INIT_AMD_GPUS_ = 1 << 1 };
enum { AMDSMI_TEMP_EDGE = 0, AMDSMI_TEMP_HOTSPOT = 1, AMDSMI_TEMP_VRAM = 2, AMDSMI_TEMP_CURRENT = 0 };
enum { AMDSMI_MEM_VRAM = 0, AMDSMI_CLK_SYS = 0, AMDSMI_CLK_MEM = 4 };
#define AMDSMI_BUF 512 /* bytes for any struct read below */

struct amdsmi_api {
    amdsmi_status_t_ (*init)(uint64_t);
    amdsmi_status_t_ (*shut_down)(void);
    amdsmi_status_t_ (*status_string)(amdsmi_status_t_, const char **);
    amdsmi_status_t_ (*socket_handles)(uint32_t *, amdsmi_handle_t_ *);
    amdsmi_status_t_ (*processor_handles)(amdsmi_handle_t_, uint32_t *, amdsmi_handle_t_ *);
    amdsmi_status_t_ (*uuid)(amdsmi_handle_t_, unsigned int *, char *);                 /* optional */
    amdsmi_status_t_ (*temp_metric)(amdsmi_handle_t_, int, int, int64_t *);
    amdsmi_status_t_ (*energy_count)(amdsmi_handle_t_, uint64_t *, float *, uint64_t *); /* optional */
    amdsmi_status_t_ (*power_cap_info)(amdsmi_handle_t_, uint32_t, void *);              /* first u64: cap, uW */
    amdsmi_status_t_ (*activity)(amdsmi_handle_t_, void *);                              /* u32 gfx, umc, mm */
    amdsmi_status_t_ (*mem_usage)(amdsmi_handle_t_, int, uint64_t *);
    amdsmi_status_t_ (*mem_total)(amdsmi_handle_t_, int, uint64_t *);
    amdsmi_status_t_ (*clock_info)(amdsmi_handle_t_, int, void *);                       /* first u32: MHz */
    amdsmi_status_t_ (*ecc_total)(amdsmi_handle_t_, void *);                             /* u64 corr, uncorr */
    amdsmi_status_t_ (*replay)(amdsmi_handle_t_, uint64_t *);                            /* optional */
};

struct amdsmi_state {
    struct dynlib lib;
    struct amdsmi_api f;
    int ndev;
    amdsmi_handle_t_ dev[HEALTH_MAX_DEVICES];
    double e_uj[HEALTH_MAX_DEVICES], e_t[HEALTH_MAX_DEVICES];
    int have_e[HEALTH_MAX_DEVICES];
};

#define S(field, name, req) DYNLIB_SYM(struct amdsmi_api, field, name, NULL, req)
static const struct dynlib_sym syms[] = {
    S(init, "amdsmi_init", 1), S(shut_down, "amdsmi_shut_down", 1),
    S(status_string, "amdsmi_status_code_to_string", 0), S(socket_handles, "amdsmi_get_socket_handles", 1),
    S(processor_handles, "amdsmi_get_processor_handles", 1), S(uuid, "amdsmi_get_gpu_device_uuid", 0),
    S(temp_metric, "amdsmi_get_temp_metric", 1), S(energy_count, "amdsmi_get_energy_count", 0),
    S(power_cap_info, "amdsmi_get_power_cap_info", 1), S(activity, "amdsmi_get_gpu_activity", 1),
    S(mem_usage, "amdsmi_get_gpu_memory_usage", 1), S(mem_total, "amdsmi_get_gpu_memory_total", 1),
    S(clock_info, "amdsmi_get_clock_info", 1), S(ecc_total, "amdsmi_get_gpu_total_ecc_count", 1),
    S(replay, "amdsmi_get_gpu_pci_replay_counter", 0),
};
#undef S

static const char *am_err(struct amdsmi_state *st, amdsmi_status_t_ r)
{
    const char *s = NULL;
    if (st->f.status_string && st->f.status_string(r, &s) == AMDSMI_OK && s) return s;
    return "amdsmi error";
}

static void amdsmi_free(struct amdsmi_state *st, int initialised)
{
    if (!st) return;
    if (st->lib.handle) {
        if (initialised && st->f.shut_down) st->f.shut_down();
        dynlib_close(&st->lib);
    }
    free(st);
}

static int amdsmi_open(struct health_provider *p, plumb_err *e)
{
    struct amdsmi_state *st = calloc(1, sizeof *st);
    if (!st) return err_set(e, PLUMB_ENOMEM, "amdsmi: out of memory");
    const char *env = getenv("PLUMB_AMDSMI_LIB");
    static const char *const cands[] = {"libamd_smi.so", "libamd_smi.so.26", "libamd_smi.so.25", "libamd_smi.so.24",
                                        "/opt/rocm/lib/libamd_smi.so"};
    if ((!env || !*env) && access("/dev/kfd", F_OK) != 0) {
        free(st);
        return err_set(e, PLUMB_EUNSUPPORTED, "amdsmi: no amdgpu driver (/dev/kfd absent)");
    }
    int rc = dynlib_open(&st->lib, "amdsmi", env, cands, sizeof cands / sizeof cands[0], e);
    if (!rc) rc = dynlib_resolve(&st->lib, "amdsmi", syms, sizeof syms / sizeof syms[0], &st->f, e);
    if (rc) {
        amdsmi_free(st, 0);
        return rc;
    }
    amdsmi_status_t_ r = st->f.init(AMDSMI_INIT_AMD_GPUS_);
    if (r != AMDSMI_OK) {
        int rc = err_set(e, PLUMB_EUNSUPPORTED, "amdsmi: amdsmi_init failed: %s (%d)", am_err(st, r), r);
        amdsmi_free(st, 0);
        return rc;
    }
    uint32_t ns = 0;
    if ((r = st->f.socket_handles(&ns, NULL)) != AMDSMI_OK || ns > 64) {
        int rc = err_set(e, PLUMB_EDEVICE, "amdsmi: amdsmi_get_socket_handles failed: %s", am_err(st, r));
        amdsmi_free(st, 1);
        return rc;
    }
    amdsmi_handle_t_ sockets[64];
    if (ns && (r = st->f.socket_handles(&ns, sockets)) != AMDSMI_OK) {
        int rc = err_set(e, PLUMB_EDEVICE, "amdsmi: amdsmi_get_socket_handles failed: %s", am_err(st, r));
        amdsmi_free(st, 1);
        return rc;
    }
    for (uint32_t s = 0; s < ns; s++) {
        uint32_t np = 0;
        if (st->f.processor_handles(sockets[s], &np, NULL) != AMDSMI_OK || np == 0) continue;
        if (np > (uint32_t)(HEALTH_MAX_DEVICES - st->ndev)) np = (uint32_t)(HEALTH_MAX_DEVICES - st->ndev);
        if (st->f.processor_handles(sockets[s], &np, st->dev + st->ndev) == AMDSMI_OK) st->ndev += (int)np;
    }
    if (st->ndev == 0) {
        amdsmi_free(st, 1);
        return err_set(e, PLUMB_EUNSUPPORTED, "amdsmi: no AMD GPU");
    }
    p->state = st;
    p->ndev = st->ndev;
    return PLUMB_OK;
}

/* Energy in microjoules now; 0 when unsupported. */
static int energy_uj(struct amdsmi_state *st, int i, double *uj)
{
    uint64_t acc = 0, ts = 0;
    float res = 0;
    if (!st->f.energy_count || st->f.energy_count(st->dev[i], &acc, &res, &ts) != AMDSMI_OK) return 0;
    *uj = (double)acc * res;
    return 1;
}

static int amdsmi_sample(struct health_provider *p, struct health_sample *out, int max, int *n, plumb_err *e)
{
    struct amdsmi_state *st = p->state;
    /* power needs two energy readings: on the first sample wait 100 ms once */
    int need_wait = 0;
    for (int i = 0; i < st->ndev; i++)
        if (!st->have_e[i] && energy_uj(st, i, &st->e_uj[i])) {
            st->e_t[i] = timer_now();
            st->have_e[i] = 1;
            need_wait = 1;
        }
    if (need_wait) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    unsigned char buf[AMDSMI_BUF];
    for (int i = 0; i < st->ndev; i++) {
        if (*n >= max) return err_set(e, PLUMB_EINTERNAL, "amdsmi: more than %d devices", max);
        struct health_sample *s = &out[(*n)++];
        memset(s, 0, sizeof *s);
        amdsmi_handle_t_ h = st->dev[i];
        snprintf(s->device, sizeof s->device, "amd%d", i);
        snprintf(s->vendor, sizeof s->vendor, "amd");
        s->kind = HEALTH_GPU;
        s->index = i;
        s->time = timer_wall();
        unsigned int ulen = sizeof s->uuid;
        if (!st->f.uuid || st->f.uuid(h, &ulen, s->uuid) != AMDSMI_OK) s->uuid[0] = 0;
        s->uuid[sizeof s->uuid - 1] = 0;
        int64_t t = 0;
        if (st->f.temp_metric(h, AMDSMI_TEMP_EDGE, AMDSMI_TEMP_CURRENT, &t) == AMDSMI_OK) hs_set(s, HQ_TEMP, (double)t);
        if (st->f.temp_metric(h, AMDSMI_TEMP_HOTSPOT, AMDSMI_TEMP_CURRENT, &t) == AMDSMI_OK) hs_set(s, HQ_TEMP_HOTSPOT, (double)t);
        if (st->f.temp_metric(h, AMDSMI_TEMP_VRAM, AMDSMI_TEMP_CURRENT, &t) == AMDSMI_OK) hs_set(s, HQ_MEM_TEMP, (double)t);
        if (!s->ok[HQ_TEMP] && s->ok[HQ_TEMP_HOTSPOT]) hs_set(s, HQ_TEMP, s->v[HQ_TEMP_HOTSPOT]);
        double uj;
        if (st->have_e[i] && energy_uj(st, i, &uj)) {
            double now = timer_now(), dt = now - st->e_t[i];
            if (dt > 0 && uj >= st->e_uj[i]) hs_set(s, HQ_POWER, (uj - st->e_uj[i]) / dt / 1e6);
            hs_set(s, HQ_ENERGY, uj / 1000.0);
            st->e_uj[i] = uj;
            st->e_t[i] = now;
        }
        uint64_t u64 = 0;
        memset(buf, 0, sizeof buf);
        if (st->f.power_cap_info(h, 0, buf) == AMDSMI_OK) {
            memcpy(&u64, buf, sizeof u64);
            if (u64) hs_set(s, HQ_POWER_LIMIT, (double)u64 / 1e6);
        }
        memset(buf, 0, sizeof buf);
        if (st->f.activity(h, buf) == AMDSMI_OK) {
            uint32_t a[2];
            memcpy(a, buf, sizeof a);
            hs_set(s, HQ_UTIL_GPU, a[0]);
            hs_set(s, HQ_UTIL_MEM, a[1]);
        }
        if (st->f.mem_usage(h, AMDSMI_MEM_VRAM, &u64) == AMDSMI_OK) hs_set(s, HQ_MEM_USED, (double)(u64 >> 20));
        if (st->f.mem_total(h, AMDSMI_MEM_VRAM, &u64) == AMDSMI_OK) hs_set(s, HQ_MEM_TOTAL, (double)(u64 >> 20));
        uint32_t mhz;
        memset(buf, 0, sizeof buf);
        if (st->f.clock_info(h, AMDSMI_CLK_SYS, buf) == AMDSMI_OK) {
            memcpy(&mhz, buf, sizeof mhz);
            hs_set(s, HQ_CLK_SM, mhz);
        }
        memset(buf, 0, sizeof buf);
        if (st->f.clock_info(h, AMDSMI_CLK_MEM, buf) == AMDSMI_OK) {
            memcpy(&mhz, buf, sizeof mhz);
            hs_set(s, HQ_CLK_MEM, mhz);
        }
        memset(buf, 0, sizeof buf);
        if (st->f.ecc_total(h, buf) == AMDSMI_OK) {
            uint64_t ec[2];
            memcpy(ec, buf, sizeof ec);
            hs_set(s, HQ_ECC_CORR_AGG, (double)ec[0]);
            hs_set(s, HQ_ECC_UNCORR_AGG, (double)ec[1]);
        }
        if (st->f.replay && st->f.replay(h, &u64) == AMDSMI_OK) hs_set(s, HQ_PCIE_REPLAY, (double)u64);
    }
    return PLUMB_OK;
}

static json_t *amdsmi_info(struct health_provider *p)
{
    struct amdsmi_state *st = p->state;
    json_t *o = json_object();
    json_object_set_new(o, "provider", json_string("amdsmi"));
    json_object_set_new(o, "library", json_string(st->lib.path));
    json_object_set_new(o, "devices", json_integer(st->ndev));
    return o;
}

static void amdsmi_close(struct health_provider *p)
{
    amdsmi_free(p->state, 1);
    p->state = NULL;
}

const struct health_provider_ops health_amdsmi_ops = {"amdsmi", amdsmi_open, amdsmi_sample, amdsmi_info, amdsmi_close};
