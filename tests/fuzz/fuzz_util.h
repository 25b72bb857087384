/* Shared by the libFuzzer targets of tests/fuzz (docs/HACKING.md, "Fuzzing").
 *
 * Most of plumb's readers take a path, not a buffer: a target writes its
 * input to an anonymous in-memory file (memfd) and hands the reader
 * /proc/self/fd/N, so the real open/stat/read path runs with no disk I/O
 * and nothing is left behind. Messages of the code under test (log_warn on
 * a skipped line, --help text) would flood libFuzzer's output: log level
 * quiet and stdout to /dev/null. */
#ifndef PLUMB_FUZZ_UTIL_H
#define PLUMB_FUZZ_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "core/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static inline void fuzz_quiet(void)
{
    log_set_level(LOG_QUIET);
    if (!freopen("/dev/null", "w", stdout)) abort();
}

/* An in-memory file holding data[0..size); path gets "/proc/self/fd/N".
 * The descriptor is created once and rewritten on every call. */
static inline void fuzz_memfile(const char *name, const uint8_t *data, size_t size, char *path, size_t n)
{
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create(name, 0)) < 0) abort();
    if (ftruncate(fd, 0) || lseek(fd, 0, SEEK_SET) != 0) abort();
    for (size_t off = 0; off < size;) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    snprintf(path, n, "/proc/self/fd/%d", fd);
}

/* Writes data to path (a real file, for readers that want a folder). */
static inline void fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) abort();
}

#endif
