/* libFuzzer target: command-line parsing. The input is a command line, its
 * words separated by NUL bytes, given to
 *   1. cli/args.h, args_parse over a table with every option kind (string,
 *      integer with and without a range, double, flag, choice), as every
 *      subcommand uses it, plus args_split_list on each string value;
 *   2. train/options.h, the option table of plumb train, for each workload:
 *      train_option_set on each --name value pair, then
 *      train_config_finish; a config that finishes is turned back into a
 *      command line (train_config_argv, as the drills and launch do) that
 *      must parse and finish again.
 * Checked: an error always says what is wrong; a range given in the table
 * holds for every accepted integer. */
#include "fuzz_util.h"
#include "cli/args.h"
#include "models/workloads.h"
#include "train/options.h"
#include "train/trainer.h"
#include <string.h>

#define MAX_WORDS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static void generic(int argc, char **argv)
{
    const char *str = NULL, *choice = NULL, *list = NULL;
    long count = 0, ranged = 0;
    double rate = 0;
    int flag = 0;
    const struct opt opts[] = {
        {"--out", OPT_STR, &str, NULL, "run folder", NULL, "DIR"},
        {"--count", OPT_INT, &count, "1000", "samples", NULL, "N"},
        {"--ranks", OPT_INT, &ranged, "1", "ranks", "1..64", "N"},
        {"--rate", OPT_DOUBLE, &rate, "0.5", "a rate", NULL, "X"},
        {"--quick", OPT_FLAG, &flag, NULL, "quick level", NULL, NULL},
        {"--mode", OPT_CHOICE, &choice, "fast", "numerics", "fast|golden", NULL},
        {"--precision", OPT_STR, &list, "fp32", "comma list", NULL, "LIST"},
        {0},
    };
    char *pos[4];
    int npos = 0;
    plumb_err e = {0};
    int rc = args_parse("plumb fuzz [options]", "fuzzing args_parse", opts, argc, argv, pos, 4, &npos, &e);
    if (rc == ARGS_HELP) return;
    if (rc) {
        if (!e.msg[0]) abort();
        return;
    }
    if (npos < 0 || npos > 4 || ranged < 1 || ranged > 64) abort();
    if (choice && strcmp(choice, "fast") && strcmp(choice, "golden")) abort();
    char buf[512], *out[8];
    if (list) (void)args_split_list(list, buf, sizeof buf, out, 8);
    if (str) (void)args_split_list(str, buf, sizeof buf, out, 8);
}

/* w is one of the '|'-separated choices */
static int is_choice(const char *choices, const char *w)
{
    size_t n = strlen(w);
    for (const char *c = choices; c && *c;) {
        size_t k = strcspn(c, "|");
        if (k == n && !strncmp(c, w, n)) return 1;
        c += k + (c[k] == '|');
    }
    return 0;
}

/* Sets the words as plumb train options on a fresh config of wl. */
static int train_words(const struct workload *wl, int argc, char **argv, struct train_config *c, plumb_err *e)
{
    train_config_defaults(c, wl);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(a, "="), a);
        const struct train_option *o = train_option_find(wl, name, NULL);
        if (!o) continue; /* not an option: positional words are plumb train's, not the table's */
        const char *v = strchr(a, '=') ? strchr(a, '=') + 1 : NULL;
        if (o->kind == TOPT_OPTCHOICE && !v) {
            /* as cli/args.c takes it: the next word only when it is one of the choices, else no value */
            v = i + 1 < argc && is_choice(o->range, argv[i + 1]) ? argv[++i] : "";
        } else if (o->kind != TOPT_FLAG && !v) {
            if (i + 1 >= argc) return err_set(e, PLUMB_EUSAGE, "%s needs a value", name);
            v = argv[++i];
        }
        int rc = train_option_set(c, name, o->kind == TOPT_FLAG ? NULL : v, e);
        if (rc) return rc;
    }
    return train_config_finish(c, e);
}

static void train(int argc, char **argv)
{
    for (int w = 0; workload_at(w); w++) {
        const struct workload *wl = workload_at(w);
        struct train_config c;
        plumb_err e = {0};
        if (train_words(wl, argc, argv, &c, &e)) {
            if (!e.msg[0]) abort();
            continue;
        }
        /* round trip: the config's own command line gives a config again */
        char *words[2 * MAX_WORDS + 256], buf[1 << 15];
        int n = train_config_argv(&c, words, (int)(sizeof words / sizeof words[0]), buf, sizeof buf);
        if (n < 0) continue;
        struct train_config c2;
        plumb_err e2 = {0};
        if (train_words(wl, n, words, &c2, &e2)) {
            /* what a reproducer needs: the message and the words that did not parse back */
            fprintf(stderr, "fuzz_args: %s: the config's own command line does not parse back: %s\n", wl->name, e2.msg);
            for (int k = 0; k < n; k++) fprintf(stderr, "  [%d] '%s'\n", k, words[k]);
            abort();
        }
        if (c2.steps != c.steps || c2.batch != c.batch || c2.data_seed != c.data_seed) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_WORDS + 2];
    int argc = 0;
    argv[argc++] = "plumb";
    for (char *p = text; p < text + size && argc < MAX_WORDS + 1;) {
        argv[argc++] = p;
        p += strlen(p) + 1;
    }
    argv[argc] = NULL;
    generic(argc, argv);
    train(argc - 1, argv + 1);
    free(text);
    return 0;
}
