/* Health: providers fed by fake vendor libraries (tests/fake_nvml.c,
 * tests/fake_rsmi.c built as build/tests/libfake_*.so), the Linux provider on
 * a fake sysfs/procfs tree, thresholds firing exactly at their limits, the
 * Prometheus rendering and the background monitor. */
#include "test.h"
#include "health/health.h"
#include "health/monitor.h"
#include "accept/checks.h"
#include "core/file.h"
#include "core/hostinfo.h"
#include "core/jsonx.h"
#include "core/timer.h"
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

static const char *fake_path(const char *which)
{
    static char buf[3][PATH_MAX];
    char *b = buf[which[0] == 'r' ? 1 : which[0] == 'a' ? 2 : 0];
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(b, PATH_MAX, "%s/tests/libfake_%s.so", exe, which);
    return b;
}

typedef int (*set_fn)(unsigned, const char *, double);
typedef void (*reset_fn)(void);
typedef void (*xid_fn)(unsigned, unsigned long long);

/* dlopen the fake (the provider's later dlopen gets the same instance) */
static void *fake_open(const char *which, set_fn *set)
{
    const char *p = fake_path(which);
    void *h = p ? dlopen(p, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) return NULL;
    char name[64];
    snprintf(name, sizeof name, "fake_%s_reset", which);
    reset_fn r = (reset_fn)dlsym(h, name);
    snprintf(name, sizeof name, "fake_%s_set", which);
    *set = (set_fn)dlsym(h, name);
    if (!r || !*set) {
        dlclose(h);
        return NULL;
    }
    r();
    setenv(which[0] == 'n' ? "PLUMB_NVML_LIB" : which[0] == 'r' ? "PLUMB_RSMI_LIB" : "PLUMB_AMDSMI_LIB", p, 1);
    return h;
}

static void fake_close(void *h)
{
    unsetenv("PLUMB_NVML_LIB");
    unsetenv("PLUMB_RSMI_LIB");
    unsetenv("PLUMB_AMDSMI_LIB");
    if (h) dlclose(h);
}

static int sample_one(const char *providers, struct health_sample *s, int *n, plumb_err *e)
{
    struct health_ctx ctx;
    int rc = health_open(&ctx, providers, e);
    if (rc) return rc;
    if (ctx.nprov == 0) {
        health_close(&ctx);
        return err_set(e, PLUMB_EUNSUPPORTED, "%s", ctx.notes[0]);
    }
    rc = health_sample_all(&ctx, s, HEALTH_MAX_DEVICES, n, e);
    health_close(&ctx);
    return rc;
}

TEST(health_nvml_fake_values)
{
    set_fn set;
    void *h = fake_open("nvml", &set);
    REQUIRE(h);
    struct health_sample s[HEALTH_MAX_DEVICES];
    int n = 0;
    plumb_err e = {0};
    int rc = sample_one("nvml", s, &n, &e);
    fake_close(h);
    REQUIRE(rc == 0);
    REQUIRE(n == 2);
    CHECK_STREQ(s[0].device, "nvidia0");
    CHECK_STREQ(s[1].uuid, "GPU-fake-01");
    CHECK_STREQ(s[0].vendor, "nvidia");
    CHECK_NEAR(s[0].v[HQ_TEMP], 40, 0);
    CHECK_NEAR(s[1].v[HQ_TEMP], 41, 0);
    CHECK_NEAR(s[0].v[HQ_MEM_TEMP], 50, 0);
    CHECK_NEAR(s[0].v[HQ_POWER], 123.456, 1e-12);       /* mW -> W */
    CHECK_NEAR(s[0].v[HQ_POWER_LIMIT], 700, 0);
    CHECK_NEAR(s[0].v[HQ_ENERGY], 987654321, 0);
    CHECK_NEAR(s[0].v[HQ_UTIL_GPU], 37, 0);
    CHECK_NEAR(s[0].v[HQ_UTIL_MEM], 12, 0);
    CHECK_NEAR(s[0].v[HQ_MEM_USED], 1234, 0);           /* v2: without the 560 MiB reserved */
    CHECK_NEAR(s[0].v[HQ_MEM_TOTAL], 143771, 0);
    CHECK_NEAR(s[0].v[HQ_CLK_SM], 1980, 0);
    CHECK_NEAR(s[0].v[HQ_CLK_MEM], 3201, 0);
    CHECK(s[0].ok[HQ_THROTTLE] && s[0].throttle_bits == 1);
    CHECK_NEAR(s[0].v[HQ_ECC_CORR_AGG], 5, 0);
    CHECK(s[0].ok[HQ_ECC_UNCORR_VOL] && s[0].v[HQ_ECC_UNCORR_VOL] == 0);
    CHECK(!s[0].ok[HQ_RETIRED_PAGES]); /* NOT_SUPPORTED in the fake: unsupported, not 0 */
    CHECK(s[0].ok[HQ_REMAP_CORR] && s[0].v[HQ_REMAP_CORR] == 0);
    CHECK_NEAR(s[0].v[HQ_PCIE_GEN], 5, 0);
    CHECK_NEAR(s[0].v[HQ_PCIE_WIDTH_MAX], 16, 0);
    CHECK_NEAR(s[0].v[HQ_LINKS_UP], 18, 0);
    CHECK_NEAR(s[0].v[HQ_LINKS_TOTAL], 18, 0);
    CHECK_NEAR(s[0].v[HQ_PERSISTENCE], 1, 0);
    CHECK_NEAR(s[0].v[HQ_ECC_MODE], 1, 0);
    CHECK(s[0].ok[HQ_XID_COUNT] && s[0].v[HQ_XID_COUNT] == 0);
    CHECK(!s[0].ok[HQ_XID_LAST]);
    CHECK(!s[0].ok[HQ_LOAD1]);
    json_t *j = health_sample_json(&s[0]);
    CHECK(json_object_get(j, "retired_pages") == NULL);
    int listed = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(j, "unsupported"), i, v) listed |= !strcmp(json_string_value(v), "retired_pages");
    CHECK(listed);
    CHECK_STREQ(json_string_value(json_object_get(j, "throttle_reasons")), "gpu_idle");
    json_decref(j);
}

TEST(health_nvml_unsupported_is_not_zero)
{
    set_fn set;
    void *h = fake_open("nvml", &set);
    REQUIRE(h);
    set(0, "temp", NAN);
    set(0, "power_mw", NAN);
    set(0, "throttle", NAN);
    set(0, "ecc_cv", NAN);
    set(0, "ecc_uv", NAN);
    set(0, "ecc_ca", NAN);
    set(0, "ecc_ua", NAN);
    set(0, "nvlinks", NAN);
    struct health_sample s[HEALTH_MAX_DEVICES];
    int n = 0;
    plumb_err e = {0};
    int rc = sample_one("nvml", s, &n, &e);
    fake_close(h);
    REQUIRE(rc == 0 && n == 2);
    CHECK(!s[0].ok[HQ_TEMP] && !s[0].ok[HQ_POWER] && !s[0].ok[HQ_THROTTLE] && !s[0].ok[HQ_LINKS_UP]);
    CHECK(s[1].ok[HQ_TEMP] && s[1].ok[HQ_POWER]);
    /* unsupported quantities raise nothing, even with every limit at its lowest */
    struct health_thresholds t;
    health_thresholds_default(&t);
    t.gpu_temp_c = 1e-9;
    t.power_w = 1e-9;
    t.ecc_per_hour = 1e-9;
    struct health_eval *ev = calloc(1, sizeof *ev);
    REQUIRE(ev);
    health_eval_init(ev, &t);
    struct health_alert al[16];
    int na = 0;
    health_eval_samples(ev, &s[0], 1, al, 16, &na);
    CHECK_EQ_INT(na, 0);
    /* Prometheus: no line for an unsupported quantity of nvidia0, one for nvidia1 */
    char *text = health_prom_render(s, n, ev);
    REQUIRE(text);
    CHECK(!strstr(text, "DCGM_FI_DEV_GPU_TEMP{device=\"nvidia0\""));
    CHECK(strstr(text, "DCGM_FI_DEV_GPU_TEMP{device=\"nvidia1\",uuid=\"GPU-fake-01\",vendor=\"nvidia\",gpu=\"1\"} 41\n"));
    CHECK(strstr(text, "DCGM_FI_DEV_POWER_USAGE{device=\"nvidia1\",uuid=\"GPU-fake-01\",vendor=\"nvidia\",gpu=\"1\"} 123.456"));
    free(text);
    free(ev);
}

TEST(health_nvml_xid_and_lost_gpu)
{
    set_fn set;
    void *h = fake_open("nvml", &set);
    REQUIRE(h);
    xid_fn xid = (xid_fn)dlsym(h, "fake_nvml_xid");
    REQUIRE(xid);
    struct health_ctx ctx;
    plumb_err e = {0};
    REQUIRE(health_open(&ctx, "nvml", &e) == 0 && ctx.nprov == 1);
    struct health_sample s[HEALTH_MAX_DEVICES];
    int n = 0;
    struct health_thresholds t;
    health_thresholds_default(&t);
    struct health_eval *ev = calloc(1, sizeof *ev);
    REQUIRE(ev);
    health_eval_init(ev, &t);
    struct health_alert al[16];
    int na = 0;
    REQUIRE(health_sample_all(&ctx, s, HEALTH_MAX_DEVICES, &n, &e) == 0);
    health_eval_samples(ev, s, n, al, 16, &na);
    CHECK_EQ_INT(na, 0);
    xid(1, 79);
    REQUIRE(health_sample_all(&ctx, s, HEALTH_MAX_DEVICES, &n, &e) == 0);
    CHECK_NEAR(s[1].v[HQ_XID_COUNT], 1, 0);
    CHECK(s[1].ok[HQ_XID_LAST] && s[1].v[HQ_XID_LAST] == 79);
    CHECK_NEAR(s[0].v[HQ_XID_COUNT], 0, 0);
    health_eval_samples(ev, s, n, al, 16, &na);
    REQUIRE(na == 1);
    CHECK_STREQ(al[0].device, "nvidia1");
    CHECK_STREQ(al[0].quantity, "xid");
    CHECK_NEAR(al[0].value, 79, 0);
    /* no new event: no new alert; another event: another alert */
    REQUIRE(health_sample_all(&ctx, s, HEALTH_MAX_DEVICES, &n, &e) == 0);
    na = 0;
    health_eval_samples(ev, s, n, al, 16, &na);
    CHECK_EQ_INT(na, 0);
    xid(1, 48);
    REQUIRE(health_sample_all(&ctx, s, HEALTH_MAX_DEVICES, &n, &e) == 0);
    health_eval_samples(ev, s, n, al, 16, &na);
    CHECK(na == 1 && al[0].value == 48);
    /* a GPU that fell off the bus is an error naming it */
    set(0, "lost", 1);
    int rc = health_sample_all(&ctx, s, HEALTH_MAX_DEVICES, &n, &e);
    CHECK(rc == PLUMB_EDEVICE);
    CHECK(strstr(e.msg, "nvidia0") && strstr(e.msg, "GPU-fake-00"));
    health_close(&ctx);
    free(ev);
    setenv("FAKE_NVML_INIT_FAIL", "1", 1);
    REQUIRE(health_open(&ctx, "nvml", &e) == 0);
    CHECK_EQ_INT(ctx.nprov, 0);
    CHECK(strstr(ctx.notes[0], "nvmlInit_v2") && strstr(ctx.notes[0], "Driver Not Loaded"));
    unsetenv("FAKE_NVML_INIT_FAIL");
    fake_close(h);
    /* a missing library is "unsupported" with the path named */
    setenv("PLUMB_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    REQUIRE(health_open(&ctx, "nvml", &e) == 0);
    CHECK(ctx.nprov == 0 && strstr(ctx.notes[0], "/nonexistent/libnvidia-ml.so.1"));
    unsetenv("PLUMB_NVML_LIB");
}

TEST(health_rsmi_fake_units)
{
    set_fn set;
    void *h = fake_open("rsmi", &set);
    REQUIRE(h);
    set(1, "throttle_indep", (double)((1ull << 35) | (1ull << 0))); /* temp_edge + ppt0 */
    set(1, "pcie_w", 8);
    struct health_sample s[HEALTH_MAX_DEVICES];
    int n = 0;
    plumb_err e = {0};
    int rc = sample_one("rocm-smi", s, &n, &e);
    REQUIRE(rc == 0);
    REQUIRE(n == 2);
    CHECK_STREQ(s[0].device, "amd0");
    CHECK_STREQ(s[0].vendor, "amd");
    CHECK_STREQ(s[0].uuid, "0xabc0000000000000");
    CHECK_NEAR(s[0].v[HQ_TEMP], 45, 0);              /* millidegrees -> C */
    CHECK_NEAR(s[0].v[HQ_TEMP_HOTSPOT], 52.5, 0);
    CHECK_NEAR(s[0].v[HQ_MEM_TEMP], 61, 0);
    CHECK_NEAR(s[0].v[HQ_POWER], 312.5, 0);          /* microwatts -> W */
    CHECK_NEAR(s[0].v[HQ_POWER_LIMIT], 560, 0);
    CHECK_NEAR(s[0].v[HQ_ENERGY], 1e6 * (double)15.3f / 1000.0, 1e-6); /* counts * uJ -> mJ */
    CHECK_NEAR(s[0].v[HQ_UTIL_GPU], 88, 0);
    CHECK_NEAR(s[0].v[HQ_UTIL_MEM], 40, 0);
    CHECK_NEAR(s[0].v[HQ_MEM_USED], 2048, 0);        /* bytes -> MiB */
    CHECK_NEAR(s[0].v[HQ_MEM_TOTAL], 65536, 0);
    CHECK_NEAR(s[0].v[HQ_CLK_SM], 1700, 0);          /* Hz -> MHz, the current level */
    CHECK_NEAR(s[0].v[HQ_CLK_MEM], 1600, 0);
    CHECK_NEAR(s[0].v[HQ_ECC_CORR_AGG], 7, 0);       /* UMC 3 + SDMA 4 */
    CHECK_NEAR(s[0].v[HQ_ECC_UNCORR_AGG], 0, 0);
    CHECK(!s[0].ok[HQ_ECC_CORR_VOL]);                /* no volatile split in ROCm SMI */
    CHECK_NEAR(s[0].v[HQ_ECC_MODE], 1, 0);
    CHECK_NEAR(s[0].v[HQ_PCIE_GEN], 4, 0);           /* 160 x 0.1 GT/s = 16 GT/s */
    CHECK_NEAR(s[0].v[HQ_PCIE_WIDTH], 16, 0);
    CHECK_NEAR(s[0].v[HQ_PCIE_GEN_MAX], 4, 0);
    CHECK_NEAR(s[0].v[HQ_PCIE_WIDTH_MAX], 16, 0);
    CHECK_NEAR(s[0].v[HQ_PCIE_REPLAY], 2, 0);
    CHECK_NEAR(s[0].v[HQ_LINKS_UP], 1, 0);           /* the other GPU, one xGMI hop */
    CHECK_NEAR(s[0].v[HQ_LINKS_TOTAL], 1, 0);
    CHECK(s[0].ok[HQ_THROTTLE] && s[0].throttle_bits == 0);
    CHECK(s[1].throttle_bits == ((1ull << 35) | 1ull));
    char names[128];
    health_throttle_names("amd", s[1].throttle_bits, names, sizeof names);
    CHECK_STREQ(names, "ppt0,temp_edge");
    /* thresholds: temp_edge is in the default throttle list, x8 < x16 is a downgrade */
    struct health_thresholds t;
    health_thresholds_default(&t);
    struct health_eval *ev = calloc(1, sizeof *ev);
    REQUIRE(ev);
    health_eval_init(ev, &t);
    struct health_alert al[16];
    int na = 0;
    health_eval_samples(ev, s, n, al, 16, &na);
    REQUIRE(na == 2);
    CHECK_STREQ(al[0].quantity, "throttle");
    CHECK_STREQ(al[0].detail, "temp_edge");
    CHECK_STREQ(al[1].quantity, "pcie_width");
    CHECK(al[1].value == 8 && al[1].limit == 16);
    free(ev);
    /* old metrics table: the ASIC-specific word is exported raw, never named */
    set(0, "metrics_rev", 1);
    set(0, "throttle_asic", 0x10);
    set(0, "edge_md", NAN);
    rc = sample_one("rocm-smi", s, &n, &e);
    fake_close(h);
    REQUIRE(rc == 0);
    CHECK(s[0].ok[HQ_THROTTLE] && s[0].v[HQ_THROTTLE] == 16 && s[0].throttle_bits == 0);
    CHECK_NEAR(s[0].v[HQ_TEMP], 52.5, 0); /* junction stands in when there is no edge sensor */
}

/* ---- thresholds fire exactly at their limits ---- */
static void gpu_sample(struct health_sample *s, const char *dev, double t)
{
    memset(s, 0, sizeof *s);
    snprintf(s->device, sizeof s->device, "%s", dev);
    snprintf(s->vendor, sizeof s->vendor, "nvidia");
    s->kind = HEALTH_GPU;
    s->time = t;
}

static int eval1(struct health_eval *ev, const struct health_sample *s, struct health_alert *al)
{
    int na = 0;
    health_eval_samples(ev, s, 1, al, 8, &na);
    return na;
}

TEST(health_thresholds_exact_limits)
{
    struct health_thresholds t;
    health_thresholds_default(&t);
    CHECK(t.gpu_temp_c == 85 && t.power_w == 450 && t.ecc_per_hour == 10);
    struct health_eval *ev = calloc(1, sizeof *ev);
    REQUIRE(ev);
    health_eval_init(ev, &t);
    struct health_sample s;
    struct health_alert al[8];
    /* temperature: 84.999 nothing, 85 alert at exactly the limit, not repeated while above */
    gpu_sample(&s, "nvidia0", 1000);
    hs_set(&s, HQ_TEMP, 84.999);
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    hs_set(&s, HQ_TEMP, 85);
    REQUIRE(eval1(ev, &s, al) == 1);
    CHECK_STREQ(al[0].quantity, "temp_c");
    CHECK(al[0].value == 85 && al[0].limit == 85 && al[0].time == 1000 && !al[0].critical);
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    hs_set(&s, HQ_TEMP, 80);
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    hs_set(&s, HQ_TEMP, 86); /* a second crossing */
    CHECK_EQ_INT(eval1(ev, &s, al), 1);
    /* critical at 90 */
    hs_set(&s, HQ_TEMP, 90);
    REQUIRE(eval1(ev, &s, al) == 1);
    CHECK(al[0].critical && al[0].limit == 90);
    CHECK_STREQ(al[0].quantity, "temp_critical");
    /* power */
    gpu_sample(&s, "nvidia1", 1000);
    hs_set(&s, HQ_POWER, 449.999);
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    hs_set(&s, HQ_POWER, 450);
    REQUIRE(eval1(ev, &s, al) == 1);
    CHECK(!strcmp(al[0].quantity, "power_w") && al[0].value == 450 && al[0].limit == 450);
    /* throttle: gpu_idle and sw_power_cap are not alerting reasons; hw_slowdown is */
    gpu_sample(&s, "nvidia2", 1000);
    hs_set(&s, HQ_THROTTLE, 0x5);
    s.throttle_bits = 0x5;
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    s.throttle_bits = 0x5 | 0x8;
    REQUIRE(eval1(ev, &s, al) == 1);
    CHECK_STREQ(al[0].detail, "hw_slowdown");
    char names[64];
    CHECK_EQ_INT(health_eval_active(ev, "nvidia2", names, sizeof names), 1);
    CHECK_STREQ(names, "throttle");
    /* PCIe gen downgrade is off by default, width downgrade on */
    gpu_sample(&s, "nvidia3", 1000);
    hs_set(&s, HQ_PCIE_GEN, 1);
    hs_set(&s, HQ_PCIE_GEN_MAX, 5);
    hs_set(&s, HQ_PCIE_WIDTH, 16);
    hs_set(&s, HQ_PCIE_WIDTH_MAX, 16);
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    hs_set(&s, HQ_PCIE_WIDTH, 15);
    CHECK_EQ_INT(eval1(ev, &s, al), 1);
    free(ev);
}

TEST(health_ecc_rate_window)
{
    struct health_thresholds t;
    health_thresholds_default(&t);
    t.uncorrected_ecc = 0;
    struct health_eval *ev = calloc(1, sizeof *ev);
    REQUIRE(ev);
    health_eval_init(ev, &t);
    struct health_sample s;
    struct health_alert al[8];
    double t0 = 1e6;
    /* 9 errors within the hour: 9/h, no alert; the 10th: exactly 10/h, alert */
    gpu_sample(&s, "nvidia0", t0);
    hs_set(&s, HQ_ECC_CORR_VOL, 100);
    hs_set(&s, HQ_ECC_UNCORR_VOL, 0);
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    s.time = t0 + 600;
    hs_set(&s, HQ_ECC_CORR_VOL, 109);
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    s.time = t0 + 1200;
    hs_set(&s, HQ_ECC_CORR_VOL, 110);
    REQUIRE(eval1(ev, &s, al) == 1);
    CHECK_STREQ(al[0].quantity, "ecc_per_hour");
    CHECK_NEAR(al[0].value, 10, 1e-12);
    CHECK_NEAR(al[0].limit, 10, 0);
    /* an hour after the last error the window holds none: the rule clears */
    s.time = t0 + 1200 + 3600 + 1;
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    CHECK_EQ_INT(health_eval_active(ev, "nvidia0", NULL, 0), 0);
    /* a 10-minute window scales to one hour: 2 errors in 600 s = 12/h */
    t.ecc_window_s = 600;
    health_eval_init(ev, &t);
    gpu_sample(&s, "nvidia0", t0);
    hs_set(&s, HQ_ECC_CORR_VOL, 0);
    hs_set(&s, HQ_ECC_UNCORR_VOL, 0);
    CHECK_EQ_INT(eval1(ev, &s, al), 0);
    s.time = t0 + 300;
    hs_set(&s, HQ_ECC_CORR_VOL, 1);
    CHECK_EQ_INT(eval1(ev, &s, al), 0); /* 6/h */
    s.time = t0 + 400;
    hs_set(&s, HQ_ECC_UNCORR_VOL, 1);   /* corrected + uncorrected both count */
    REQUIRE(eval1(ev, &s, al) == 1);
    CHECK_NEAR(al[0].value, 12, 1e-12);
    /* uncorrected errors alert on their own when enabled */
    t.uncorrected_ecc = 1;
    t.ecc_per_hour = 0;
    health_eval_init(ev, &t);
    gpu_sample(&s, "nvidia0", t0);
    hs_set(&s, HQ_ECC_UNCORR_AGG, 3);
    hs_set(&s, HQ_ECC_CORR_AGG, 0);
    CHECK_EQ_INT(eval1(ev, &s, al), 0); /* old errors before monitoring started */
    hs_set(&s, HQ_ECC_UNCORR_AGG, 4);
    REQUIRE(eval1(ev, &s, al) == 1);
    CHECK_STREQ(al[0].quantity, "ecc_uncorrected");
    free(ev);
}

TEST(health_thresholds_file)
{
    char path[512];
    plumb_err e = {0};
    snprintf(path, sizeof path, "%s/thr.conf", test_tmpdir());
    const char *txt = "# site limits\n\ngpu_temp_c = 80   # lower than default\npower_w=700\n"
                      "ecc_per_hour = 5\necc_window_s = 1800\nthrottle = hw_slowdown, temp_edge\n"
                      "pcie_gen_downgrade = on\nxid = off\nmem_temp_c = off\n";
    REQUIRE(file_write_atomic(path, txt, strlen(txt), &e) == 0);
    struct health_thresholds t;
    health_thresholds_default(&t);
    REQUIRE(health_thresholds_load(&t, path, &e) == 0);
    CHECK(t.gpu_temp_c == 80 && t.power_w == 700 && t.ecc_per_hour == 5 && t.ecc_window_s == 1800);
    CHECK(t.pcie_gen_downgrade == 1 && t.xid == 0 && t.mem_temp_c == 0 && t.cpu_temp_c == 95);
    CHECK_STREQ(t.throttle, "hw_slowdown, temp_edge");
    health_thresholds_default(&t);
    CHECK(health_thresholds_parse(&t, "gpu_temp_c = 85\npower_w = hot\n", "x.conf", &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "x.conf:2") && strstr(e.msg, "power_w") && strstr(e.msg, "hot"));
    CHECK(health_thresholds_parse(&t, "gpu_temp = 85\n", "x.conf", &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "x.conf:1") && strstr(e.msg, "gpu_temp"));
    CHECK(health_thresholds_parse(&t, "throttle = hw_slowdown,melting\n", "x.conf", &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "melting"));
    CHECK(health_thresholds_parse(&t, "just words\n", "x.conf", &e) == PLUMB_EUSAGE);
    CHECK(health_thresholds_parse(&t, "power_w = -3\n", "x.conf", &e) == PLUMB_EUSAGE);
    snprintf(path, sizeof path, "%s/none.conf", test_tmpdir());
    CHECK(health_thresholds_load(&t, path, &e) != 0);
    CHECK(strstr(e.msg, "none.conf"));
}

/* ---- Linux provider on a fake tree ---- */
static void put(const char *root, const char *rel, const char *text)
{
    char path[1024], dir[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    plumb_err e = {0};
    file_mkdirs(dir, &e);
    file_write_atomic(path, text, strlen(text), &e);
}

TEST(health_linux_fake_tree)
{
    char sys[512], proc[512];
    snprintf(sys, sizeof sys, "%s/lsys", test_tmpdir());
    snprintf(proc, sizeof proc, "%s/lproc", test_tmpdir());
    put(proc, "meminfo", "MemTotal:       16384000 kB\nMemFree:         1000 kB\nMemAvailable:    8192000 kB\n");
    put(proc, "loadavg", "1.25 0.50 0.10 1/100 42\n");
    put(sys, "class/hwmon/hwmon0/name", "coretemp\n");
    put(sys, "class/hwmon/hwmon0/temp1_input", "55000\n");
    put(sys, "class/hwmon/hwmon0/temp2_input", "61500\n");
    put(sys, "class/hwmon/hwmon1/name", "nvme\n");
    put(sys, "class/hwmon/hwmon1/temp1_input", "99000\n"); /* not a CPU sensor */
    put(sys, "devices/system/node/node0/meminfo", "Node 0 MemTotal:  8192000 kB\nNode 0 MemFree: 4096000 kB\nNode 0 MemUsed:  4096000 kB\n");
    put(sys, "devices/system/node/node1/meminfo", "Node 1 MemTotal:  8192000 kB\nNode 1 MemFree: 7168000 kB\nNode 1 MemUsed:  1024000 kB\n");
    setenv("PLUMB_HEALTH_SYSFS", sys, 1);
    setenv("PLUMB_HEALTH_PROCFS", proc, 1);
    struct health_sample s[HEALTH_MAX_DEVICES];
    int n = 0;
    plumb_err e = {0};
    int rc = sample_one("linux", s, &n, &e);
    REQUIRE(rc == 0);
    REQUIRE(n == 3);
    CHECK_STREQ(s[0].device, "cpu");
    /* the host's name is its CPU model from hwloc, not from the fake procfs */
    CHECK_STREQ(s[0].name, hostinfo_cpu_model(hostinfo_this()));
    CHECK_NEAR(s[0].v[HQ_TEMP], 61.5, 1e-12);
    CHECK_NEAR(s[0].v[HQ_MEM_TOTAL], 16000, 1e-9);
    CHECK_NEAR(s[0].v[HQ_MEM_USED], 8000, 1e-9);
    CHECK_NEAR(s[0].v[HQ_LOAD1], 1.25, 1e-12);
    CHECK_STREQ(s[1].device, "numa0");
    CHECK_NEAR(s[1].v[HQ_MEM_USED], 4000, 1e-9);
    CHECK_STREQ(s[2].device, "numa1");
    CHECK_NEAR(s[2].v[HQ_MEM_TOTAL], 8000, 1e-9);
    CHECK_NEAR(s[2].v[HQ_MEM_USED], 1000, 1e-9);
    CHECK(!s[1].ok[HQ_TEMP]);
    /* no CPU sensor at all: temperature unsupported, never 0 */
    put(sys, "class/hwmon/hwmon0/name", "nvme\n");
    rc = sample_one("linux", s, &n, &e);
    unsetenv("PLUMB_HEALTH_SYSFS");
    unsetenv("PLUMB_HEALTH_PROCFS");
    REQUIRE(rc == 0);
    CHECK(!s[0].ok[HQ_TEMP]);
    json_t *j = health_sample_json(&s[0]);
    CHECK(!json_object_get(j, "temp_c"));
    json_decref(j);
}

TEST(health_prom_format)
{
    struct health_sample s[2];
    gpu_sample(&s[0], "nvidia0", 1);
    snprintf(s[0].uuid, sizeof s[0].uuid, "GPU-a\"b\\c");
    hs_set(&s[0], HQ_TEMP, 86);
    hs_set(&s[0], HQ_THROTTLE, 0x48);
    s[0].throttle_bits = 0x48;
    gpu_sample(&s[1], "amd0", 1);
    snprintf(s[1].vendor, sizeof s[1].vendor, "amd");
    hs_set(&s[1], HQ_TEMP, 50);
    s[1].index = 0;
    struct health_thresholds t;
    health_thresholds_default(&t);
    struct health_eval *ev = calloc(1, sizeof *ev);
    REQUIRE(ev);
    health_eval_init(ev, &t);
    int na = 0;
    health_eval_samples(ev, s, 2, NULL, 0, &na);
    char *text = health_prom_render(s, 2, ev);
    REQUIRE(text);
    CHECK(strstr(text, "# HELP DCGM_FI_DEV_GPU_TEMP "));
    CHECK(strstr(text, "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"));
    CHECK(strstr(text, "DCGM_FI_DEV_GPU_TEMP{device=\"nvidia0\",uuid=\"GPU-a\\\"b\\\\c\",vendor=\"nvidia\",gpu=\"0\"} 86\n"));
    CHECK(strstr(text, "GPU_EDGE_TEMPERATURE{device=\"amd0\",uuid=\"\",vendor=\"amd\",gpu=\"0\"} 50\n"));
    CHECK(strstr(text, "plumb_health_throttle_reason{device=\"nvidia0\",uuid=\"GPU-a\\\"b\\\\c\",vendor=\"nvidia\",gpu=\"0\",reason=\"hw_slowdown\"} 1\n"));
    CHECK(strstr(text, "reason=\"hw_thermal\"} 1\n"));
    /* 86 >= 85 and hw_slowdown/hw_thermal: two rules on nvidia0, none on amd0 */
    CHECK(strstr(text, "plumb_health_alerts{device=\"nvidia0\",uuid=\"GPU-a\\\"b\\\\c\",vendor=\"nvidia\",gpu=\"0\"} 2\n"));
    CHECK(strstr(text, "plumb_health_alerts{device=\"amd0\",uuid=\"\",vendor=\"amd\",gpu=\"0\"} 0\n"));
    CHECK(strstr(text, "quantity=\"temp_c\"} 1\n") && strstr(text, "quantity=\"throttle\"} 1\n"));
    /* each family's HELP appears once */
    const char *p = strstr(text, "# HELP plumb_health_alerts ");
    CHECK(p && !strstr(p + 1, "# HELP plumb_health_alerts "));
    free(text);
    free(ev);
}

/* ---- monitor ---- */
static int g_cb_alerts, g_cb_critical;
static void on_alert(const struct health_alert *a, void *user)
{
    (void)user;
    g_cb_alerts++;
    g_cb_critical += a->critical;
}

TEST(health_monitor_fake)
{
    set_fn set;
    void *h = fake_open("nvml", &set);
    REQUIRE(h);
    struct health_monitor *m = NULL;
    plumb_err e = {0};
    g_cb_alerts = g_cb_critical = 0;
    /* a long interval: the test drives sampling itself (no timing) */
    struct health_monitor_opts o = {.interval_s = 3600, .providers = "nvml", .on_alert = on_alert};
    REQUIRE(health_monitor_start(&m, &o, &e) == 0);
    CHECK_EQ_INT(health_monitor_samples(m), 1); /* the first sample is synchronous */
    CHECK_EQ_INT(health_monitor_critical(m), 0);
    set(1, "temp", 91);
    REQUIRE(health_monitor_sample_now(m, &e) == 0);
    CHECK_EQ_INT(health_monitor_critical(m), 1);
    CHECK_EQ_INT(g_cb_alerts, 2); /* temp_c and temp_critical on nvidia1 */
    CHECK_EQ_INT(g_cb_critical, 1);
    CHECK_EQ_INT(health_monitor_alert_count(m), 2);
    json_t *lines = health_monitor_drain(m);
    REQUIRE(json_array_size(lines) == 2);
    json_t *l1 = json_array_get(lines, 1);
    CHECK_STREQ(json_string_value(json_object_get(l1, "type")), "health");
    CHECK_EQ_INT(json_array_size(json_object_get(l1, "devices")), 2);
    CHECK_EQ_INT(json_array_size(json_object_get(l1, "alerts")), 2);
    json_decref(lines);
    lines = health_monitor_drain(m);
    CHECK_EQ_INT(json_array_size(lines), 0);
    json_decref(lines);
    health_monitor_stop(m);
    /* a short interval: the thread samples by itself (waits up to 10 s) */
    o.interval_s = 0.02;
    REQUIRE(health_monitor_start(&m, &o, &e) == 0);
    for (int i = 0; i < 500 && health_monitor_samples(m) < 4; i++) usleep(20000);
    CHECK(health_monitor_samples(m) >= 4);
    health_monitor_stop(m);
    fake_close(h);
}

TEST(health_accept_check)
{
    set_fn set;
    void *h = fake_open("nvml", &set);
    REQUIRE(h);
    char run[512];
    snprintf(run, sizeof run, "%s/run-health", test_tmpdir());
    struct check_ctx ctx = {.run_dir = run, .device = "cpu", .level = "quick"};
    struct check_result r;
    plumb_err e = {0};
    REQUIRE(check_health_run(&ctx, &r, &e) == 0);
    CHECK_STREQ(check_status_name(r.status), "pass");
    CHECK_STREQ(jsonx_str(r.obj, "status"), "pass");
    char path[1024];
    snprintf(path, sizeof path, "%s/checks/health/samples.jsonl", run);
    CHECK(file_exists(path));
    check_free(&r);
    /* a GPU at 86 C crosses the 85 C default: the check fails naming it */
    set(0, "temp", 86);
    REQUIRE(check_health_run(&ctx, &r, &e) == 0);
    CHECK_STREQ(jsonx_str(r.obj, "status"), "fail");
    const char *reason = jsonx_str(r.obj, "reason");
    CHECK(reason && strstr(reason, "nvidia0 temp_c = 86 (limit 85)"));
    snprintf(path, sizeof path, "%s/checks/health/alerts.json", run);
    json_t *a = NULL;
    REQUIRE(jsonx_read_file(path, &a, &e) == 0);
    CHECK(json_array_size(a) >= 1);
    json_decref(a);
    check_free(&r);
    fake_close(h);
}

TEST(health_doctor_rows_fake)
{
    set_fn set;
    void *h = fake_open("nvml", &set);
    REQUIRE(h);
    set(1, "pcie_w", 8);
    set(1, "persist", 0);
    set(1, "nvlinks_up", 17);
    set(0, "pcie_gen", 1); /* idle: lower generation at full width is fine */
    json_t *rows = health_doctor_rows();
    fake_close(h);
    int seen = 0;
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r) {
        const char *item = jsonx_str(r, "item"), *st = jsonx_str(r, "status"), *v = jsonx_str(r, "value");
        if (!strcmp(item, "nvidia1 PCIe link")) { CHECK_STREQ(st, "warn"); CHECK_STREQ(v, "gen 5 x8 (max gen 5 x16)"); seen |= 1; }
        if (!strcmp(item, "nvidia0 PCIe link")) { CHECK_STREQ(st, "pass"); seen |= 2; }
        if (!strcmp(item, "nvidia1 persistence")) { CHECK_STREQ(st, "warn"); seen |= 4; }
        if (!strcmp(item, "nvidia1 NVLink")) { CHECK_STREQ(st, "warn"); CHECK_STREQ(v, "17 of 18 up"); seen |= 8; }
        if (!strcmp(item, "nvidia0 ECC")) { CHECK_STREQ(st, "pass"); seen |= 16; }
    }
    CHECK_EQ_INT(seen, 31);
    json_decref(rows);
}

TEST(health_amdsmi_fake)
{
    set_fn set;
    void *h = fake_open("amdsmi", &set);
    REQUIRE(h);
    set(1, "edge", NAN);
    struct health_sample s[HEALTH_MAX_DEVICES];
    int n = 0;
    plumb_err e = {0};
    int rc = sample_one("amdsmi", s, &n, &e);
    REQUIRE(rc == 0);
    REQUIRE(n == 2);
    CHECK_STREQ(s[0].device, "amd0");
    CHECK_STREQ(s[0].uuid, "fake-amdsmi-00");
    CHECK_NEAR(s[0].v[HQ_TEMP], 44, 0);            /* degrees C as returned */
    CHECK_NEAR(s[1].v[HQ_TEMP], 58, 0);            /* no edge sensor: hotspot stands in */
    CHECK_NEAR(s[0].v[HQ_MEM_TEMP], 66, 0);
    CHECK_NEAR(s[0].v[HQ_POWER_LIMIT], 550, 0);    /* uW -> W */
    /* power from two energy readings ~100 ms apart (counts of 15.3 uJ) */
    CHECK_NEAR(s[0].v[HQ_POWER], 250, 2.5);
    CHECK_NEAR(s[1].v[HQ_POWER], 260, 2.6);
    CHECK_NEAR(s[0].v[HQ_UTIL_GPU], 99, 0);
    CHECK_NEAR(s[0].v[HQ_UTIL_MEM], 45, 0);
    CHECK_NEAR(s[0].v[HQ_MEM_USED], 4096, 0);
    CHECK_NEAR(s[0].v[HQ_MEM_TOTAL], 196608, 0);
    CHECK_NEAR(s[0].v[HQ_CLK_SM], 2100, 0);
    CHECK_NEAR(s[0].v[HQ_CLK_MEM], 1300, 0);
    CHECK_NEAR(s[0].v[HQ_ECC_CORR_AGG], 2, 0);
    CHECK(!s[0].ok[HQ_THROTTLE] && !s[0].ok[HQ_ECC_CORR_VOL]);
    /* amdsmi stays unused when rocm-smi reports the GPUs */
    set_fn rset;
    void *rh = fake_open("rsmi", &rset);
    REQUIRE(rh);
    setenv("PLUMB_AMDSMI_LIB", fake_path("amdsmi"), 1);
    struct health_ctx ctx;
    REQUIRE(health_open(&ctx, "rocm-smi,amdsmi", &e) == 0);
    CHECK_EQ_INT(ctx.nprov, 1);
    CHECK(strstr(ctx.notes[2], "rocm-smi reports the AMD GPUs"));
    health_close(&ctx);
    fake_close(rh);
    unsetenv("PLUMB_AMDSMI_LIB");
    fake_close(h);
}
