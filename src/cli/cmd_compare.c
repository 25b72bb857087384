/* plumb compare A B: two run folders (or two devices of one, or two per-seed
 * metric files) side by side, with a statistical verdict on training parity
 * (report/compare.h, docs/COMPARE.md). */
#include "cli/args.h"
#include "cli/commands.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "report/compare.h"
#include "report/results.h"
#include "report/sign.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A run folder given as DIR or DIR/results.json: the folder artifacts are read from. */
static void folder_of(const char *arg, char *dir, size_t n)
{
    snprintf(dir, n, "%s", arg);
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, n, ".");
    }
    size_t L = strlen(dir);
    while (L > 1 && dir[L - 1] == '/') dir[--L] = '\0';
}

int cmd_compare(int argc, char **argv)
{
    const char *out = NULL, *dev_a = NULL, *dev_b = NULL, *margin = NULL, *pub = NULL, *pub_a = NULL, *pub_b = NULL;
    const char *metric = NULL;
    double alpha = 0.05, power = 0.8;
    int metrics = 0, attribute = 0, json_out = 0;
    static const char *usage = "plumb compare A [B] [options]";
    static const char *summary =
        "Put two run folders side by side (from any hosts): every check paired by name and device with its status,\n"
        "metrics (delta B-A and ratio B/A) and thresholds; digest rows (rng streams, golden numerics per op, golden\n"
        "training) that must be bit-equal; training parity of every per-seed metric (Welch, TOST at --margin,\n"
        "permutation test, 95% CI of B-A, the gap in seed standard deviations, a verdict: equivalent, different, or\n"
        "undecided with the seeds needed); loss curves with seed bands; the attribution ladder when both sides ran\n"
        "one ('plumb attribute'). One folder with --a DEV --b DEV compares two of its devices. With --metrics, A and\n"
        "B are per-seed metric files (JSON lines: seed, metrics, optional curve; docs/COMPARE.md) from any trainer.\n"
        "The verdict is the primary metric's (--metric; by default the records' own: plumb writes the workload's\n"
        "deciding metric, ctr auc, gpt a val loss); the other metrics are secondary. The verdict is two-sided; where\n"
        "the records say which direction is better (lower for a loss), the report says whether B is better or worse.\n"
        "Exit 0 when the primary metric is equivalent (or nothing was recorded) and every digest row is equal, 1 when\n"
        "it is different or undecided or a digest differs, 2 on bad input (the message names the file) and on two\n"
        "folders with no check in common (a gpt run and a ctr run: nothing to compare).";
    const struct opt opts[] = {
        {"--out", OPT_STR, &out, NULL, "write compare.json and compare.html to this folder", NULL, "DIR"},
        {"--a", OPT_STR, &dev_a, NULL, "side A: only the checks that ran on this device (e.g. cuda:0)", NULL, "DEV"},
        {"--b", OPT_STR, &dev_b, NULL, "side B: only the checks that ran on this device (e.g. cpu)", NULL, "DEV"},
        {"--metrics", OPT_FLAG, &metrics, "off", "A and B are per-seed metric files (.jsonl), not run folders", NULL, NULL},
        {"--margin", OPT_STR, &margin, NULL,
         "equivalence margin: relative to A's mean (0.15%), absolute (0.001), or per metric (auc=0.15%,logloss=0.002) "
         "(default: the records' own margin, which plumb writes from the workload's accept descriptor, ctr auc=0.15%; "
         "else 0.15%)", NULL, "M"},
        {"--metric", OPT_STR, &metric, NULL, "the primary metric, whose verdict decides (default: the records' primary "
         "when both sides have it, else auc when both have it, else the first shared metric); the others are "
         "secondary, shown with their own verdicts", NULL, "NAME"},
        {"--alpha", OPT_DOUBLE, &alpha, "0.05", "significance level of every test (TOST at 1 - 2 alpha)", NULL, "X"},
        {"--power", OPT_DOUBLE, &power, "0.8", "power for the seeds-needed estimate", NULL, "X"},
        {"--attribute", OPT_FLAG, &attribute, "off", "require the attribution ladder on both sides (plumb attribute)", NULL,
         NULL},
        {"--pub", OPT_STR, &pub, NULL, "trusted Ed25519 public key (PEM) to verify both sides' signatures", NULL, "PUB"},
        {"--pub-a", OPT_STR, &pub_a, NULL, "trusted public key for side A's signature", NULL, "PUB"},
        {"--pub-b", OPT_STR, &pub_b, NULL, "trusted public key for side B's signature", NULL, "PUB"},
        {"--json", OPT_FLAG, &json_out, "off", "print the comparison document (plumb.compare/1) instead of the table", NULL,
         NULL},
        {0},
    };
    char *pos[3];
    int npos = 0;
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, pos, 3, &npos, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("compare", &e);
    if (!(alpha > 0 && alpha < 0.5)) {
        err_set(&e, PLUMB_EUSAGE, "--alpha: %g is not in (0, 0.5)", alpha);
        return cli_fail("compare", &e);
    }
    if (!(power > 0 && power < 1)) {
        err_set(&e, PLUMB_EUSAGE, "--power: %g is not in (0, 1)", power);
        return cli_fail("compare", &e);
    }
    int one_folder = npos == 1 && !metrics && dev_a && dev_b;
    if (!(npos == 2 || one_folder)) {
        err_set(&e, PLUMB_EUSAGE, "expected two run folders A B (or one folder with --a DEV --b DEV), got %d argument%s; "
                "see 'plumb compare --help'", npos, npos == 1 ? "" : "s");
        return cli_fail("compare", &e);
    }
    /* one folder, one device on both sides: every check compared with itself ("undecided" or "equivalent"
     * with B - A = 0 exactly), a verdict about nothing */
    if (one_folder && !strcmp(dev_a, dev_b)) {
        err_set(&e, PLUMB_EUSAGE, "--a %s --b %s: the same device on both sides of one folder compares its checks with "
                "themselves; give two devices of the folder, or two folders", dev_a, dev_b);
        return cli_fail("compare", &e);
    }
    if (metrics && (dev_a || dev_b || attribute)) {
        err_set(&e, PLUMB_EUSAGE, "--metrics compares two files: --a, --b and --attribute need run folders");
        return cli_fail("compare", &e);
    }
    /* a seeds file carries no signature: --pub verified nothing and was ignored without a word (a reader of
     * the output could take the comparison for one of verified folders) */
    if (metrics && (pub || pub_a || pub_b)) {
        err_set(&e, PLUMB_EUSAGE, "%s: --metrics files carry no signature (expected signed run folders A B, or no %s)",
                pub ? "--pub" : pub_a ? "--pub-a" : "--pub-b", pub ? "--pub" : pub_a ? "--pub-a" : "--pub-b");
        return cli_fail("compare", &e);
    }
    struct compare_opts o;
    compare_opts_defaults(&o);
    o.dev_a = dev_a, o.dev_b = dev_b, o.alpha = alpha, o.power = power, o.attribute = attribute;
    o.margin = margin; /* NULL: the records' own, else 0.15% */
    o.metric = metric;
    o.pub_a = pub_a ? pub_a : pub;
    o.pub_b = pub_b ? pub_b : pub;
    /* '' was taken as no --margin (the records' own margin, without a word) */
    if (margin && !*margin) {
        err_set(&e, PLUMB_EUSAGE, "--margin '': expected a margin (0.15%%, 0.001 or auc=0.15%%,logloss=0.002)");
        return cli_fail("compare", &e);
    }
    if (metric && !*metric) {
        err_set(&e, PLUMB_EUSAGE, "--metric '': expected a metric name (auc, val_loss, ...)");
        return cli_fail("compare", &e);
    }
    /* the margin text is checked before any work (per-metric entries on use) */
    {
        char t[128];
        double m;
        if (compare_margin_for(o.margin, "(any metric)", 1.0, &m, t, sizeof t, &e)) return cli_fail("compare", &e);
    }
    /* a trusted key that cannot be used is the user's input: it read as "signatures: A invalid: /nope: cannot
     * open the public key", blaming the folder, and the exit code said nothing */
    {
        const char *kn[] = {"--pub", "--pub-a", "--pub-b"}, *kv[] = {pub, pub_a, pub_b};
        for (int i = 0; i < 3; i++)
            if (kv[i] && sign_check_pub(kv[i], &e)) {
                err_wrap(&e, "%s", kn[i]);
                return cli_fail("compare", &e);
            }
    }
    /* --out is checked (and created) before the inputs are read: a file or a path that cannot be created was
     * exit 3 from the final mkdir ("exists and is not a directory"), after the comparison */
    if (out && file_check_output_dir("--out", out, &e)) return cli_fail("compare", &e);
    /* and the two files it writes there (a directory named compare.json was exit 3 from the rename) */
    if (out) {
        char f[PATH_MAX + 32];
        const char *names[] = {"compare.json", "compare.html"};
        for (int i = 0; i < 2; i++)
            if (file_join(f, sizeof f, out, names[i], &e) || file_check_output("--out", f, &e)) return cli_fail("compare", &e);
    }
    json_t *doc = NULL;
    if (metrics) {
        rc = compare_metric_files(pos[0], pos[1], &o, &doc, &e);
    } else {
        json_t *a = NULL, *b = NULL;
        char da[PATH_MAX], db[PATH_MAX];
        folder_of(pos[0], da, sizeof da);
        folder_of(one_folder ? pos[0] : pos[1], db, sizeof db);
        rc = results_read(pos[0], &a, &e);
        if (!rc) rc = results_read(one_folder ? pos[0] : pos[1], &b, &e);
        if (!rc) rc = compare_runs(a, da, b, db, &o, &doc, &e);
        json_decref(a);
        json_decref(b);
    }
    if (rc) return cli_fail("compare", &e);
    if (out) {
        char path[PATH_MAX + 32];
        rc = file_join(path, sizeof path, out, "compare.json", &e);
        if (!rc) rc = jsonx_write_file(path, doc, &e);
        if (!rc && !(rc = file_join(path, sizeof path, out, "compare.html", &e))) rc = compare_html_write(doc, path, &e);
        if (rc) {
            json_decref(doc);
            return cli_fail("compare", &e);
        }
    }
    if (json_out) {
        char *s = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS | JSON_REAL_PRECISION(10));
        if (s) puts(s);
        free(s);
    } else {
        compare_print(stdout, doc);
        if (out) printf("report: %s/compare.html\n", out);
    }
    int code = (int)jsonx_num(doc, "exit_code");
    json_decref(doc);
    return code == 0 ? 0 : 1;
}
