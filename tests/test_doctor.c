/* plumb doctor's rows: host facts present, and the environment rules give the
 * documented status for variables that change numerics or communication. */
#include "test.h"
#include "accept/checks.h"
#include "core/jsonx.h"
#include <stdlib.h>

static const json_t *find_row(const struct check_result *r, const char *item)
{
    size_t i;
    json_t *row;
    json_array_foreach(json_object_get(json_object_get(r->obj, "details"), "rows"), i, row)
        if (!strcmp(jsonx_str(row, "item"), item)) return row;
    return NULL;
}

static const char *row_status(const struct check_result *r, const char *item)
{
    const json_t *row = find_row(r, item);
    return row ? jsonx_str(row, "status") : "(no row)";
}

TEST(doctor_host_rows)
{
    struct check_ctx ctx = {.device = "cpu"};
    struct check_result r;
    plumb_err e = {0};
    REQUIRE(check_doctor_run(&ctx, &r, &e) == PLUMB_OK);
    CHECK_STREQ(jsonx_str(r.obj, "name"), "doctor");
    static const char *items[] = {"os", "kernel", "cpu", "numa", "memory", "compiler", "blas", "mpi", "json",
                                  "cuda plugin", "hip plugin"};
    for (size_t i = 0; i < sizeof items / sizeof *items; i++) CHECK_MSG(find_row(&r, items[i]), "no row %s", items[i]);
    CHECK(strstr(jsonx_str(find_row(&r, "blas"), "value"), "OpenBLAS") != NULL);
    CHECK(strstr(jsonx_str(find_row(&r, "mpi"), "value"), "MPI") != NULL);
    CHECK(strstr(jsonx_str(find_row(&r, "kernel"), "value"), "Linux") != NULL);
    CHECK(jsonx_str(r.obj, "status") != NULL);
    CHECK(json_is_array(json_object_get(json_object_get(r.obj, "details"), "gpu_devices")));
    check_free(&r);
}

struct envcase {
    const char *name, *value, *want;
};

TEST(doctor_environment_rules)
{
    static const struct envcase cases[] = {
        {"NVIDIA_TF32_OVERRIDE", "0", "warn"},
        {"CUBLAS_WORKSPACE_CONFIG", ":4096:8", "pass"},
        {"NCCL_NVLS_ENABLE", "1", "warn"},
        {"NCCL_DEBUG", "INFO", "warn"},
        {"NCCL_ALGO", "Ring", "warn"},
        {"NCCL_SOCKET_IFNAME", "eth0", "pass"},
        {"HSA_OVERRIDE_GFX_VERSION", "9.0.10", "warn"},
        {"ROCBLAS_DEFAULT_ATOMICS_MODE", "0", "pass"},
        {"MIOPEN_DEBUG_CONV_GEMM", "0", "warn"},
        {"OPENBLAS_NUM_THREADS", "1", "pass"},
        {"OPENBLAS_CORETYPE", "Haswell", "warn"},
        {"CUDA_VISIBLE_DEVICES", "", "warn"},
        {"HIP_VISIBLE_DEVICES", "0,1", "pass"},
        {"CUDA_LAUNCH_BLOCKING", "1", "warn"},
        {"OMP_PROC_BIND", "close", "pass"},
    };
    size_t n = sizeof cases / sizeof *cases;
    char *saved[sizeof cases / sizeof *cases];
    for (size_t i = 0; i < n; i++) {
        const char *o = getenv(cases[i].name);
        saved[i] = o ? strdup(o) : NULL;
        setenv(cases[i].name, cases[i].value, 1);
    }
    struct check_ctx ctx = {.device = "cpu"};
    struct check_result r;
    plumb_err e = {0};
    REQUIRE(check_doctor_run(&ctx, &r, &e) == PLUMB_OK);
    for (size_t i = 0; i < n; i++) {
        char item[128];
        snprintf(item, sizeof item, "env %s", cases[i].name);
        CHECK_MSG(!strcmp(row_status(&r, item), cases[i].want), "%s=%s: %s, want %s", cases[i].name, cases[i].value,
                  row_status(&r, item), cases[i].want);
    }
    /* warnings only: the check warns, with the first warning's reason */
    CHECK_STREQ(jsonx_str(r.obj, "status"), "warn");
    CHECK(strstr(jsonx_str(r.obj, "reason"), "env ") != NULL);
    check_free(&r);

    /* a malformed workspace config and a non-numeric thread count fail */
    setenv("CUBLAS_WORKSPACE_CONFIG", "4096x8", 1);
    setenv("OPENBLAS_NUM_THREADS", "many", 1);
    REQUIRE(check_doctor_run(&ctx, &r, &e) == PLUMB_OK);
    CHECK_STREQ(row_status(&r, "env CUBLAS_WORKSPACE_CONFIG"), "fail");
    CHECK_STREQ(row_status(&r, "env OPENBLAS_NUM_THREADS"), "fail");
    CHECK_STREQ(jsonx_str(r.obj, "status"), "fail");
    check_free(&r);
    /* more threads than cores: oversubscribed */
    setenv("OPENBLAS_NUM_THREADS", "100000", 1);
    REQUIRE(check_doctor_run(&ctx, &r, &e) == PLUMB_OK);
    CHECK_STREQ(row_status(&r, "env OPENBLAS_NUM_THREADS"), "warn");
    check_free(&r);

    for (size_t i = 0; i < n; i++) {
        if (saved[i]) setenv(cases[i].name, saved[i], 1);
        else unsetenv(cases[i].name);
        free(saved[i]);
    }
    /* with none of them set there is no row for them */
    REQUIRE(check_doctor_run(&ctx, &r, &e) == PLUMB_OK);
    CHECK(find_row(&r, "env NCCL_ALGO") == NULL);
    check_free(&r);
}
