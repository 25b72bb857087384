/* Fault injection table (see inject.h for the grammar). Parsed once from the
 * --inject option; the engine asks inject_take(kind, step, rank) at the point
 * where the fault would happen, and each entry fires once per process.
 *
 * corrupt-checkpoint also accepts an optional @STEP (corrupt the checkpoint
 * written at that step) and :RANK; without @STEP it fires for the first
 * checkpoint written after the injection was armed. */
#include "train/inject.h"
#include "core/log.h"
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define INJECT_MAX 32

struct inject_entry {
    enum inject_kind kind;
    long step;   /* -1: any step (corrupt-checkpoint without @STEP) */
    int rank;    /* -1: every rank */
    int count;   /* times to fire (oom xCOUNT) */
    int fired;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct inject_entry g_tab[INJECT_MAX];
static int g_n;

static const char *kind_names[INJECT_KINDS] = {"oom", "nan", "hang", "exit", "corrupt-checkpoint"};

static int parse_long(const char *s, const char **end, long *out)
{
    if (!isdigit((unsigned char)*s)) return -1;
    errno = 0;
    char *e;
    long v = strtol(s, &e, 10);
    if (errno || v < 0) return -1;
    *out = v;
    *end = e;
    return 0;
}

/* One item, e.g. "oom@12:1x3", "hang@5:0", "corrupt-checkpoint". */
static int parse_item(const char *item, struct inject_entry *en, plumb_err *e)
{
    memset(en, 0, sizeof *en);
    en->step = -1;
    en->rank = -1;
    en->count = 1;
    size_t kl = strcspn(item, "@:");
    int k = -1;
    for (int i = 0; i < INJECT_KINDS; i++)
        if (strlen(kind_names[i]) == kl && !strncmp(item, kind_names[i], kl)) k = i;
    if (k < 0)
        return err_set(e, PLUMB_EUSAGE,
                       "--inject: unknown fault '%.*s' in '%s' (expected oom, nan, hang, exit or "
                       "corrupt-checkpoint)",
                       (int)kl, item, item);
    en->kind = (enum inject_kind)k;
    const char *p = item + kl;
    if (*p == '@') {
        if (parse_long(p + 1, &p, &en->step))
            return err_set(e, PLUMB_EUSAGE, "--inject: '%s': expected a step number >= 0 after '@'", item);
    } else if (en->kind != INJECT_CORRUPT_CKPT) {
        return err_set(e, PLUMB_EUSAGE, "--inject: '%s': expected %s@STEP", item, kind_names[k]);
    }
    if (*p == ':') {
        long r;
        if (parse_long(p + 1, &p, &r) || r > 1000000)
            return err_set(e, PLUMB_EUSAGE, "--inject: '%s': expected a rank number >= 0 after ':'", item);
        en->rank = (int)r;
    } else if (en->kind == INJECT_HANG || en->kind == INJECT_EXIT) {
        return err_set(e, PLUMB_EUSAGE, "--inject: '%s': %s needs a rank (%s@STEP:RANK)", item,
                       kind_names[k], kind_names[k]);
    }
    if (*p == 'x') {
        long c;
        if (en->kind != INJECT_OOM)
            return err_set(e, PLUMB_EUSAGE, "--inject: '%s': a count (xN) is only allowed for oom", item);
        if (parse_long(p + 1, &p, &c) || c < 1 || c > 1000)
            return err_set(e, PLUMB_EUSAGE, "--inject: '%s': expected a count 1..1000 after 'x'", item);
        en->count = (int)c;
    }
    if (*p)
        return err_set(e, PLUMB_EUSAGE, "--inject: '%s': unexpected '%s' (grammar: KIND@STEP[:RANK][xCOUNT])",
                       item, p);
    return 0;
}

int inject_parse(const char *spec, plumb_err *e)
{
    struct inject_entry tab[INJECT_MAX];
    int n = 0;
    if (spec && *spec) {
        size_t len = strlen(spec);
        char *buf = malloc(len + 1);
        if (!buf) return err_set(e, PLUMB_ENOMEM, "--inject: out of memory");
        memcpy(buf, spec, len + 1);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            while (*tok == ' ') tok++;
            if (!*tok) continue;
            if (n == INJECT_MAX) {
                free(buf);
                return err_set(e, PLUMB_EUSAGE, "--inject: more than %d faults in '%s'", INJECT_MAX, spec);
            }
            int rc = parse_item(tok, &tab[n], e);
            if (rc) {
                free(buf);
                return rc;
            }
            n++;
        }
        free(buf);
        if (n == 0) return err_set(e, PLUMB_EUSAGE, "--inject: '%s' names no fault", spec);
    }
    /* Under plumb launch, a restarted attempt resumes below the step of the
     * fault that ended the previous one; arming it again would fail every
     * attempt the same way. The spec is still checked above. */
    const char *att = getenv("PLUMB_LAUNCH_ATTEMPT");
    if (n && att && strcmp(att, "0") != 0) {
        log_info("inject: '%s' not armed on restart attempt %s (injections fire on attempt 0 only)", spec, att);
        n = 0;
    }
    pthread_mutex_lock(&g_mu);
    memcpy(g_tab, tab, sizeof(tab[0]) * (size_t)n);
    g_n = n;
    pthread_mutex_unlock(&g_mu);
    return 0;
}

int inject_take(enum inject_kind kind, long step, int rank)
{
    if (!g_n) return 0;
    int fire = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_n; i++) {
        struct inject_entry *en = &g_tab[i];
        if (en->fired || en->kind != kind) continue;
        if (en->step >= 0 && en->step != step) continue;
        if (en->rank >= 0 && en->rank != rank) continue;
        en->fired = 1;
        fire += en->count;
    }
    pthread_mutex_unlock(&g_mu);
    return fire;
}

int inject_active(void)
{
    pthread_mutex_lock(&g_mu);
    int n = 0;
    for (int i = 0; i < g_n; i++) n += !g_tab[i].fired;
    pthread_mutex_unlock(&g_mu);
    return n > 0;
}
