/* Hardening (tests/t_harden.sh has the command-line side): write errors are
 * a check's failure, a run folder's artifacts are read only inside it, and
 * checkpoint temp files of dead writers go away. */
#include "test.h"
#include "accept/checks.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "health/health.h"
#include "report/check.h"
#include "report/html.h"
#include "train/ckpt.h"
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* One health line with a host temperature: something the thresholds cover. */
static json_t *one_sample(void)
{
    return json_pack("{s:s, s:f, s:[{s:s, s:s, s:f}]}", "type", "health", "time", 1.0, "devices", "device", "host",
                     "kind", "host", "temp_c", 40.0);
}

/* A full disk: samples.jsonl is /dev/full (every write fails with ENOSPC). */
TEST(health_samples_write_error_fails_the_check)
{
    char dir[PATH_MAX], adir[PATH_MAX], link[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/harden-health", test_tmpdir());
    plumb_err e = {0};
    CHECK((file_mkdirs(dir, &e)) == 0);
    check_register_run(dir, 1);
    struct check_ctx ctx = {.run_dir = dir, .device = "cpu"};
    struct check_result pre;
    CHECK((check_begin(&pre, "health", NULL)) == 0);
    CHECK((check_artifact_dir(&ctx, &pre, adir, sizeof adir, &e)) == 0);
    check_free(&pre);
    snprintf(link, sizeof link, "%s/samples.jsonl", adir);
    CHECK(symlink("/dev/full", link) == 0);
    json_t *lines = json_array(), *alerts = json_array();
    json_array_append_new(lines, one_sample());
    struct health_thresholds t;
    health_thresholds_default(&t);
    struct check_result r;
    CHECK((check_health_report(&ctx, lines, alerts, &t, "test", &r, &e)) == 0);
    const char *st = jsonx_str(r.obj, "status"), *why = jsonx_str(r.obj, "reason");
    CHECK(st && !strcmp(st, "fail"));
    CHECK(why && strstr(why, "samples.jsonl not written") && strstr(why, "No space left on device"));
    check_free(&r);
    json_decref(lines);
    json_decref(alerts);
}

/* 0 GPUs and no reading the thresholds cover: skip "no sensors", not pass. */
TEST(health_with_no_sensors_is_skip)
{
    json_t *lines = json_array(), *alerts = json_array();
    json_array_append_new(lines, json_pack("{s:s, s:f, s:[{s:s, s:s}]}", "type", "health", "time", 1.0, "devices",
                                           "device", "host", "kind", "host"));
    struct health_thresholds t;
    health_thresholds_default(&t);
    struct check_ctx ctx = {.run_dir = NULL, .device = "cpu"};
    struct check_result r;
    plumb_err e = {0};
    CHECK((check_health_report(&ctx, lines, alerts, &t, "test", &r, &e)) == 0);
    CHECK(!strcmp(jsonx_str(r.obj, "status"), "skip"));
    CHECK(strstr(jsonx_str(r.obj, "reason"), "no sensors") != NULL);
    check_free(&r);
    json_array_clear(lines);
    json_array_append_new(lines, one_sample());
    CHECK((check_health_report(&ctx, lines, alerts, &t, "test", &r, &e)) == 0);
    CHECK(!strcmp(jsonx_str(r.obj, "status"), "pass"));
    check_free(&r);
    json_decref(lines);
    json_decref(alerts);
}

/* A writer SIGKILLed mid-write left ckpt-*.tmp.<pid>: the next resume (and
 * the next write) remove it; a live writer's temp file stays. */
TEST(ckpt_stale_temp_of_a_dead_writer_is_removed)
{
    char dir[PATH_MAX], dead[PATH_MAX + 64], live[PATH_MAX + 64], other[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/harden-ckpt", test_tmpdir());
    plumb_err e = {0};
    CHECK((file_mkdirs(dir, &e)) == 0);
    /* a pid that is certainly dead: a child that exited and was reaped */
    pid_t p = fork();
    if (p == 0) _exit(0);
    CHECK(p > 0);
    waitpid(p, NULL, 0);
    snprintf(dead, sizeof dead, "%s/ckpt-0000000040.plumb.tmp.%d", dir, (int)p);
    snprintf(live, sizeof live, "%s/ckpt-0000000050.plumb.tmp.%d", dir, (int)getpid());
    snprintf(other, sizeof other, "%s/notes.tmp.%d", dir, (int)p);
    int fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    close(fd);
    fd = open(dead, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "partial", 7) == 7);
    close(fd);
    fd = open(live, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "partial", 7) == 7);
    close(fd);
    struct ckpt ck;
    int found = 1, n = -1;
    CHECK((ckpt_load_newest(dir, &ck, &found, &n, NULL, 0, &e)) == 0);
    CHECK(found == 0 && n == 0);
    CHECK(!file_exists(dead));
    CHECK(file_exists(live));   /* this process is alive: its file is not stale */
    CHECK(file_exists(other));  /* not a checkpoint temp file */
    ckpt_free(&ck);
}

/* report: artifacts that are FIFOs, links out of the folder, /dev/zero or
 * javascript: names are neither read nor linked. */
TEST(report_reads_only_regular_files_inside_the_folder)
{
    char dir[PATH_MAX], cdir[PATH_MAX + 32], p[PATH_MAX + 64], secret[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/harden-report", test_tmpdir());
    snprintf(cdir, sizeof cdir, "%s/checks/x", dir);
    plumb_err e = {0};
    CHECK((file_mkdirs(cdir, &e)) == 0);
    snprintf(secret, sizeof secret, "%s/secret.json", test_tmpdir());
    CHECK((file_write_atomic(secret, "SECRET-BYTES-1234 not json", 26, &e)) == 0);
    snprintf(p, sizeof p, "%s/fifo.jsonl", cdir);
    CHECK(mkfifo(p, 0644) == 0);
    snprintf(p, sizeof p, "%s/zero.jsonl", cdir);
    CHECK(symlink("/dev/zero", p) == 0);
    snprintf(p, sizeof p, "%s/histograms.json", cdir);
    CHECK(symlink(secret, p) == 0);
    snprintf(p, sizeof p, "%s/ok.jsonl", cdir);
    CHECK((file_write_atomic(p, "{\"step\":1,\"loss\":0.5}\n{\"step\":2,\"loss\":0.4}\n", 44, &e)) == 0);
    json_t *root = json_pack("{s:s, s:[{s:s, s:s, s:[s, s, s, s, s]}]}", "schema", "plumb.results/1", "checks", "name",
                             "x", "status", "pass", "artifacts", "checks/x/fifo.jsonl", "checks/x/zero.jsonl",
                             "checks/x/histograms.json", "javascript:alert(1)", "checks/x/ok.jsonl");
    char *html = html_render(root, dir); /* returns: the FIFO would block it, /dev/zero exhaust memory */
    CHECK(html != NULL);
    if (html) {
        CHECK(strstr(html, "SECRET-BYTES") == NULL);
        CHECK(strstr(html, "href=\"javascript:") == NULL);
        CHECK(strstr(html, "not a regular file") != NULL);
        CHECK(strstr(html, "leads out of the run folder") != NULL);
        CHECK(strstr(html, "href=\"checks/x/ok.jsonl\"") != NULL);
    }
    free(html);
    json_decref(root);
}
