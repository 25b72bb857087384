#include "report/results.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "core/timer.h"
#include "dev/dev.h"
#include "report/html.h"
#include "report/sysinfo.h"
#include <errno.h>
#include <fcntl.h>
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

static int open_dir(struct results *r, const char *command, plumb_err *e)
{
    char path[PATH_MAX + 32];
    if (file_join(path, sizeof path, r->dir, "results.json", e)) return e->code;
    if (file_exists(path)) {
        if (results_read(path, &r->root, e)) return err_wrap(e, "continuing run folder %s", r->dir);
        /* refresh what describes this process; keep started and checks */
        struct sysinfo_host h;
        sysinfo_host_get(&h);
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
        return PLUMB_OK;
    }
    if (new_doc(r, command)) return err_set(e, PLUMB_ENOMEM, "out of memory building results");
    return PLUMB_OK;
}

static int open_common(struct results *r, const char *dir, const char *parent, const char *command,
                       plumb_err *e)
{
    memset(r, 0, sizeof *r);
    r->write_html = 1;
    if (dir && *dir) {
        if (strlen(dir) >= sizeof r->dir - 64)
            return err_set(e, PLUMB_EUSAGE, "--out: path '%.80s...' is too long", dir);
        struct stat st;
        if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
            return err_set(e, PLUMB_EUSAGE, "--out: '%s' exists and is not a directory", dir);
        snprintf(r->dir, sizeof r->dir, "%s", dir);
        size_t L = strlen(r->dir);
        while (L > 1 && r->dir[L - 1] == '/') r->dir[--L] = '\0';
        if (file_mkdirs(r->dir, e)) return err_wrap(e, "creating run folder");
    } else {
        if (file_mkdirs(parent, e)) return err_wrap(e, "creating %s", parent);
        char host[256] = "", sh[64], t[32], id[8];
        if (gethostname(host, sizeof host - 1)) host[0] = '\0';
        safe_host(host, sh, sizeof sh);
        sysinfo_utc_compact(timer_wall(), t, sizeof t);
        for (int tries = 0;; tries++) {
            run_id(id, sizeof id);
            snprintf(r->dir, sizeof r->dir, "%s/%s-%s-%s", parent, t, sh, id);
            if (mkdir(r->dir, 0755) == 0) break;
            if (errno != EEXIST || tries > 16)
                return err_set(e, PLUMB_EIO, "cannot create run folder %s: %s", r->dir, strerror(errno));
        }
    }
    int rc = open_dir(r, command, e);
    if (rc) {
        json_decref(r->root);
        r->root = NULL;
    }
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
    json_array_append(json_object_get(r->root, "checks"), c->obj);
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

enum check_status results_doc_verdict(const json_t *root)
{
    enum check_status worst = CHECK_PASS;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "checks"), i, c)
    {
        int s = results_parse_status(jsonx_str(c, "status"));
        if (s == CHECK_FAIL) worst = CHECK_FAIL;
        else if (s == CHECK_WARN && worst == CHECK_PASS) worst = CHECK_WARN;
        else if (s < 0) worst = CHECK_FAIL; /* a check that never finished */
    }
    return worst;
}

enum check_status results_verdict(const struct results *r) { return results_doc_verdict(r->root); }

int results_exit_code(const struct results *r) { return results_verdict(r) == CHECK_FAIL ? 1 : 0; }

int results_write(struct results *r, plumb_err *e)
{
    if (!r->root) return err_set(e, PLUMB_EINTERNAL, "results_write on a closed run folder");
    char fin[32], path[PATH_MAX + 32];
    sysinfo_utc_iso(timer_wall(), fin, sizeof fin);
    json_object_set_new(r->root, "finished", json_string(fin));
    json_object_set_new(r->root, "verdict", json_string(check_status_name(results_verdict(r))));
    if (file_join(path, sizeof path, r->dir, "results.json", e)) return e->code;
    if (jsonx_write_file(path, r->root, e)) return err_wrap(e, "writing results");
    if (r->write_html) {
        if (file_join(path, sizeof path, r->dir, "report.html", e)) return e->code;
        if (html_render_file(r->root, r->dir, path, e)) return err_wrap(e, "writing the report");
    }
    return PLUMB_OK;
}

void results_close(struct results *r)
{
    json_decref(r->root);
    r->root = NULL;
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
    if (!file_exists(path)) return err_set(e, PLUMB_EUSAGE, "%s: no such file (expected a run folder with results.json)", path);
    json_t *j;
    if (jsonx_read_file(path, &j, e)) return e->code;
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
