/* A fake libamd_smi for tests: the amdsmi functions plumb's amdsmi provider
 * dlopens, with the shapes it declares (src/health/amdsmi.c). One socket with
 * FAKE_AMDSMI_DEVICES processors (default 2). The energy accumulator runs on
 * a scripted clock: each amdsmi_get_energy_count call advances the device's
 * timestamp by exactly 100 ms and its energy by the scripted power
 * ("power_w") times that, in counts of 15.3 uJ, so the provider's
 * energy-delta power is known exactly, whatever the host's timing.
 * NAN = not supported. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { K_EDGE, K_HOT, K_VRAM, K_POWER_W, K_CAP_UW, K_GFX, K_UMC, K_USED, K_TOTAL, K_SCLK, K_MCLK, K_ECC_C, K_ECC_U,
       K_REPLAY, NK };
static const char *knames[NK] = {"edge", "hotspot", "vram", "power_w", "cap_uw", "gfx", "umc", "used", "total",
                                 "sclk", "mclk", "ecc_c", "ecc_u", "replay"};
#define FAKE_MAX 8
#define RES_UJ 15.3f
static double val[FAKE_MAX][NK];
static double e_uj[FAKE_MAX];   /* energy at the last reading */
static uint64_t t_ns[FAKE_MAX]; /* the scripted clock: the last reading's timestamp */
#define TICK_NS 100000000ull
static int ndev, have_defaults, inited;
static int handles[FAKE_MAX], socket_tag;


void fake_amdsmi_reset(void)
{
    const char *nd = getenv("FAKE_AMDSMI_DEVICES");
    ndev = nd ? atoi(nd) : 2;
    if (ndev > FAKE_MAX) ndev = FAKE_MAX;
    for (int i = 0; i < FAKE_MAX; i++) {
        double *v = val[i];
        v[K_EDGE] = 44; v[K_HOT] = 58; v[K_VRAM] = 66;
        v[K_POWER_W] = 250 + 10 * i; v[K_CAP_UW] = 550000000;
        v[K_GFX] = 99; v[K_UMC] = 45;
        v[K_USED] = 4096.0 * 1048576; v[K_TOTAL] = 196608.0 * 1048576;
        v[K_SCLK] = 2100; v[K_MCLK] = 1300;
        v[K_ECC_C] = 2; v[K_ECC_U] = 0; v[K_REPLAY] = 0;
        e_uj[i] = 1e9;
        t_ns[i] = 5000000000ull;
    }
    have_defaults = 1;
}
static void ensure(void) { if (!have_defaults) fake_amdsmi_reset(); }

int fake_amdsmi_set(unsigned dev, const char *key, double value)
{
    ensure();
    if (dev >= FAKE_MAX) return -1;
    for (int k = 0; k < NK; k++)
        if (!strcmp(knames[k], key)) {
            val[dev][k] = value;
            return 0;
        }
    fprintf(stderr, "fake_amdsmi_set: unknown key %s\n", key);
    return -1;
}

static int idx(void *h)
{
    int *p = h;
    if (p < handles || p >= handles + ndev) return -1;
    return (int)(p - handles);
}
#define DEV(h) int i_ = idx(h); if (!inited) return 32; if (i_ < 0) return 1
#define SUP(k) if (isnan(val[i_][k])) return 2

int amdsmi_init(uint64_t flags) { (void)flags; ensure(); inited = 1; return 0; }
int amdsmi_shut_down(void) { inited = 0; return 0; }
int amdsmi_status_code_to_string(int s, const char **str) { *str = s == 2 ? "AMDSMI_STATUS_NOT_SUPPORTED" : s ? "AMDSMI_STATUS_ERROR" : "AMDSMI_STATUS_SUCCESS"; return 0; }
int amdsmi_get_socket_handles(uint32_t *n, void **h)
{
    if (!inited) return 32;
    if (h && *n >= 1) h[0] = &socket_tag;
    *n = 1;
    return 0;
}
int amdsmi_get_processor_handles(void *sock, uint32_t *n, void **h)
{
    if (sock != &socket_tag) return 1;
    if (h) for (int i = 0; i < ndev && i < (int)*n; i++) h[i] = &handles[i];
    *n = (uint32_t)ndev;
    return 0;
}
int amdsmi_get_gpu_device_uuid(void *h, unsigned int *len, char *uuid) { DEV(h); snprintf(uuid, *len, "fake-amdsmi-%02d", i_); return 0; }
int amdsmi_get_temp_metric(void *h, int sensor, int metric, int64_t *t)
{
    DEV(h);
    if (metric != 0) return 1;
    int k = sensor == 0 ? K_EDGE : sensor == 1 ? K_HOT : sensor == 2 ? K_VRAM : -1;
    if (k < 0) return 2;
    SUP(k);
    *t = (int64_t)val[i_][k];
    return 0;
}
int amdsmi_get_energy_count(void *h, uint64_t *acc, float *res, uint64_t *ts)
{
    DEV(h);
    SUP(K_POWER_W);
    t_ns[i_] += TICK_NS;
    e_uj[i_] += val[i_][K_POWER_W] * 1e6 * (TICK_NS * 1e-9);
    *acc = (uint64_t)(e_uj[i_] / RES_UJ);
    *res = RES_UJ;
    *ts = t_ns[i_];
    return 0;
}
int amdsmi_get_power_cap_info(void *h, uint32_t sensor, void *info)
{
    DEV(h);
    (void)sensor;
    SUP(K_CAP_UW);
    uint64_t cap[5] = {(uint64_t)val[i_][K_CAP_UW], 500000000, 0, 0, 600000000};
    memcpy(info, cap, sizeof cap);
    return 0;
}
int amdsmi_get_gpu_activity(void *h, void *u)
{
    DEV(h);
    SUP(K_GFX);
    uint32_t a[3] = {(uint32_t)val[i_][K_GFX], (uint32_t)val[i_][K_UMC], 0};
    memcpy(u, a, sizeof a);
    return 0;
}
int amdsmi_get_gpu_memory_usage(void *h, int type, uint64_t *u) { DEV(h); if (type) return 2; SUP(K_USED); *u = (uint64_t)val[i_][K_USED]; return 0; }
int amdsmi_get_gpu_memory_total(void *h, int type, uint64_t *u) { DEV(h); if (type) return 2; SUP(K_TOTAL); *u = (uint64_t)val[i_][K_TOTAL]; return 0; }
int amdsmi_get_clock_info(void *h, int type, void *info)
{
    DEV(h);
    int k = type == 0 ? K_SCLK : type == 4 ? K_MCLK : -1;
    if (k < 0) return 2;
    SUP(k);
    uint32_t c[3] = {(uint32_t)val[i_][k], 500, 2500};
    memcpy(info, c, sizeof c);
    return 0;
}
int amdsmi_get_gpu_total_ecc_count(void *h, void *ec)
{
    DEV(h);
    SUP(K_ECC_C);
    uint64_t c[3] = {(uint64_t)val[i_][K_ECC_C], (uint64_t)val[i_][K_ECC_U], 0};
    memcpy(ec, c, sizeof c);
    return 0;
}
int amdsmi_get_gpu_pci_replay_counter(void *h, uint64_t *c) { DEV(h); SUP(K_REPLAY); *c = (uint64_t)val[i_][K_REPLAY]; return 0; }
