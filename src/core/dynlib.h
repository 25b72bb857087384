/* The one loader for vendor libraries that may be absent on a host (NVML,
 * ROCm SMI, amdsmi, NCCL/RCCL, the GPU backend plugins): dlopen the first of
 * a list of candidate names that loads, then resolve a table of named
 * function pointers declared in our own header. Failures say which library
 * (each candidate tried, with dlerror) or which symbol was missing.
 *
 *   struct foo_api { int (*Init)(void); const char *(*Err)(int); };
 *   static const struct dynlib_sym syms[] = {
 *       DYNLIB_SYM(struct foo_api, Init, "fooInit_v2", "fooInit", 1),
 *       DYNLIB_SYM(struct foo_api, Err, "fooErrorString", NULL, 0),
 *   };
 *   const char *cands[] = {"libfoo.so.2", "libfoo.so.1"};
 *   dynlib_open(&lib, "foo", getenv("PLUMB_FOO_LIB"), cands, 2, e);
 *   dynlib_resolve(&lib, "foo", syms, 2, &api, e);
 */
#ifndef PLUMB_DYNLIB_H
#define PLUMB_DYNLIB_H
#include <stddef.h>
#include "core/err.h"

struct dynlib {
    void *handle;    /* NULL until dynlib_open succeeded */
    char path[512];  /* the candidate that loaded */
};

/* One entry of a function table: the pointer at byte offset `off` of the
 * caller's table is set from symbol `name`, or `alt` (another spelling: a
 * newer or older versioned name) when `name` is absent. A missing required
 * symbol fails dynlib_resolve; a missing optional one leaves NULL. */
struct dynlib_sym {
    const char *name, *alt;
    size_t off;
    int required;
};
#define DYNLIB_SYM(table_type, field, name, alt, required) {(name), (alt), offsetof(table_type, field), (required)}

/* Opens `override` when it is set and non-empty (a path from an environment
 * variable: then only it is tried), else the first of cands[n] that loads
 * (RTLD_NOW | RTLD_LOCAL). On failure PLUMB_EUNSUPPORTED with
 * "<what>: cannot load <cand>: <dlerror>; <cand>: <dlerror>...". */
int dynlib_open(struct dynlib *lib, const char *what, const char *override, const char *const *cands, size_t n,
                plumb_err *e);
/* Fills table from syms[n]; every pointer of an absent optional symbol is
 * set to NULL. A missing required symbol: PLUMB_EDEVICE with
 * "<what>: <path> has no symbol <name> (nor <alt>): <dlerror>". */
int dynlib_resolve(struct dynlib *lib, const char *what, const struct dynlib_sym *syms, size_t n, void *table,
                   plumb_err *e);
/* One optional symbol (NULL when absent). */
void *dynlib_sym(const struct dynlib *lib, const char *name);
void dynlib_close(struct dynlib *lib);

#endif
