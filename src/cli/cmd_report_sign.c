/* plumb report keygen | sign | verify: Ed25519-signed run folders
 * (report/sign.h, docs/COMPARE.md). */
#include "cli/args.h"
#include "cli/commands.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "report/html.h"
#include "report/results.h"
#include "report/sign.h"
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* 1 when a and b name one path, whether or not it exists: the same name in the same folder. */
static int same_path(const char *a, const char *b)
{
    char da[PATH_MAX], db[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX], ba[PATH_MAX], bb[PATH_MAX];
    snprintf(da, sizeof da, "%s", a), snprintf(db, sizeof db, "%s", b);
    snprintf(ba, sizeof ba, "%s", basename(da)), snprintf(bb, sizeof bb, "%s", basename(db));
    snprintf(da, sizeof da, "%s", a), snprintf(db, sizeof db, "%s", b);
    return !strcmp(ba, bb) && realpath(dirname(da), ra) && realpath(dirname(db), rb) && !strcmp(ra, rb);
}

int cmd_report_keygen(int argc, char **argv)
{
    const char *key = NULL, *pub = NULL;
    static const char *usage = "plumb report keygen --key KEY --pub PUB";
    static const char *summary =
        "Make an Ed25519 key pair for signing run folders: KEY (PEM PKCS#8, mode 0600) and PUB (PEM public key).\n"
        "The same files as 'openssl genpkey -algorithm ed25519 -out KEY' and 'openssl pkey -in KEY -pubout -out PUB'.\n"
        "Existing files are not overwritten.";
    const struct opt opts[] = {
        {"--key", OPT_STR, &key, NULL, "private key file to create", NULL, "KEY"},
        {"--pub", OPT_STR, &pub, NULL, "public key file to create", NULL, "PUB"},
        {0},
    };
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, NULL, 0, NULL, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("report keygen", &e);
    if (!key || !pub) {
        err_set(&e, PLUMB_EUSAGE, "give both --key KEY and --pub PUB");
        return cli_fail("report keygen", &e);
    }
    /* checked before a key is made: --pub in a missing folder (or --key '') was exit 3 "cannot
     * create", and --key and --pub naming one file read "File exists: refusing to overwrite a key"
     * (the key the command had just made, then removed) */
    if (file_check_output("--key", key, &e) || file_check_output("--pub", pub, &e)) return cli_fail("report keygen", &e);
    if (same_path(key, pub)) {
        err_set(&e, PLUMB_EUSAGE, "--key %s and --pub %s: the same file (expected two files: the private and the public key)",
                key, pub);
        return cli_fail("report keygen", &e);
    }
    if (sign_keygen(key, pub, &e)) return cli_fail("report keygen", &e);
    printf("private key: %s\npublic key:  %s\n", key, pub);
    return 0;
}

/* Re-renders DIR/report.html when DIR is a run folder (so it shows the signature). */
static void rerender(const char *dir, const char *pub)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/results.json", dir);
    if (!file_exists(path)) return;
    json_t *doc = NULL;
    plumb_err e = {0};
    if (results_read(dir, &doc, &e)) return;
    html_set_trusted_key(pub);
    snprintf(path, sizeof path, "%s/report.html", dir);
    if (html_render_file(doc, dir, path, &e)) fprintf(stderr, "plumb report: report.html not re-rendered: %s\n", e.msg);
    html_set_trusted_key(NULL);
    json_decref(doc);
}

int cmd_report_sign(int argc, char **argv)
{
    const char *key = NULL;
    static const char *usage = "plumb report sign DIR --key KEY";
    static const char *summary =
        "Sign a run folder: writes DIR/manifest.json (SHA-256 and size of results.json, of every artifact it lists and\n"
        "of every file under checks/) and DIR/manifest.sig (Ed25519 over manifest.json, base64), then re-renders\n"
        "report.html, which shows the signature. Verify with 'plumb report verify DIR --pub PUB'.";
    const struct opt opts[] = {
        {"--key", OPT_STR, &key, NULL, "Ed25519 private key (PEM; plumb report keygen or openssl genpkey)", NULL, "KEY"},
        {0},
    };
    char *pos[2];
    int npos = 0;
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, pos, 2, &npos, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("report sign", &e);
    if (npos != 1 || !key) {
        err_set(&e, PLUMB_EUSAGE, "expected one run folder DIR and --key KEY; see 'plumb report sign --help'");
        return cli_fail("report sign", &e);
    }
    int n = 0;
    if (sign_dir(pos[0], key, &n, &e)) return cli_fail("report sign", &e);
    struct sign_check r;
    if (sign_verify(pos[0], NULL, &r, &e)) return cli_fail("report sign", &e);
    printf("signed %d files in %s with key %s\nmanifest:  %s/manifest.json\nsignature: %s/manifest.sig\n", n, pos[0],
           r.fingerprint, pos[0], pos[0]);
    sign_check_free(&r);
    rerender(pos[0], NULL);
    return 0;
}

int cmd_report_verify(int argc, char **argv)
{
    const char *pub = NULL;
    static const char *usage = "plumb report verify DIR --pub PUB";
    static const char *summary =
        "Verify a signed run folder against a trusted public key: the Ed25519 signature over manifest.json, every\n"
        "listed file's SHA-256 and size, and that no covered file (results.json, its artifacts, checks/) was added.\n"
        "Exit 0 when all hold, 1 when anything differs (each difference is printed), 2 when DIR is not signed or a\n"
        "key cannot be read. Read-only: 'plumb report DIR --pub PUB' renders report.html with the verified status.";
    const struct opt opts[] = {
        {"--pub", OPT_STR, &pub, NULL, "trusted Ed25519 public key (PEM)", NULL, "PUB"},
        {0},
    };
    char *pos[2];
    int npos = 0;
    plumb_err e = {0};
    int rc = args_parse(usage, summary, opts, argc, argv, pos, 2, &npos, &e);
    if (rc == ARGS_HELP) return 0;
    if (rc) return cli_fail("report verify", &e);
    if (npos != 1 || !pub) {
        err_set(&e, PLUMB_EUSAGE, "expected one run folder DIR and --pub PUB; see 'plumb report verify --help'");
        return cli_fail("report verify", &e);
    }
    struct sign_check r;
    if (sign_verify(pos[0], pub, &r, &e)) {
        sign_check_free(&r);
        return cli_fail("report verify", &e);
    }
    int ok = sign_check_passed(&r);
    size_t i;
    json_t *p;
    json_array_foreach(r.problems, i, p) printf("FAIL %s\n", json_string_value(p));
    if (ok) printf("verified: %d files in %s as signed at %s by key %s\n", r.nfiles, pos[0], r.signed_at, r.fingerprint);
    else printf("NOT verified: %zu problem%s in %s\n", json_array_size(r.problems),
                json_array_size(r.problems) == 1 ? "" : "s", pos[0]);
    sign_check_free(&r);
    return ok ? 0 : 1;
}
