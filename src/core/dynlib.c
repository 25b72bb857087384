/* dlopen a candidate list and resolve a symbol table: see dynlib.h. */
#include "core/dynlib.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int dynlib_open(struct dynlib *lib, const char *what, const char *override, const char *const *cands, size_t n,
                plumb_err *e)
{
    lib->handle = NULL;
    lib->path[0] = '\0';
    const char *only[1] = {override};
    if (override && *override) cands = only, n = 1;
    char why[900] = "";
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (!cands[i] || !*cands[i]) continue;
        dlerror();
        void *h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            lib->handle = h;
            snprintf(lib->path, sizeof lib->path, "%s", cands[i]);
            return PLUMB_OK;
        }
        const char *de = dlerror();
        const char *msg = de ? de : "unknown dlopen error";
        /* dlerror usually starts with "<name>: ": do not repeat the name */
        size_t cl = strlen(cands[i]);
        int named = !strncmp(msg, cands[i], cl) && msg[cl] == ':';
        if (used < sizeof why)
            used += (size_t)snprintf(why + used, sizeof why - used, "%s%s%s%s", used ? "; " : "", named ? "" : cands[i],
                                     named ? "" : ": ", msg);
    }
    if (!used) snprintf(why, sizeof why, "no candidate library names");
    return err_set(e, PLUMB_EUNSUPPORTED, "%s: cannot load %s", what, why);
}

int dynlib_resolve(struct dynlib *lib, const char *what, const struct dynlib_sym *syms, size_t n, void *table,
                   plumb_err *e)
{
    if (!lib->handle) return err_set(e, PLUMB_EINTERNAL, "%s: library not open", what);
    for (size_t i = 0; i < n; i++) {
        dlerror();
        void *fn = dlsym(lib->handle, syms[i].name);
        const char *de = fn ? NULL : dlerror();
        char first[300] = "";
        if (de) snprintf(first, sizeof first, "%s", de);
        if (!fn && syms[i].alt) fn = dlsym(lib->handle, syms[i].alt);
        if (!fn && syms[i].required) {
            if (syms[i].alt)
                return err_set(e, PLUMB_EDEVICE, "%s: %s has no symbol %s (nor %s): %s", what, lib->path, syms[i].name,
                               syms[i].alt, first[0] ? first : "not found");
            return err_set(e, PLUMB_EDEVICE, "%s: %s has no symbol %s: %s", what, lib->path, syms[i].name,
                           first[0] ? first : "not found");
        }
        memcpy((char *)table + syms[i].off, &fn, sizeof fn);
    }
    return PLUMB_OK;
}

void *dynlib_sym(const struct dynlib *lib, const char *name)
{
    return lib->handle ? dlsym(lib->handle, name) : NULL;
}

void dynlib_close(struct dynlib *lib)
{
    if (lib->handle) dlclose(lib->handle);
    lib->handle = NULL;
}
