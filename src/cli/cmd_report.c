/* plumb report DIR: re-renders DIR/report.html from DIR/results.json. */
#include "cli/args.h"
#include "cli/commands.h"
#include "core/file.h"
#include "report/html.h"
#include "report/results.h"
#include "report/sign.h"
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int cmd_report_keygen(int argc, char **argv); /* cmd_report_sign.c */
int cmd_report_sign(int argc, char **argv);
int cmd_report_verify(int argc, char **argv);

/* 1 when a and b name one existing file (symlinks and hard links included). */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* PLUMB_EUSAGE when --html out is the results.json read (given), the folder's signature files or one of its
 * checks' artifacts: the page would replace the evidence it shows. */
static int html_clobbers_input(const char *out, const char *given, const char *dir, const json_t *doc, plumb_err *e)
{
    struct stat st;
    if (stat(out, &st) != 0) return PLUMB_OK; /* a new file replaces nothing */
    char p[PATH_MAX + 32];
    const char *own[] = {"results.json", "manifest.json", "manifest.sig"};
    int hit = same_file(out, given);
    for (size_t i = 0; !hit && i < sizeof own / sizeof own[0]; i++)
        hit = file_join(p, sizeof p, dir, own[i], NULL) == PLUMB_OK && same_file(out, p);
    size_t i, j;
    json_t *c, *a;
    json_array_foreach(json_object_get(doc, "checks"), i, c) json_array_foreach(json_object_get(c, "artifacts"), j, a)
    {
        const char *rel = json_string_value(a);
        if (!hit && rel && file_join(p, sizeof p, dir, rel, NULL) == PLUMB_OK) hit = same_file(out, p);
    }
    if (hit)
        return err_set(e, PLUMB_EUSAGE, "--html %s: is a file of the run folder %s (its results.json, signature or an "
                       "artifact): the report would replace it; write the report elsewhere", out, dir);
    return PLUMB_OK;
}

int cmd_report(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "keygen")) return cmd_report_keygen(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "sign")) return cmd_report_sign(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "verify")) return cmd_report_verify(argc - 1, argv + 1);
    const char *out = NULL, *pub = NULL;
    static const char *usage = "plumb report DIR [options] | plumb report keygen|sign|verify ...";
    static const char *summary =
        "Re-render DIR/report.html from the run folder's results.json and check artifacts. The report is one\n"
        "self-contained HTML file (inline CSS and SVG, no scripts, no network). Exit 2 when DIR holds no valid\n"
        "results.json (the message names the file and the field). A signed folder's report shows the signature's\n"
        "status (see 'plumb report sign --help', 'plumb report verify --help', 'plumb report keygen --help').";
    const struct opt opts[] = {
        {"--html", OPT_STR, &out, NULL, "write the report here instead of DIR/report.html", NULL, "FILE"},
        {"--pub", OPT_STR, &pub, NULL, "verify the folder's signature against this trusted public key (PEM)", NULL, "PUB"},
        {0},
    };
    char *pos[2];
    int npos = 0;
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, pos, 2, &npos, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("report", &e);
    if (npos != 1) {
        err_set(&e, PLUMB_EUSAGE, "expected one run folder (DIR), got %d argument%s; see 'plumb report --help'", npos, npos == 1 ? "" : "s");
        return cli_fail("report", &e);
    }
    /* a bad output path is the user's to fix (exit 2), found before rendering */
    if (out && file_check_output("--html", out, &e)) return cli_fail("report", &e);
    /* so is a trusted key that cannot be used (the page said the folder's signature was invalid, exit 0) */
    if (pub && sign_check_pub(pub, &e)) {
        err_wrap(&e, "--pub");
        return cli_fail("report", &e);
    }
    json_t *doc = NULL;
    if (results_read(pos[0], &doc, &e)) return cli_fail("report", &e);
    /* DIR may also be given as DIR/results.json: artifacts are beside it */
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s", pos[0]);
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
    }
    /* --html naming a file the folder's evidence lives in replaced it with the page: 'plumb report D --html
     * D/results.json' left D with no results.json (and a signed folder unverifiable) */
    if (out && (rc = html_clobbers_input(out, pos[0], dir, doc, &e))) {
        json_decref(doc);
        return cli_fail("report", &e);
    }
    if (out) snprintf(path, sizeof path, "%s", out);
    else if (file_join(path, sizeof path, dir, "report.html", &e)) {
        json_decref(doc);
        return cli_fail("report", &e);
    }
    /* the default output too: a directory at DIR/report.html, or a folder this user cannot write, was exit 3
     * from the final rename or create, after rendering */
    if (!out && file_check_output("report", path, &e)) {
        char m[sizeof e.msg];
        snprintf(m, sizeof m, "%s", e.msg);
        err_set(&e, PLUMB_EUSAGE, "%s; --html FILE writes the report elsewhere", m);
        json_decref(doc);
        return cli_fail("report", &e);
    }
    html_set_trusted_key(pub);
    rc = html_render_file(doc, dir, path, &e);
    html_set_trusted_key(NULL);
    json_decref(doc);
    if (rc) return cli_fail("report", &e);
    printf("%s\n", path);
    return 0;
}
