/* libFuzzer target: the health thresholds file (health/health.h, "thresholds
 * and alerts"): health_thresholds_load on the bytes as a file (what
 * --thresholds FILE does), then the loaded limits as JSON (what results.json
 * and the exporter record). Checked: an accepted file never leaves a
 * negative or NaN limit, and the throttle list stays NUL-terminated. */
#include "fuzz_util.h"
#include "health/health.h"
#include <math.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    fuzz_memfile("thresholds", data, size, path, sizeof path);
    struct health_thresholds t;
    health_thresholds_default(&t);
    plumb_err e = {0};
    if (health_thresholds_load(&t, path, &e) != PLUMB_OK) {
        if (!e.msg[0]) abort();
        return 0;
    }
    const double lim[] = {t.gpu_temp_c, t.gpu_temp_critical_c, t.mem_temp_c, t.cpu_temp_c,
                          t.power_w,    t.ecc_per_hour,        t.ecc_window_s};
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (isnan(lim[i]) || lim[i] < 0) abort();
    if (!memchr(t.throttle, '\0', sizeof t.throttle)) abort();
    json_t *j = health_thresholds_json(&t);
    if (!j) abort();
    char *s = json_dumps(j, 0);
    free(s);
    json_decref(j);
    return 0;
}
