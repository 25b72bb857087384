/* libFuzzer target: the CIFAR-10 binary reader (models/resnet/cifar.h,
 * cifar_read_file) on the bytes as a file, read twice into one set (as the
 * five training batches are appended). Checked: an accepted file holds a
 * whole number of 3073-byte records with labels 0..9, each image equal to
 * its record's pixel bytes. Run with -max_len of a few records (make fuzz
 * does). */
#include "fuzz_util.h"
#include "models/resnet/cifar.h"
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
    fuzz_memfile("cifar", data, size, path, sizeof path);
    struct cifar_set s = {0};
    plumb_err e = {0};
    int rc = cifar_read_file(path, &s, &e);
    if (rc == PLUMB_OK) rc = cifar_read_file(path, &s, &e);
    if (rc != PLUMB_OK) {
        if (!e.msg[0]) abort();
        cifar_set_free(&s);
        return 0;
    }
    size_t n = size / CIFAR_RECORD;
    if (size % CIFAR_RECORD || s.n != 2 * n) abort();
    for (size_t i = 0; i < s.n; i++) {
        const uint8_t *rec = data + (i % n) * CIFAR_RECORD;
        if (s.labels[i] != rec[0] || s.labels[i] >= CIFAR_CLASSES) abort();
        if (memcmp(s.pixels + i * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS)) abort();
    }
    cifar_set_free(&s);
    return 0;
}
