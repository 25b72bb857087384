/* GPU backend plugins: libplumb-<name>.so found in each directory of
 * PLUMB_BACKEND_PATH, then next to the executable. The plugin exports
 * PLUMB_BACKEND_SYMBOL; an ABI mismatch or a failed dlopen (missing driver
 * library, wrong version) is reported with the path and dlerror() text. */
#include "dev/dev.h"
#include "core/dynlib.h"
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct plugin_slot {
    char name[16];
    int tried;
    const struct dev_backend *be;
    char why[1024];
};

static struct plugin_slot g_slots[2] = {{"cuda", 0, NULL, ""}, {"hip", 0, NULL, ""}};
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static struct plugin_slot *slot_for(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (!strcmp(g_slots[i].name, name)) return &g_slots[i];
    return NULL;
}

struct plugin_api {
    plumb_backend_register_fn reg;
};
static const struct dynlib_sym g_plugin_syms[] = {
    DYNLIB_SYM(struct plugin_api, reg, PLUMB_BACKEND_SYMBOL, NULL, 1),
};

/* Tries one path; on failure appends the reason to why. */
static const struct dev_backend *try_path(const char *path, char *why, size_t n)
{
    size_t used = strlen(why);
    struct dynlib lib;
    struct plugin_api api;
    plumb_err e = {0};
    const char *cands[1] = {path};
    if (dynlib_open(&lib, "backend plugin", NULL, cands, 1, &e) ||
        dynlib_resolve(&lib, "backend plugin", g_plugin_syms, 1, &api, &e)) {
        snprintf(why + used, n - used, "%s%s", used ? "; " : "", e.msg);
        dynlib_close(&lib);
        return NULL;
    }
    const struct dev_backend *be = NULL;
    if (api.reg(PLUMB_BACKEND_ABI, &be, &e) != PLUMB_OK || !be) {
        snprintf(why + used, n - used, "%s%s: registration failed: %s", used ? "; " : "", path, e.msg);
        dynlib_close(&lib);
        return NULL;
    }
    if (be->abi != PLUMB_BACKEND_ABI) {
        snprintf(why + used, n - used, "%s%s: ABI %d, plumb expects %d", used ? "; " : "", path, be->abi,
                 PLUMB_BACKEND_ABI);
        dynlib_close(&lib);
        return NULL;
    }
    return be; /* the library stays open for the life of the process */
}

const struct dev_backend *plugin_load(const char *name, plumb_err *e)
{
    struct plugin_slot *s = slot_for(name);
    if (!s) {
        err_set(e, PLUMB_EUSAGE, "no plugin named '%s'", name);
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    if (!s->tried) {
        s->tried = 1;
        char file[64], path[PATH_MAX], exe[PATH_MAX];
        snprintf(file, sizeof file, "libplumb-%s.so", name);
        /* PLUMB_BACKEND_PATH first: an explicit choice (a test's fake plugin, a
         * build carried to another host) wins over the plugin next to the
         * executable, as LD_LIBRARY_PATH wins over the default paths */
        const char *env = getenv("PLUMB_BACKEND_PATH");
        if (env && *env) {
            char *copy = strdup(env), *save = NULL;
            for (char *dir = strtok_r(copy, ":", &save); dir && !s->be; dir = strtok_r(NULL, ":", &save)) {
                snprintf(path, sizeof path, "%s/%s", dir, file);
                if (access(path, F_OK) == 0) s->be = try_path(path, s->why, sizeof s->why);
            }
            free(copy);
        }
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len > 0) {
            exe[len] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash) *slash = '\0';
            snprintf(path, sizeof path, "%s/%s", exe, file);
            if (!s->be && access(path, F_OK) == 0) s->be = try_path(path, s->why, sizeof s->why);
        }
        if (!s->be && !s->why[0])
            snprintf(s->why, sizeof s->why, "%s not found next to the executable (%s) or in PLUMB_BACKEND_PATH (%s)",
                     file, len > 0 ? exe : "?", env ? env : "unset");
    }
    const struct dev_backend *be = s->be;
    if (!be) err_set(e, PLUMB_EDEVICE, "%s backend unavailable: %s", name, s->why);
    pthread_mutex_unlock(&g_lock);
    return be;
}

void plugin_describe(const char *name, char *buf, size_t n)
{
    plumb_err e = {0};
    const struct dev_backend *be = plugin_load(name, &e);
    if (be) snprintf(buf, n, "loaded");
    else snprintf(buf, n, "%s", e.msg);
}
