/* Reads out of a memory-mapped file that may shrink under the reader.
 *
 * A page of a MAP_SHARED mapping that lies past the file's end once the
 * file is truncated (or rewritten in place, shorter) raises SIGBUS when it
 * is touched, and the process died with "Bus error" and nothing naming the
 * file (gpt's token shards, models/gpt/data.c; ctr's Criteo cache,
 * models/ctr/cache.c). A mapguard turns that fault into an error:
 *
 *     struct mapguard g;
 *     mapguard_prepare(&g, map, map_len);
 *     if (sigsetjmp(g.jb, 0)) return mapguard_error(&g, path, "token file", e);
 *     mapguard_arm(&g);
 *     ... copy out of [map, map + map_len) ...
 *     mapguard_disarm(&g);
 *
 * One process-wide SIGBUS handler (installed once by mapguard_init) looks
 * at this thread's armed guard: a fault whose address lies in the guard's
 * range jumps back to the sigsetjmp; any other SIGBUS (no guard armed, or
 * an address outside it) restores the disposition the handler replaced and
 * raises the signal again, so it ends the process as it did before.
 *
 * Rules for the guarded region: no allocation, no locks, no calls that keep
 * state (the jump abandons whatever it interrupted), one guard per thread at
 * a time, armed and disarmed in the function that called sigsetjmp (keep
 * that function small: only what it reads after the jump must survive it,
 * and nothing it changes after sigsetjmp is read after the jump). */
#ifndef PLUMB_MAPGUARD_H
#define PLUMB_MAPGUARD_H
#include <setjmp.h>
#include <stddef.h>
#include "core/err.h"

struct mapguard {
    sigjmp_buf jb;
    const char *lo; /* the mapping [lo, lo + len) */
    size_t len;
    /* written by the handler before the jump: the faulting address */
    const char *volatile fault;
};

/* Installs the SIGBUS handler once per process (later calls return at
 * once). A mapping's owner calls it when it maps the file; mapguard_prepare
 * calls it too. Fails only if sigaction does (PLUMB_EINTERNAL). */
int mapguard_init(plumb_err *e);
/* Sets the guard's range (before the sigsetjmp: the range is read after a jump). */
void mapguard_prepare(struct mapguard *g, const void *map, size_t len);
/* From here to mapguard_disarm a SIGBUS in the range jumps to g->jb. */
void mapguard_arm(struct mapguard *g);
void mapguard_disarm(struct mapguard *g);
/* memcpy(dst, src, n) out of the mapping [map, map + len) under a guard:
 * PLUMB_EIO "<path>: <what> shrank ..." (mapguard_error) when it faults. */
int mapguard_memcpy(const void *map, size_t len, const char *path, const char *what, void *dst, const void *src,
                    size_t n, plumb_err *e);
/* After the jump: disarms, unblocks SIGBUS in this thread (the handler's
 * mask stays in force after a jump that saved none), and sets
 * PLUMB_EIO "<path>: <what> shrank while being read (...)" with the file's
 * size now and the offset of the fault. Returns PLUMB_EIO. */
int mapguard_error(struct mapguard *g, const char *path, const char *what, plumb_err *e);

#endif
