/* core/dynlib.h, the one loader of vendor libraries, against the fake NVML
 * (build/tests/libfake_nvml.so): candidate lists, the override, required,
 * optional and alternative symbol names, and the messages when a library or
 * a symbol is missing. */
#include "test.h"
#include "core/dynlib.h"
#include <limits.h>
#include <unistd.h>

static const char *fake_lib(char *buf, size_t n, const char *which)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return NULL;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    snprintf(buf, n, "%s/tests/libfake_%s.so", exe, which);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

struct api {
    int (*init)(void);
    int (*count)(unsigned *);
    void *(*absent)(void);
};

TEST(dynlib_missing_library_names_every_candidate)
{
    plumb_err e = {0};
    struct dynlib lib;
    const char *cands[] = {"/nonexistent/libfoo.so.2", "libplumb-no-such-library.so.9"};
    CHECK_EQ_INT(dynlib_open(&lib, "foo", NULL, cands, 2, &e), PLUMB_EUNSUPPORTED);
    CHECK(lib.handle == NULL);
    CHECK_MSG(strstr(e.msg, "foo: cannot load /nonexistent/libfoo.so.2: ") == e.msg, "%s", e.msg);
    CHECK_MSG(strstr(e.msg, "; libplumb-no-such-library.so.9: cannot open shared object file") != NULL, "%s", e.msg);
    /* an override is the only thing tried */
    CHECK_EQ_INT(dynlib_open(&lib, "foo", "/nonexistent/override.so", cands, 2, &e), PLUMB_EUNSUPPORTED);
    CHECK_MSG(strstr(e.msg, "/nonexistent/override.so") && !strstr(e.msg, "libfoo"), "%s", e.msg);
    /* an empty override is no override */
    CHECK_EQ_INT(dynlib_open(&lib, "foo", "", cands, 1, &e), PLUMB_EUNSUPPORTED);
    CHECK_MSG(strstr(e.msg, "libfoo.so.2") != NULL, "%s", e.msg);
}

TEST(dynlib_symbols_required_optional_alternative)
{
    char path[PATH_MAX];
    if (!fake_lib(path, sizeof path, "nvml")) TEST_SKIP("build/tests/libfake_nvml.so not built");
    plumb_err e = {0};
    struct dynlib lib;
    const char *cands[] = {"/nonexistent/libnvidia-ml.so.1", path};
    REQUIRE(dynlib_open(&lib, "nvml", NULL, cands, 2, &e) == 0);
    CHECK_STREQ(lib.path, path);
    struct api a;
    memset(&a, 0xab, sizeof a); /* absent optional symbols must come back NULL */
    const struct dynlib_sym ok[] = {
        DYNLIB_SYM(struct api, init, "nvmlNoSuchInit", "nvmlInit_v2", 1), /* the alternative spelling */
        DYNLIB_SYM(struct api, count, "nvmlDeviceGetCount_v2", NULL, 1),
        DYNLIB_SYM(struct api, absent, "nvmlNoSuchFunction", NULL, 0),
    };
    REQUIRE(dynlib_resolve(&lib, "nvml", ok, 3, &a, &e) == 0);
    CHECK(a.init != NULL && a.count != NULL && a.absent == NULL);
    /* (not called: the health tests share this instance of the fake) */
    CHECK(dynlib_sym(&lib, "nvmlInit_v2") == (void *)a.init);
    CHECK(dynlib_sym(&lib, "nvmlDeviceGetCount_v2") == (void *)a.count);
    /* a missing required symbol names the library, the symbol and dlerror */
    const struct dynlib_sym bad[] = {
        DYNLIB_SYM(struct api, init, "nvmlInit_v2", NULL, 1),
        DYNLIB_SYM(struct api, absent, "nvmlNoSuchFunction", "nvmlNoSuchFunction_v2", 1),
    };
    CHECK_EQ_INT(dynlib_resolve(&lib, "nvml", bad, 2, &a, &e), PLUMB_EDEVICE);
    char want[PATH_MAX + 128];
    snprintf(want, sizeof want, "nvml: %s has no symbol nvmlNoSuchFunction (nor nvmlNoSuchFunction_v2): ", path);
    CHECK_MSG(strstr(e.msg, want) == e.msg, "%s", e.msg);
    CHECK_MSG(strstr(e.msg, "undefined symbol: nvmlNoSuchFunction") != NULL, "%s", e.msg);
    dynlib_close(&lib);
    CHECK(lib.handle == NULL);
    CHECK_EQ_INT(dynlib_resolve(&lib, "nvml", ok, 1, &a, &e), PLUMB_EINTERNAL);
}

/* The health providers load through dynlib: a missing library and a library
 * without the provider's symbols are named in the provider's note. */
#include "health/health.h"
#include <stdlib.h>
TEST(dynlib_health_providers_name_library_and_symbol)
{
    char nvml[PATH_MAX], rsmi[PATH_MAX];
    if (!fake_lib(nvml, sizeof nvml, "nvml") || !fake_lib(rsmi, sizeof rsmi, "rsmi"))
        TEST_SKIP("build/tests/libfake_{nvml,rsmi}.so not built");
    setenv("PLUMB_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    setenv("PLUMB_RSMI_LIB", nvml, 1);   /* loads, but has no rsmi_* */
    setenv("PLUMB_AMDSMI_LIB", rsmi, 1); /* loads, but has no amdsmi_* */
    struct health_ctx ctx;
    plumb_err e = {0};
    int rc = health_open(&ctx, "nvml,rocm-smi,amdsmi", &e);
    unsetenv("PLUMB_NVML_LIB"), unsetenv("PLUMB_RSMI_LIB"), unsetenv("PLUMB_AMDSMI_LIB");
    REQUIRE(rc == 0);
    CHECK_EQ_INT(ctx.nprov, 0);
    char want[PATH_MAX + 64];
    CHECK_MSG(strstr(ctx.notes[0], "nvml: cannot load /nonexistent/libnvidia-ml.so.1: ") == ctx.notes[0], "%s", ctx.notes[0]);
    snprintf(want, sizeof want, "rocm-smi: %s has no symbol rsmi_init: ", nvml);
    CHECK_MSG(strstr(ctx.notes[1], want) == ctx.notes[1], "%s", ctx.notes[1]);
    snprintf(want, sizeof want, "amdsmi: %s has no symbol amdsmi_init: ", rsmi);
    CHECK_MSG(strstr(ctx.notes[2], want) == ctx.notes[2], "%s", ctx.notes[2]);
    health_close(&ctx);
}
