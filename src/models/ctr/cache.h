/* The binary cache of a Criteo file (`plumb data cache FILE`): the parsed
 * samples (struct criteo_sample, 160 bytes each) behind a header, written
 * once and mapped read-only by the loader, so a run starts without parsing.
 *
 * Layout (little endian): a 256-byte header
 *   magic "PLUMBCRC", u32 version (1), u32 sample bytes (160),
 *   u64 rows, u64 malformed lines skipped, u64 truncated last lines,
 *   u64 source size, u64 source mtime seconds,
 *   u32 source mtime nanoseconds, char source path [180] (as given,
 *   NUL-padded), u32 --bad-lines mode of the parse, u32 CRC-32 of the
 *   samples, 4 bytes 0, u32 CRC-32 of the header's first 252 bytes;
 * then rows samples. A cache whose header, length or samples do not check
 * out is corrupt; one whose source (when it still exists) has another size
 * or mtime is stale: both are refused, naming the file. */
#ifndef PLUMB_CTR_CACHE_H
#define PLUMB_CTR_CACHE_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "models/ctr/criteo.h"

#define CRITEO_CACHE_SUFFIX ".plumbcache"
#define CRITEO_CACHE_VERSION 1

struct criteo_cache {
    void *map;                  /* the mapping */
    size_t map_len;
    char *path;                 /* the cache file (malloc'ed; NULL unless mapped) */
    const struct criteo_sample *samples;
    long rows, skipped, truncated;
    enum criteo_bad bad;
    char source[181];
};

/* Parses src (on `threads` threads) and writes its cache to out atomically. */
int criteo_cache_write(const char *src, const char *out, enum criteo_bad bad, int threads,
                       struct criteo_cache *info, plumb_err *e);
/* Maps and checks the cache at path; src (NULL: the path recorded in the
 * header) is the source it must be fresh against, when that file exists.
 * Its reads (the checksum here, the batch gather of models/ctr/data.c) are
 * guarded (core/mapguard.h): a cache that shrinks while mapped is PLUMB_EIO
 * naming it, not SIGBUS. */
int criteo_cache_map(const char *path, const char *src, struct criteo_cache *c, plumb_err *e);
void criteo_cache_unmap(struct criteo_cache *c);
/* 1 when p points into c's mapping (a reader of it then reads under a guard). */
int criteo_cache_holds(const struct criteo_cache *c, const void *p);
/* 1 when path ends in CRITEO_CACHE_SUFFIX. */
int criteo_cache_is(const char *path);

#endif
