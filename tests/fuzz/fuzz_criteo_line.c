/* libFuzzer target: the Criteo line parser (models/ctr/criteo.h,
 * criteo_parse_line) on one line of arbitrary bytes. The input is passed
 * with its exact length and no terminating NUL, so a read past the line is
 * an AddressSanitizer report. A parsed line must have finite features. */
#include "fuzz_util.h"
#include "models/ctr/criteo.h"
#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct criteo_sample s;
    plumb_err e = {0};
    if (criteo_parse_line((const char *)data, size, &s, &e) == PLUMB_OK) {
        if (s.label != 0.0f && s.label != 1.0f) abort();
        for (int i = 0; i < CRITEO_DENSE; i++)
            if (!isfinite(s.dense[i]) || s.dense[i] < 0.0f) abort();
    } else if (!e.msg[0]) {
        abort(); /* an error must say what is wrong */
    }
    return 0;
}
