#include "cli/args.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n)) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

static int set_value(const struct opt *o, const char *v, plumb_err *e)
{
    char *end;
    switch (o->kind) {
    case OPT_STR:
        *(const char **)o->dst = v;
        return PLUMB_OK;
    case OPT_OPTCHOICE:
        if (*v && !choice_ok(o->choices, v))
            return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not one of %s (or no value)", o->name, v, o->choices);
        *(const char **)o->dst = v;
        return PLUMB_OK;
    case OPT_CHOICE:
        if (!choice_ok(o->choices, v))
            return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not one of %s", o->name, v, o->choices);
        *(const char **)o->dst = v;
        return PLUMB_OK;
    case OPT_INT: {
        errno = 0;
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end)
            return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not an integer", o->name, v);
        if (o->choices) {
            /* "lo..hi", or an open end: "0.." (at least 0), "..9" (at most 9) */
            long lo, hi;
            const char *dots = strstr(o->choices, "..");
            int has_lo = dots && dots > o->choices && sscanf(o->choices, "%ld", &lo) == 1;
            int has_hi = dots && dots[2] && sscanf(dots + 2, "%ld", &hi) == 1;
            if ((has_lo && x < lo) || (has_hi && x > hi))
                return err_set(e, PLUMB_EUSAGE, "%s: %ld is out of range (expected %s)", o->name, x, o->choices);
        }
        *(long *)o->dst = x;
        return PLUMB_OK;
    }
    case OPT_DOUBLE: {
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x))
            return err_set(e, PLUMB_EUSAGE, "%s: '%s' is not a finite number", o->name, v);
        *(double *)o->dst = x;
        return PLUMB_OK;
    }
    case OPT_FLAG:
        *(int *)o->dst = 1;
        return PLUMB_OK;
    }
    return err_set(e, PLUMB_EINTERNAL, "%s: bad option kind", o->name);
}

void args_print_help(const char *usage, const char *summary, const struct opt *opts)
{
    printf("usage: %s\n\n%s\n\noptions:\n", usage, summary);
    for (const struct opt *o = opts; o && o->name; o++) {
        char left[64];
        const char *mv = o->metavar ? o->metavar
                         : o->kind == OPT_INT ? "N" : o->kind == OPT_DOUBLE ? "X"
                         : o->kind == OPT_CHOICE ? o->choices : "S";
        if (o->kind == OPT_FLAG) snprintf(left, sizeof left, "%s", o->name);
        else if (o->kind == OPT_OPTCHOICE) snprintf(left, sizeof left, "%s [%s]", o->name, o->choices);
        else snprintf(left, sizeof left, "%s %s", o->name, mv);
        printf("  %-28s %s", left, o->help);
        if (o->kind == OPT_FLAG || o->kind == OPT_OPTCHOICE) printf(" (default: off)");
        else if (o->def) printf(" (default: %s)", o->def);
        printf("\n");
    }
    printf("  %-28s %s\n", "--help", "show this help and exit");
}

/* The command of a usage line, for "see 'plumb compare --help'": its leading words made of
 * lowercase letters, digits and '-' ("plumb report verify DIR --pub PUB" -> "plumb report
 * verify"). The whole usage line read "see plumb report verify DIR --pub PUB --help", which is
 * not a command that prints help. */
static void usage_command(const char *usage, char *out, size_t n)
{
    size_t L = 0;
    const char *p = usage ? usage : "plumb";
    while (*p) {
        const char *w = p;
        while (*p && ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) p++;
        if (p == w || (*p && *p != ' ') || *w == '-') break;
        if (L + (size_t)(p - w) + 2 >= n) break;
        L += (size_t)snprintf(out + L, n - L, "%s%.*s", L ? " " : "", (int)(p - w), w);
        while (*p == ' ') p++;
    }
    if (!L) snprintf(out, n, "plumb");
}

int args_parse(const char *usage, const char *summary, const struct opt *opts, int argc,
               char **argv, char **pos, int max_pos, int *npos, plumb_err *e)
{
    char cmd[128];
    usage_command(usage, cmd, sizeof cmd);
    int rc;
    if (npos) *npos = 0;
    for (const struct opt *o = opts; o && o->name; o++) {
        if (o->kind == OPT_FLAG) *(int *)o->dst = 0;
        else if (o->kind == OPT_OPTCHOICE) *(const char **)o->dst = NULL;
        /* a string without a default is NULL until given: bench ceilings' --json
         * target was never set, and an ASan build wrote its JSON to whatever the
         * stack held (a file named '\a' in the working directory) */
        else if (o->kind == OPT_STR && !o->def) *(const char **)o->dst = NULL;
        else if (o->def && (rc = set_value(o, o->def, e))) return err_wrap(e, "default of %s", o->name);
    }
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || !a[1]) {
            if (!pos || !npos || *npos >= max_pos)
                return err_set(e, PLUMB_EUSAGE, "unexpected argument '%s' (see '%s --help')", a, cmd);
            pos[(*npos)++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_pos = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            args_print_help(usage, summary, opts);
            return ARGS_HELP;
        }
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const struct opt *o = opts;
        for (; o && o->name; o++)
            if (strlen(o->name) == nlen && !strncmp(o->name, a, nlen)) break;
        if (!o || !o->name)
            return err_set(e, PLUMB_EUSAGE, "unknown option '%.*s' (see '%s --help')", (int)nlen, a, cmd);
        const char *v = NULL;
        if (o->kind == OPT_FLAG) {
            if (eq) return err_set(e, PLUMB_EUSAGE, "%s takes no value", o->name);
        } else if (o->kind == OPT_OPTCHOICE) {
            v = eq ? eq + 1 : i + 1 < argc && choice_ok(o->choices, argv[i + 1]) ? argv[++i] : "";
            if (eq && !*v) return err_set(e, PLUMB_EUSAGE, "%s=: expected one of %s", o->name, o->choices);
        } else if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc) return err_set(e, PLUMB_EUSAGE, "%s needs a value", o->name);
            /* "--preset --out X": the next word is an option, not this one's value
             * (a value that starts with "--" can still be given as --name=VALUE) */
            if (argv[i + 1][0] == '-' && argv[i + 1][1] == '-')
                return err_set(e, PLUMB_EUSAGE, "%s needs a value (got the option '%s'; use %s=VALUE for a value "
                               "that starts with --)", o->name, argv[i + 1], o->name);
            v = argv[++i];
        }
        if ((rc = set_value(o, v, e))) return rc;
    }
    return PLUMB_OK;
}

void args_command_line(int argc, char **argv, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "plumb");
    for (int i = 0; i < argc && k < n; i++) k += (size_t)snprintf(buf + k, n - k, " %s", argv[i]);
}

int args_split_list(const char *s, char *buf, size_t bufn, char **out, int max)
{
    snprintf(buf, bufn, "%s", s);
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n >= max) return -1;
        out[n++] = t;
    }
    return n;
}
