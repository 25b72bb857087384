/* Signed run folders (report/sign.c) on real files: a one-byte edit of any
 * covered file, an added or removed file, a wrong key, an edited manifest or
 * signature must each fail verification. */
#include "core/file.h"
#include "core/jsonx.h"
#include "report/sign.h"
#include "test.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void put(const char *dir, const char *rel, const char *text)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    char d[2048];
    snprintf(d, sizeof d, "%s", p);
    char *slash = strrchr(d, '/');
    *slash = '\0';
    plumb_err e = {0};
    file_mkdirs(d, &e);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

/* Flips one bit of byte `at` of a file; returns 0 on success. */
static int flip(const char *dir, const char *rel, long at)
{
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    FILE *f = fopen(p, "r+b");
    if (!f) return -1;
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x01, f);
    fclose(f);
    return 0;
}

static const char *FILES[] = {"results.json", "checks/parity/seeds.jsonl", "checks/rng/histograms.json",
                              "checks/rng/deep/extra.bin"};

static void make_folder(const char *dir)
{
    put(dir, "results.json",
        "{\"schema\":\"plumb.results/1\",\"checks\":[{\"name\":\"parity\",\"status\":\"pass\","
        "\"artifacts\":[\"checks/parity/seeds.jsonl\",\"checks/rng/histograms.json\"]}]}\n");
    put(dir, "checks/parity/seeds.jsonl", "{\"seed\":1,\"auc\":0.76}\n{\"seed\":2,\"auc\":0.761}\n");
    put(dir, "checks/rng/histograms.json", "{\"streams\":[]}\n");
    put(dir, "checks/rng/deep/extra.bin", "unlisted artifact, covered because it is under checks/\n");
    put(dir, "report.html", "<html>derived, re-rendered freely</html>\n");
}

static int verify(const char *dir, const char *pub, struct sign_check *r)
{
    plumb_err e = {0};
    int rc = sign_verify(dir, pub, r, &e);
    if (rc) fprintf(stderr, "  sign_verify: %s\n", e.msg);
    return rc ? -1 : sign_check_passed(r);
}

TEST(sign_verify_and_every_tamper_fails)
{
    char key[1024], pub[1024], key2[1024], pub2[1024], dir[1024];
    snprintf(key, sizeof key, "%s/k.pem", test_tmpdir());
    snprintf(pub, sizeof pub, "%s/k.pub", test_tmpdir());
    snprintf(key2, sizeof key2, "%s/k2.pem", test_tmpdir());
    snprintf(pub2, sizeof pub2, "%s/k2.pub", test_tmpdir());
    snprintf(dir, sizeof dir, "%s/signed", test_tmpdir());
    plumb_err e = {0};
    REQUIRE(sign_keygen(key, pub, &e) == PLUMB_OK);
    REQUIRE(sign_keygen(key2, pub2, &e) == PLUMB_OK);
    struct stat st;
    CHECK(stat(key, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(sign_keygen(key, pub, &e) == PLUMB_EUSAGE && strstr(e.msg, "overwrite")); /* never overwrites */
    make_folder(dir);
    int n = 0;
    REQUIRE(sign_dir(dir, key, &n, &e) == PLUMB_OK);
    CHECK_MSG(n == 4, "%d files covered", n);
    struct sign_check r;
    CHECK(verify(dir, pub, &r) == 1 && r.trusted && r.nfiles == 4);
    sign_check_free(&r);
    /* the manifest's own key: valid, not trusted */
    CHECK(verify(dir, NULL, &r) == 1 && !r.trusted);
    sign_check_free(&r);
    /* another key: the signature does not verify */
    CHECK(verify(dir, pub2, &r) == 0 && !r.sig_ok && !r.key_matches);
    sign_check_free(&r);
    /* the derived report may change */
    put(dir, "report.html", "<html>re-rendered</html>\n");
    CHECK(verify(dir, pub, &r) == 1);
    sign_check_free(&r);
    /* one bit of any byte of any covered file */
    for (size_t i = 0; i < sizeof FILES / sizeof *FILES; i++) {
        for (long at = 0; at < 3; at++) {
            REQUIRE(flip(dir, FILES[i], at * 7) == 0);
            int v = verify(dir, pub, &r);
            CHECK_MSG(v == 0 && !r.files_ok && r.sig_ok, "%s byte %ld flipped: verify %d", FILES[i], at * 7, v);
            const char *p0 = json_string_value(json_array_get(r.problems, 0));
            CHECK_MSG(p0 && strstr(p0, FILES[i]) && strstr(p0, "changed"), "problem: %s", p0 ? p0 : "(none)");
            sign_check_free(&r);
            REQUIRE(flip(dir, FILES[i], at * 7) == 0); /* back */
        }
    }
    CHECK(verify(dir, pub, &r) == 1);
    sign_check_free(&r);
    /* a file added under checks/ */
    put(dir, "checks/new.txt", "added\n");
    CHECK(verify(dir, pub, &r) == 0);
    CHECK(strstr(json_string_value(json_array_get(r.problems, 0)), "checks/new.txt: not in the manifest"));
    sign_check_free(&r);
    char p[2048];
    snprintf(p, sizeof p, "%s/checks/new.txt", dir);
    unlink(p);
    /* a file removed */
    snprintf(p, sizeof p, "%s/checks/rng/histograms.json", dir);
    char *saved;
    size_t len;
    REQUIRE(file_read_all(p, &saved, &len, &e) == PLUMB_OK);
    unlink(p);
    CHECK(verify(dir, pub, &r) == 0 && strstr(json_string_value(json_array_get(r.problems, 0)), "missing"));
    sign_check_free(&r);
    put(dir, "checks/rng/histograms.json", saved);
    free(saved);
    CHECK(verify(dir, pub, &r) == 1);
    sign_check_free(&r);
    /* the manifest itself edited (one byte), or the signature */
    REQUIRE(flip(dir, "manifest.json", 40) == 0);
    CHECK(verify(dir, pub, &r) == 0 && !r.sig_ok);
    sign_check_free(&r);
    REQUIRE(flip(dir, "manifest.json", 40) == 0);
    REQUIRE(flip(dir, "manifest.sig", 5) == 0);
    CHECK(verify(dir, pub, &r) == 0 && !r.sig_ok);
    sign_check_free(&r);
    REQUIRE(flip(dir, "manifest.sig", 5) == 0);
    CHECK(verify(dir, pub, &r) == 1);
    sign_check_free(&r);
    /* the status the reports show */
    json_t *s = sign_status_json(dir, pub);
    CHECK(!strcmp(jsonx_str(s, "status"), "verified"));
    json_decref(s);
    s = sign_status_json(dir, NULL);
    CHECK(!strcmp(jsonx_str(s, "status"), "valid"));
    json_decref(s);
    REQUIRE(flip(dir, "results.json", 3) == 0);
    s = sign_status_json(dir, NULL);
    CHECK(!strcmp(jsonx_str(s, "status"), "invalid") && strstr(jsonx_str(s, "message"), "results.json"));
    json_decref(s);
    s = sign_status_json(test_tmpdir(), NULL);
    CHECK(!strcmp(jsonx_str(s, "status"), "unsigned"));
    json_decref(s);
    /* not a key */
    CHECK(sign_dir(dir, pub, &n, &e) == PLUMB_EUSAGE && strstr(e.msg, "not a PEM private key"));
}
