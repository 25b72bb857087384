#include "report/results.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "report/html.h"
#include "report/sysinfo.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/file.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int results_parse_status(const char *s)
{
    if (!s) return -1;
    for (int i = CHECK_PASS; i <= CHECK_SKIP; i++)
        if (!strcmp(s, check_status_name((enum check_status)i))) return i;
    return -1;
}

/* A short random suffix so two runs started in the same second on the same
 * host get different folders. Not model randomness (that is Philox only):
 * it only has to differ between processes. */
static void run_id(char *out, size_t n)
{
    unsigned char b[3] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
    if (fd >= 0) close(fd);
    if (got != (ssize_t)sizeof b) {
        unsigned v = (unsigned)getpid() ^ (unsigned)(timer_now() * 1e9);
        b[0] = (unsigned char)v, b[1] = (unsigned char)(v >> 8), b[2] = (unsigned char)(v >> 16);
    }
    snprintf(out, n, "%02x%02x%02x", b[0], b[1], b[2]);
}

static void safe_host(const char *h, char *out, size_t n)
{
    size_t i = 0;
    for (; h[i] && i + 1 < n && i < 63; i++) {
        char c = h[i];
        int okc = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
        out[i] = okc ? c : '_';
    }
    out[i] = '\0';
    if (!i) snprintf(out, n, "host");
}

static int new_doc(struct results *r, const char *command)
{
    struct sysinfo_host h;
    sysinfo_host_get(&h);
    char started[32];
    sysinfo_utc_iso(timer_wall(), started, sizeof started);
    r->root = json_pack("{s:s, s:s, s:s, s:o, s:{s:[]}, s:o, s:[], s:s}", "schema", RESULTS_SCHEMA,
                        "command", command ? command : "", "started", started, "host",
                        sysinfo_host_json(&h), "platform", "devices", "versions",
                        sysinfo_versions_json(), "checks", "verdict", "pass");
    return r->root ? PLUMB_OK : PLUMB_ENOMEM;
}

/* The folder's lock (flock on the directory itself: no lock file in the
 * folder): held while results.json is read, merged and replaced, so two
 * commands writing into one folder never drop each other's checks. */
static int lock_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {}
    return fd;
}

static void unlock_dir(int fd)
{
    if (fd >= 0) close(fd); /* releases the flock */
}

/* The run number a new command takes: one more than any run recorded (a
 * folder written before runs[] existed counts as run 1 when it has checks). */
static int next_run(const json_t *root)
{
    int n = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(root, "runs"), i, v)
    {
        double k = jsonx_num(v, "run");
        if (isfinite(k) && k > n && k < 1e9) n = (int)k;
    }
    if (!n && json_array_size(json_object_get(root, "checks"))) n = 1;
    return n + 1;
}

static json_t *run_entry(json_t *root, int run)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(root, "runs"), i, v) if (jsonx_num(v, "run") == run) return v;
    return NULL;
}

/* 1 when dir has entries other than . and .. and plumb's own files
 * (plumb launch --run-dir D -- plumb train --out D: launch.jsonl is there
 * before the first results.json) */
static int dir_nonempty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int n = 0;
    while (!n && (de = readdir(d)))
        n = strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "launch.jsonl");
    closedir(d);
    return n;
}

/* runs[] entries still "running" from a command of this host whose process
 * is gone (SIGKILL, the OOM killer, a crash or a power cut: it could not
 * finish its entry) become "killed", with the run that noticed it, so the
 * folder does not claim a run is in progress. An entry's host is its own
 * "host" or, for entries written before runs recorded one, the folder's
 * last host (prev_host); entries of other hosts, and live pids, are left. */
static void mark_dead_runs(json_t *root, const char *prev_host, const char *this_host, int noticed_by)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(root, "runs"), i, v)
    {
        const char *st = jsonx_str(v, "status"), *h = jsonx_str(v, "host");
        if (!h) h = prev_host;
        json_t *pid = json_object_get(v, "pid");
        if (!st || strcmp(st, "running") || !h || !*this_host || strcmp(h, this_host) || !json_is_integer(pid))
            continue;
        const json_int_t p = json_integer_value(pid);
        if (p <= 0 || p == (json_int_t)getpid() || !(kill((pid_t)p, 0) == -1 && errno == ESRCH)) continue;
        json_object_set_new(v, "status", json_string("killed"));
        json_object_set_new(v, "noted_by_run", json_integer(noticed_by));
    }
}

/* Loads the folder's results.json (or starts a document), takes the next
 * run number and records this command in runs[] as "running", all under the
 * folder's lock; results.json is written at once, so a command killed later
 * still left its entry. */
static int open_dir(struct results *r, const char *command, plumb_err *e)
{
    char path[PATH_MAX + 32];
    if (file_join(path, sizeof path, r->dir, "results.json", e)) return e->code;
    int lk = lock_dir(r->dir);
    int rc = PLUMB_OK;
    if (file_exists(path)) {
        if (results_read(path, &r->root, e)) {
            unlock_dir(lk);
            return err_wrap(e, "--out %s holds a results.json that is not a plumb run folder's (fix or move it, or "
                            "use another folder)", r->dir);
        }
        /* refresh what describes this process; keep started and checks */
        struct sysinfo_host h;
        sysinfo_host_get(&h);
        char prev[sizeof h.hostname];
        snprintf(prev, sizeof prev, "%s", jsonx_str(json_object_get(r->root, "host"), "hostname") ?: "");
        mark_dead_runs(r->root, prev, h.hostname, next_run(r->root));
        json_object_set_new(r->root, "host", sysinfo_host_json(&h));
        json_t *v = json_object_get(r->root, "versions");
        json_t *nv = sysinfo_versions_json();
        if (json_is_object(v)) json_object_update(v, nv);
        else json_object_set(r->root, "versions", nv);
        json_decref(nv);
        if (!json_is_object(json_object_get(r->root, "platform")))
            json_object_set_new(r->root, "platform", json_pack("{s:[]}", "devices"));
        if (!json_is_array(json_object_get(json_object_get(r->root, "platform"), "devices")))
            json_object_set_new(json_object_get(r->root, "platform"), "devices", json_array());
        if (command && *command) {
            const char *old = jsonx_str(r->root, "command");
            char *joined = NULL;
            if (old && *old && asprintf(&joined, "%s; %s", old, command) > 0) {
                json_object_set_new(r->root, "command", json_string(joined));
                free(joined);
            } else {
                json_object_set_new(r->root, "command", json_string(command));
            }
        }
    } else if (dir_nonempty(r->dir)) {
        unlock_dir(lk);
        return err_set(e, PLUMB_EUSAGE,
                       "--out %s: the folder is not empty and holds no results.json, so it is not a plumb run folder "
                       "(its files would be mixed with this run's); use a new or empty folder",
                       r->dir);
    } else if (new_doc(r, command)) {
        unlock_dir(lk);
        return err_set(e, PLUMB_ENOMEM, "out of memory building results");
    }
    if (!json_is_array(json_object_get(r->root, "runs"))) json_object_set_new(r->root, "runs", json_array());
    r->run = next_run(r->root);
    char started[32];
    sysinfo_utc_iso(timer_wall(), started, sizeof started);
    char me[256] = "";
    if (gethostname(me, sizeof me - 1)) me[0] = '\0';
    json_array_append_new(json_object_get(r->root, "runs"),
                          json_pack("{s:i, s:s, s:s, s:s, s:I, s:s}", "run", r->run, "command", command ? command : "",
                                    "started", started, "status", "running", "pid", (json_int_t)getpid(), "host", me));
    rc = jsonx_write_file(path, r->root, e);
    unlock_dir(lk);
    if (rc) return err_set(e, PLUMB_EUSAGE, "--out %s: cannot write results.json there (%s)", r->dir, e->msg);
    check_register_run(r->dir, r->run);
    return PLUMB_OK;
}

/* A bad --out is the user's input: exit 2 naming it (not an internal error). */
static int out_error(const char *dir, const char *what, int err, plumb_err *e)
{
    return err_set(e, PLUMB_EUSAGE, "--out %s: %s: %s (expected a folder this user can create and write)", dir, what,
                   strerror(err));
}

static int open_common(struct results *r, const char *dir, const char *parent, const char *command,
                       plumb_err *e)
{
    memset(r, 0, sizeof *r);
    r->write_html = 1;
    r->mine = json_array();
    if (!r->mine) return err_set(e, PLUMB_ENOMEM, "out of memory");
    int rc;
    if (dir && !*dir) {
        /* an empty --out (a variable that was not set) wrote to a new runs/<UTC>-<host>-<id> */
        rc = err_set(e, PLUMB_EUSAGE, "--out: expected a folder name (without --out: a new folder under %s/)", parent);
        goto fail;
    }
    if (dir && *dir) {
        if (strlen(dir) >= sizeof r->dir - 64) {
            rc = err_set(e, PLUMB_EUSAGE, "--out: path '%.80s...' is too long", dir);
            goto fail;
        }
        struct stat st;
        if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
            rc = err_set(e, PLUMB_EUSAGE, "--out: '%s' exists and is not a directory", dir);
            goto fail;
        }
        snprintf(r->dir, sizeof r->dir, "%s", dir);
        size_t L = strlen(r->dir);
        while (L > 1 && r->dir[L - 1] == '/') r->dir[--L] = '\0';
        plumb_err me = {0};
        if (file_mkdirs(r->dir, &me)) {
            int err = errno;
            rc = stat(r->dir, &st) == 0 && !S_ISDIR(st.st_mode) ? err_set(e, PLUMB_EUSAGE, "--out %s: %s", r->dir, me.msg)
                                                                   : out_error(r->dir, "cannot create the folder", err, e);
            goto fail;
        }
        if (access(r->dir, W_OK | X_OK) != 0) {
            rc = out_error(r->dir, "cannot write into the folder", errno, e);
            goto fail;
        }
    } else {
        if (file_mkdirs(parent, e)) {
            rc = err_wrap(e, "creating %s", parent);
            goto fail;
        }
        char host[256] = "", sh[64], t[32], id[8];
        if (gethostname(host, sizeof host - 1)) host[0] = '\0';
        safe_host(host, sh, sizeof sh);
        sysinfo_utc_compact(timer_wall(), t, sizeof t);
        for (int tries = 0;; tries++) {
            run_id(id, sizeof id);
            snprintf(r->dir, sizeof r->dir, "%s/%s-%s-%s", parent, t, sh, id);
            if (mkdir(r->dir, 0755) == 0) break;
            if (errno != EEXIST || tries > 16) {
                rc = err_set(e, errno == EACCES || errno == EROFS ? PLUMB_EUSAGE : PLUMB_EIO,
                             "cannot create run folder %s: %s", r->dir, strerror(errno));
                goto fail;
            }
        }
    }
    if ((rc = open_dir(r, command, e))) goto fail;
    return PLUMB_OK;
fail:
    json_decref(r->root);
    json_decref(r->mine);
    r->root = r->mine = NULL;
    return rc;
}

int results_open(struct results *r, const char *dir, const char *command, plumb_err *e)
{
    return open_common(r, dir, "runs", command, e);
}

int results_open_in(struct results *r, const char *parent, plumb_err *e)
{
    return open_common(r, NULL, parent, "test", e);
}

void results_add_check(struct results *r, struct check_result *c)
{
    if (!r->root || !c->obj) return;
    if (!json_object_get(c->obj, "status")) check_end(c);
    if (r->run > 0) json_object_set_new(c->obj, "run", json_integer(r->run));
    json_array_append(json_object_get(r->root, "checks"), c->obj);
    if (r->mine) json_array_append(r->mine, c->obj);
}

void results_add_device(struct results *r, const struct dev *d)
{
    if (!r->root || !d) return;
    json_t *devs = json_object_get(json_object_get(r->root, "platform"), "devices");
    size_t i;
    json_t *v;
    json_array_foreach(devs, i, v) if (!strcmp(jsonx_str(v, "label") ? jsonx_str(v, "label") : "", d->label)) return;
    const struct dev_info *in = &d->info;
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:i}", "label", d->label, "backend",
                          d->be && d->be->name ? d->be->name : "", "name", in->name, "arch", in->arch,
                          "driver", in->driver, "libs", in->libs, "mem_total_bytes",
                          (json_int_t)in->mem_total, "compute_units", in->compute_units, "warp_size",
                          in->warp_size);
    if (!o) return;
    if (in->peak_tflops_fp32 > 0) json_object_set_new(o, "peak_tflops_fp32", json_real(in->peak_tflops_fp32));
    if (in->peak_tflops_bf16 > 0) json_object_set_new(o, "peak_tflops_bf16", json_real(in->peak_tflops_bf16));
    if (in->peak_mem_gbps > 0) json_object_set_new(o, "peak_mem_gbps", json_real(in->peak_mem_gbps));
    json_array_append_new(devs, o);
    if (d->be && d->be->name && strcmp(d->be->name, "cpu") && in->driver[0]) {
        char key[64];
        snprintf(key, sizeof key, "%s_driver", d->be->name);
        results_set_version(r, key, in->driver);
    }
}

void results_set_version(struct results *r, const char *key, const char *value)
{
    if (!r->root) return;
    json_object_set_new(json_object_get(r->root, "versions"), key, json_string(value ? value : ""));
}

static enum check_status verdict_of(const json_t *checks)
{
    enum check_status worst = CHECK_PASS;
    size_t i;
    json_t *c;
    json_array_foreach(checks, i, c)
    {
        int s = results_parse_status(jsonx_str(c, "status"));
        if (s == CHECK_FAIL) worst = CHECK_FAIL;
        else if (s == CHECK_WARN && worst == CHECK_PASS) worst = CHECK_WARN;
        else if (s < 0) worst = CHECK_FAIL; /* a check that never finished */
    }
    return worst;
}

enum check_status results_doc_verdict(const json_t *root) { return verdict_of(json_object_get(root, "checks")); }

enum check_status results_verdict(const struct results *r) { return results_doc_verdict(r->root); }

enum check_status results_run_verdict(const struct results *r) { return verdict_of(r->mine); }

int results_exit_code(const struct results *r) { return results_run_verdict(r) == CHECK_FAIL ? 1 : 0; }

void results_note_error(struct results *r, int exit_code, const char *msg)
{
    json_t *me = r->root ? run_entry(r->root, r->run) : NULL;
    if (!me) return;
    json_object_set_new(me, "exit_code", json_integer(exit_code));
    if (msg && *msg) json_object_set_new(me, "error", json_string(msg));
}

/* Merges this command's part (its checks, its runs[] entry, the top-level
 * fields it set) into the folder's results.json as it is on disk now, so
 * another command's checks written meanwhile are kept. */
static void merge_disk(struct results *r, const char *path)
{
    json_t *disk = NULL;
    if (!file_exists(path) || results_read(path, &disk, NULL)) return;
    json_t *checks = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(disk, "checks"), i, c) if (jsonx_num(c, "run") != r->run)
        json_array_append(checks, c);
    json_array_foreach(r->mine, i, c) json_array_append(checks, c);
    json_t *runs = json_array();
    json_array_foreach(json_object_get(disk, "runs"), i, c) if (jsonx_num(c, "run") != r->run)
        json_array_append(runs, c);
    json_t *me = run_entry(r->root, r->run);
    if (me) json_array_append(runs, me);
    /* devices: the union by label */
    json_t *devs = json_object_get(json_object_get(r->root, "platform"), "devices");
    json_array_foreach(json_object_get(json_object_get(disk, "platform"), "devices"), i, c)
    {
        const char *l = jsonx_str(c, "label");
        int have = 0;
        size_t j;
        json_t *d;
        json_array_foreach(devs, j, d) have |= l && jsonx_str(d, "label") && !strcmp(l, jsonx_str(d, "label"));
        if (!have && json_is_array(devs)) json_array_append(devs, c);
    }
    const char *started = jsonx_str(disk, "started");
    if (started) json_object_set_new(r->root, "started", json_string(started));
    json_object_set_new(r->root, "checks", checks);
    json_object_set_new(r->root, "runs", runs);
    json_decref(disk);
}

int results_write(struct results *r, plumb_err *e)
{
    if (!r->root) return err_set(e, PLUMB_EINTERNAL, "results_write on a closed run folder");
    char fin[32], path[PATH_MAX + 32];
    sysinfo_utc_iso(timer_wall(), fin, sizeof fin);
    if (file_join(path, sizeof path, r->dir, "results.json", e)) return e->code;
    int lk = lock_dir(r->dir);
    merge_disk(r, path);
    json_object_set_new(r->root, "finished", json_string(fin));
    json_object_set_new(r->root, "verdict", json_string(check_status_name(results_verdict(r))));
    json_t *me = run_entry(r->root, r->run);
    if (me) {
        json_object_set_new(me, "finished", json_string(fin));
        json_object_set_new(me, "status", json_string("finished"));
        json_object_set_new(me, "checks", json_integer((json_int_t)json_array_size(r->mine)));
        json_object_set_new(me, "verdict", json_string(check_status_name(results_run_verdict(r))));
    }
    int rc = jsonx_write_file(path, r->root, e);
    if (rc) rc = err_wrap(e, "writing results");
    if (!rc && r->write_html) {
        if (file_join(path, sizeof path, r->dir, "report.html", e)) rc = e->code;
        else if (html_render_file(r->root, r->dir, path, e)) rc = err_wrap(e, "writing the report");
    }
    unlock_dir(lk);
    return rc;
}

void results_close(struct results *r)
{
    json_decref(r->root);
    json_decref(r->mine);
    r->root = r->mine = NULL;
}

int results_read(const char *dir_or_file, json_t **out, plumb_err *e)
{
    *out = NULL;
    char path[PATH_MAX + 32];
    struct stat st;
    if (stat(dir_or_file, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (file_join(path, sizeof path, dir_or_file, "results.json", e)) return e->code;
    } else {
        snprintf(path, sizeof path, "%s", dir_or_file);
    }
    struct stat pst;
    if (stat(path, &pst) != 0 && errno == ENOENT)
        return err_set(e, PLUMB_EUSAGE, "%s: no such file (expected a run folder with results.json)", path);
    /* a regular file of bounded size: a FIFO blocked the reader for ever, a
     * device such as /dev/zero was read without end, and a folder this user
     * cannot enter was reported as "no such file" */
    json_t *j;
    int jrc = jsonx_read_input(path, RESULTS_READ_CAP, &j, e);
    if (jrc) return jrc;
    const char *schema = jsonx_str(j, "schema");
    if (!json_is_object(j)) {
        json_decref(j);
        return err_set(e, PLUMB_EUSAGE, "%s: top level is not a JSON object", path);
    }
    if (!schema || strcmp(schema, RESULTS_SCHEMA)) {
        err_set(e, PLUMB_EUSAGE, "%s: schema is '%s', expected '%s'", path, schema ? schema : "(missing)",
                RESULTS_SCHEMA);
        json_decref(j);
        return PLUMB_EUSAGE;
    }
    json_t *checks = json_object_get(j, "checks");
    if (!json_is_array(checks)) {
        json_decref(j);
        return err_set(e, PLUMB_EUSAGE, "%s: \"checks\" is missing or not an array", path);
    }
    size_t i;
    json_t *c;
    json_array_foreach(checks, i, c)
    {
        const char *name = jsonx_str(c, "name"), *status = jsonx_str(c, "status");
        if (!json_is_object(c) || !name || !*name) {
            json_decref(j);
            return err_set(e, PLUMB_EUSAGE, "%s: checks[%zu] has no \"name\" string", path, i);
        }
        if (results_parse_status(status) < 0) {
            err_set(e, PLUMB_EUSAGE, "%s: checks[%zu] (%s): status '%s' is not pass, warn, fail or skip", path,
                    i, name, status ? status : "(missing)");
            json_decref(j);
            return PLUMB_EUSAGE;
        }
    }
    *out = j;
    return PLUMB_OK;
}
