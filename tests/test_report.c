/* results.json (run folders, writer, reader, continuation) and report.html
 * (escaping of hostile strings, histograms, numerics table). */
#include "test.h"
#include "report/check.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "report/html.h"
#include "report/results.h"
#include "report/sysinfo.h"
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

static const char *HOSTILE = "<script>alert('x')</script>\"&<img src=http://evil.example/x.png>";

static char *slurp(const char *path)
{
    char *s = NULL;
    size_t n = 0;
    plumb_err e = {0};
    if (file_read_all(path, &s, &n, &e)) return NULL;
    return s;
}

TEST(results_run_folder_default_name)
{
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s/runs-a", test_tmpdir());
    struct results r1, r2;
    plumb_err e = {0};
    REQUIRE(results_open_in(&r1, parent, &e) == PLUMB_OK);
    REQUIRE(results_open_in(&r2, parent, &e) == PLUMB_OK);
    /* runs/<UTC-time>-<host>-<id>: two runs in the same second differ */
    CHECK(strcmp(r1.dir, r2.dir) != 0);
    const char *base = strrchr(r1.dir, '/') + 1;
    CHECK_MSG(strlen(base) > 24 && base[8] == 'T' && base[15] == 'Z' && base[16] == '-', "%s", base);
    struct stat st;
    CHECK(stat(r1.dir, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_STREQ(jsonx_str(r1.root, "schema"), "plumb.results/1");
    CHECK(json_is_object(json_object_get(r1.root, "host")));
    CHECK(jsonx_str(json_object_get(r1.root, "host"), "hostname") != NULL);
    CHECK(jsonx_num(json_object_get(r1.root, "host"), "cores") >= 1);
    CHECK(jsonx_num(json_object_get(r1.root, "host"), "mem_total_bytes") > 0);
    const json_t *v = json_object_get(r1.root, "versions");
    CHECK(strstr(jsonx_str(v, "blas"), "OpenBLAS") != NULL);
    CHECK(jsonx_str(v, "mpi") && *jsonx_str(v, "mpi"));
    CHECK(jsonx_str(v, "jansson") && !strncmp(jsonx_str(v, "jansson"), "jansson 2.", 10));
    results_close(&r1);
    results_close(&r2);
}

TEST(results_write_read_roundtrip_and_verdict)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/run-rt", test_tmpdir());
    struct results r;
    plumb_err e = {0};
    REQUIRE(results_open(&r, dir, "plumb test", &e) == PLUMB_OK);
    CHECK_EQ_INT(results_verdict(&r), CHECK_PASS); /* no checks yet */
    struct check_result c;
    REQUIRE(check_begin(&c, "alpha", "cpu") == PLUMB_OK);
    check_metric(&c, "ks_p", 0.5, "");
    check_end(&c);
    results_add_check(&r, &c);
    check_free(&c);
    CHECK_EQ_INT(results_exit_code(&r), 0);
    REQUIRE(check_begin(&c, "beta", NULL) == PLUMB_OK);
    check_set_status(&c, CHECK_WARN, "a warning");
    results_add_check(&r, &c); /* not ended: add ends it */
    check_free(&c);
    CHECK_EQ_INT(results_verdict(&r), CHECK_WARN);
    CHECK_EQ_INT(results_exit_code(&r), 0);
    REQUIRE(check_begin(&c, "gamma", "cpu") == PLUMB_OK);
    check_set_status(&c, CHECK_FAIL, "bad bits");
    results_add_check(&r, &c);
    check_free(&c);
    CHECK_EQ_INT(results_verdict(&r), CHECK_FAIL);
    CHECK_EQ_INT(results_exit_code(&r), 1);
    REQUIRE(results_write(&r, &e) == PLUMB_OK);
    results_close(&r);

    json_t *doc = NULL;
    REQUIRE(results_read(dir, &doc, &e) == PLUMB_OK);
    CHECK_STREQ(jsonx_str(doc, "verdict"), "fail");
    CHECK(jsonx_str(doc, "started") && jsonx_str(doc, "finished"));
    CHECK_EQ_INT(json_array_size(json_object_get(doc, "checks")), 3);
    CHECK_STREQ(jsonx_str(json_array_get(json_object_get(doc, "checks"), 1), "status"), "warn");
    CHECK_STREQ(jsonx_str(json_array_get(json_object_get(doc, "checks"), 2), "reason"), "bad bits");
    CHECK_EQ_INT(results_doc_verdict(doc), CHECK_FAIL);
    json_decref(doc);
    char html[PATH_MAX + 16];
    snprintf(html, sizeof html, "%s/report.html", dir);
    CHECK(file_exists(html));

    /* continuing the folder keeps the three checks and appends */
    REQUIRE(results_open(&r, dir, "plumb more", &e) == PLUMB_OK);
    CHECK_EQ_INT(json_array_size(json_object_get(r.root, "checks")), 3);
    REQUIRE(check_begin(&c, "delta", "cpu") == PLUMB_OK);
    results_add_check(&r, &c);
    check_free(&c);
    REQUIRE(results_write(&r, &e) == PLUMB_OK);
    results_close(&r);
    REQUIRE(results_read(dir, &doc, &e) == PLUMB_OK);
    CHECK_EQ_INT(json_array_size(json_object_get(doc, "checks")), 4);
    CHECK_STREQ(jsonx_str(doc, "command"), "plumb test; plumb more");
    json_decref(doc);
}

static void write_text(const char *path, const char *text)
{
    plumb_err e = {0};
    CHECK(file_write_atomic(path, text, strlen(text), &e) == PLUMB_OK);
}

TEST(results_read_rejects_bad_documents)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/bad", test_tmpdir());
    plumb_err e = {0};
    REQUIRE(file_mkdirs(dir, &e) == PLUMB_OK);
    json_t *doc = NULL;
    CHECK_EQ_INT(results_read(dir, &doc, &e), PLUMB_EUSAGE); /* missing */
    CHECK(strstr(e.msg, "results.json") != NULL);
    snprintf(path, sizeof path, "%s/results.json", dir);
    write_text(path, "{\"schema\": \"plumb.results/1\", \"checks\": [");
    CHECK_EQ_INT(results_read(dir, &doc, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "invalid JSON") != NULL, "%s", e.msg);
    write_text(path, "{\"schema\": \"other/2\", \"checks\": []}");
    CHECK_EQ_INT(results_read(dir, &doc, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "other/2") && strstr(e.msg, "plumb.results/1"), "%s", e.msg);
    write_text(path, "{\"schema\": \"plumb.results/1\"}");
    CHECK_EQ_INT(results_read(dir, &doc, &e), PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "checks") != NULL);
    write_text(path, "{\"schema\": \"plumb.results/1\", \"checks\": [{\"name\": \"x\", \"status\": \"great\"}]}");
    CHECK_EQ_INT(results_read(dir, &doc, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "great") && strstr(e.msg, "checks[0]"), "%s", e.msg);
    /* and an existing bad folder cannot be continued */
    struct results r;
    CHECK_EQ_INT(results_open(&r, dir, "x", &e), PLUMB_EUSAGE);
    write_text(path, "{\"schema\": \"plumb.results/1\", \"checks\": [{\"name\": \"x\", \"status\": \"skip\"}]}");
    CHECK_EQ_INT(results_read(dir, &doc, &e), PLUMB_OK);
    CHECK_EQ_INT(results_doc_verdict(doc), CHECK_PASS);
    json_decref(doc);
    /* --out naming a file */
    CHECK_EQ_INT(results_open(&r, path, "x", &e), PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "not a directory") != NULL);
}

TEST(html_escape_known_answers)
{
    struct sbuf b = {0};
    sb_escape(&b, "a<b>&\"c'");
    CHECK_STREQ(b.p, "a&lt;b&gt;&amp;&quot;c&#39;");
    sb_free(&b);
    sb_escape(&b, "caf\xC3\xA9 \xE2\x9C\x93"); /* valid UTF-8 passes */
    CHECK_STREQ(b.p, "caf\xC3\xA9 \xE2\x9C\x93");
    sb_free(&b);
    sb_escape(&b, "x\xFFy\xC0\xAFz\x01\x1b[31m"); /* invalid bytes -> U+FFFD, controls dropped */
    CHECK_STREQ(b.p, "x\xEF\xBF\xBDy\xEF\xBF\xBD\xEF\xBF\xBDz[31m");
    sb_free(&b);
}

/* Every host string in a document, made hostile, must come out escaped. */
TEST(html_escapes_every_host_string)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/hostile", test_tmpdir());
    struct results r;
    plumb_err e = {0};
    REQUIRE(results_open(&r, dir, HOSTILE, &e) == PLUMB_OK);
    json_object_set_new(json_object_get(r.root, "host"), "hostname", json_string(HOSTILE));
    json_object_set_new(json_object_get(r.root, "host"), "os", json_string(HOSTILE));
    results_set_version(&r, "blas", HOSTILE);
    struct check_result c;
    REQUIRE(check_begin(&c, HOSTILE, HOSTILE) == PLUMB_OK);
    check_set_status(&c, CHECK_WARN, "%s", HOSTILE);
    check_metric(&c, HOSTILE, 1.5, HOSTILE);
    check_threshold(&c, HOSTILE, 2.0);
    check_detail(&c, "rows", json_pack("[{s:s,s:s,s:s,s:s}]", "item", HOSTILE, "value", HOSTILE, "status", "warn",
                                       "reason", HOSTILE));
    check_detail(&c, "ops", json_pack("[{s:s,s:s,s:s,s:f,s:f,s:f,s:f,s:s,s:b}]", "op", HOSTILE, "dtype", HOSTILE,
                                      "shape", HOSTILE, "max_rel", 1e-7, "norm_rel", 1e-8, "max_ulp", 2.0,
                                      "threshold", 1e-5, "digest", HOSTILE, "deterministic", 1));
    check_detail(&c, HOSTILE, json_pack("{s:s}", HOSTILE, HOSTILE));
    check_artifact(&c, HOSTILE);
    results_add_check(&r, &c);
    check_free(&c);
    REQUIRE(results_write(&r, &e) == PLUMB_OK);
    results_close(&r);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *html = slurp(path);
    REQUIRE(html);
    CHECK(strstr(html, "<script") == NULL);
    CHECK(strstr(html, "<img") == NULL);
    CHECK(strstr(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&quot;&amp;&lt;img") != NULL);
    /* the only tags are ours: no "<" followed by a hostile letter sequence */
    static const char *tags[] = {"!DOCTYPE", "html", "head", "meta", "title", "style", "body", "main", "header",
                                 "h1", "h2", "h3", "p", "span", "code", "section", "table", "tr", "th", "td", "a",
                                 "pre", "ul", "li", "footer", "b", "figure", "figcaption", "svg", "rect", "polyline",
                                 "text", "div", NULL};
    for (const char *p = html; (p = strchr(p, '<')); p++) {
        const char *t = p[1] == '/' ? p + 2 : p + 1;
        int known = 0;
        for (int i = 0; tags[i] && !known; i++) {
            size_t L = strlen(tags[i]);
            known = !strncmp(t, tags[i], L) && (t[L] == ' ' || t[L] == '>' || t[L] == '/');
        }
        CHECK_MSG(known, "unexpected tag at: %.40s", p);
    }
    free(html);
}

TEST(html_draws_histograms_and_numerics_table)
{
    char dir[PATH_MAX], art[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/hist", test_tmpdir());
    struct results r;
    plumb_err e = {0};
    REQUIRE(results_open(&r, dir, "plumb rng", &e) == PLUMB_OK);
    struct check_result c;
    struct check_ctx ctx = {.run_dir = r.dir, .device = "cpu"};
    REQUIRE(check_begin(&c, "rng", "cpu") == PLUMB_OK);
    char adir[PATH_MAX];
    REQUIRE(check_artifact_dir(&ctx, &c, adir, sizeof adir, &e) == PLUMB_OK);
    snprintf(art, sizeof art, "%s/histograms.json", adir);
    json_t *h = json_pack("{s:[{s:s,s:s,s:f,s:f,s:[i,i,i,i],s:[f,f,f,f]},{s:s,s:s,s:f,s:f,s:[i,i,i],s:[f,f,f]}]}",
                          "streams", "name", "uniform-init", "kind", "uniform", "lo", 0.0, "hi", 1.0, "counts", 240,
                          260, 251, 249, "expected", 250.0, 250.0, 250.0, 250.0, "name", "normal-dropout", "kind",
                          "normal", "lo", -4.0, "hi", 4.0, "counts", 10, 980, 10, "expected", 23.0, 954.0, 23.0);
    REQUIRE(jsonx_write_file(art, h, &e) == PLUMB_OK);
    json_decref(h);
    check_artifact(&c, "checks/rng/histograms.json");
    check_detail(&c, "ops", json_pack("[{s:s,s:s,s:[i,i,i],s:f,s:f,s:f,s:f,s:s,s:b},{s:s,s:s,s:[i],s:f,s:f,s:f,s:f,s:s,s:b}]",
                                      "op", "gemm", "dtype", "bf16", "shape", 127, 33, 65, "max_rel", 3e-3,
                                      "norm_rel", 1e-3, "max_ulp", 4.0, "threshold", 1.6e-2, "digest",
                                      "0123456789abcdef0123", "deterministic", 1, "op", "sum", "dtype", "fp32",
                                      "shape", 10000000, "max_rel", 1e-3, "norm_rel", 1e-3, "max_ulp", 9.0,
                                      "threshold", 1e-6, "digest", "ff", "deterministic", 0));
    results_add_check(&r, &c);
    check_free(&c);
    REQUIRE(results_write(&r, &e) == PLUMB_OK);
    results_close(&r);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *html = slurp(path);
    REQUIRE(html);
    /* two SVG figures, 4 + 3 bars, expected lines */
    int svgs = 0, polys = 0;
    for (const char *p = html; (p = strstr(p, "<svg ")); p++) svgs++;
    for (const char *p = html; (p = strstr(p, "<polyline")); p++) polys++;
    CHECK_EQ_INT(svgs, 2);
    CHECK_EQ_INT(polys, 2);
    CHECK(strstr(html, "uniform-init") && strstr(html, "normal-dropout"));
    /* tallest bar (980 of max 980) spans the plot height 138 from y=8 */
    CHECK_MSG(strstr(html, "y=\"8.00\" width=\"") != NULL, "no full-height bar");
    CHECK(strstr(html, "<td>gemm</td><td>bf16</td>") != NULL);
    /* the sum row exceeds its threshold and is not deterministic: marked bad */
    CHECK(strstr(html, "<tr class=\"bad\"><td>sum</td>") != NULL);
    CHECK(strstr(html, "<tr><td>gemm</td>") != NULL);
    free(html);
}

TEST(html_draws_metrics_jsonl_curves)
{
    char dir[PATH_MAX], art[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/curves", test_tmpdir());
    struct results r;
    plumb_err e = {0};
    REQUIRE(results_open(&r, dir, "plumb train", &e) == PLUMB_OK);
    struct check_result c;
    struct check_ctx ctx = {.run_dir = r.dir, .device = "cpu"};
    REQUIRE(check_begin(&c, "train-ctr", "cpu") == PLUMB_OK);
    char adir[PATH_MAX];
    REQUIRE(check_artifact_dir(&ctx, &c, adir, sizeof adir, &e) == PLUMB_OK);
    snprintf(art, sizeof art, "%s/metrics.jsonl", adir);
    /* 3 train steps (loss), 1 eval (loss, auc), one garbage line */
    const char *text = "{\"kind\":\"train\",\"step\":1,\"loss\":0.9}\n{\"kind\":\"train\",\"step\":2,\"loss\":0.7}\n"
                       "not json\n{\"kind\":\"train\",\"step\":3,\"loss\":0.6}\n"
                       "{\"kind\":\"eval\",\"step\":3,\"loss\":0.65,\"auc\":0.71}\n";
    REQUIRE(file_write_atomic(art, text, strlen(text), &e) == PLUMB_OK);
    check_artifact(&c, "checks/train-ctr/metrics.jsonl");
    check_artifact(&c, "../../etc/passwd.jsonl"); /* outside the run folder: never read */
    results_add_check(&r, &c);
    check_free(&c);
    REQUIRE(results_write(&r, &e) == PLUMB_OK);
    results_close(&r);
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *html = slurp(path);
    REQUIRE(html);
    int svgs = 0, polys = 0;
    for (const char *p = html; (p = strstr(p, "<svg ")); p++) svgs++;
    for (const char *p = html; (p = strstr(p, "<polyline")); p++) polys++;
    CHECK_EQ_INT(svgs, 2);  /* loss, auc */
    CHECK_EQ_INT(polys, 3); /* loss: train + eval; auc: eval */
    CHECK(strstr(html, "5 lines, some not JSON objects") != NULL);
    /* train loss 0.9 -> 0.6 over steps 1..3 (y range 0.6..0.9, plot 270x138 at 52,8):
     * the first point is top-left, the last bottom-right */
    CHECK_MSG(strstr(html, "points=\"52.0,8.0 187.0,100.0 322.0,146.0 \"") != NULL, "train loss polyline");
    CHECK(strstr(html, "<code>../../etc/passwd.jsonl</code>") != NULL);
    free(html);
}
