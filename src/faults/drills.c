/* Fault drills (see drills.h). Each job is a real `plumb launch -- mpirun
 * -np N plumb train WORKLOAD ...` process tree; this file only starts it, watches
 * its files grow, delivers outside faults (SIGKILL to a rank, SIGTERM to the
 * launcher) and reads the outcome back from launch.jsonl, metrics.jsonl,
 * results.json and the job's log. */
#include "faults/drills.h"
#include "core/file.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/timer.h"
#include "train/options.h"
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void drill_opts_defaults(struct drill_opts *o)
{
    memset(o, 0, sizeof *o);
    o->mpirun = "mpirun";
    o->device = "cpu";
    o->drills = DRILL_NAMES;
    o->ranks = 2;
    o->step_timeout = 10;
    o->steps = 160;
    o->ckpt_every = 10;
    o->batch = 256;
}

enum act { ACT_NONE = 0, ACT_KILL_RANK, ACT_TERM_LAUNCHER };

struct rec {
    long step;
    double t; /* wall time this harness first saw the record */
};

struct job {
    const char *dir;          /* drill folder */
    enum act act;
    long act_step;            /* act once a record with step >= this is seen */
    int act_rank;
    double limit_s;           /* the job is stopped after this long */
    /* out */
    int wstatus;
    double t_start, t_end, t_act;
    long act_at_step;         /* newest step seen when acting */
    int acted, timed_out;
    struct rec *recs;
    int nrec, cap;
    /* the job's metrics.jsonl files (one per attempt: DIR/run/checks/train-<workload>[-runN]/,
     * README.md "Run folders") and how far each was read */
    struct {
        char name[64];
        size_t off;
    } mf[32];
    int nmf;
};

static void job_free(struct job *j)
{
    free(j->recs);
    j->recs = NULL;
    j->nrec = j->cap = 0;
}

static long max_step(const struct job *j)
{
    long m = -1;
    for (int i = 0; i < j->nrec; i++)
        if (j->recs[i].step > m) m = j->recs[i].step;
    return m;
}

/* Reads the complete lines added to one metrics file since the last call
 * and records each step record with the time it was seen. */
static void poll_file(struct job *j, const char *path, size_t *moff)
{
    FILE *f = fopen(path, "rb");
    if (!f) return;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        if (size >= 0 && (size_t)size < *moff) *moff = 0; /* rewritten */
    }
    fseek(f, (long)*moff, SEEK_SET);
    char line[8192];
    double now = timer_wall();
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (!len || line[len - 1] != '\n') break; /* incomplete: read it next time */
        *moff += len;
        json_t *o = json_loads(line, 0, NULL);
        if (!o) continue;
        const char *type = jsonx_str(o, "type");
        double s = jsonx_num(o, "step");
        if (type && !strcmp(type, "step") && isfinite(s)) {
            if (j->nrec == j->cap) {
                int nc = j->cap ? 2 * j->cap : 256;
                struct rec *nr = realloc(j->recs, (size_t)nc * sizeof *nr);
                if (!nr) {
                    json_decref(o);
                    break;
                }
                j->recs = nr, j->cap = nc;
            }
            j->recs[j->nrec].step = (long)s;
            j->recs[j->nrec].t = now;
            j->nrec++;
        }
        json_decref(o);
    }
    fclose(f);
}

/* Every attempt's metrics.jsonl in DIR/run/checks/train-<workload>[-runN] (each attempt
 * under plumb launch is a run of the folder, with its own artifacts). */
static void poll_metrics(struct job *j)
{
    char cdir[PATH_MAX], path[PATH_MAX + 80];
    snprintf(cdir, sizeof cdir, "%s/run/checks", j->dir);
    DIR *d = opendir(cdir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, "train-", 6) || strlen(de->d_name) >= sizeof j->mf[0].name) continue;
        int k = 0;
        while (k < j->nmf && strcmp(j->mf[k].name, de->d_name)) k++;
        if (k == j->nmf) {
            if (j->nmf == (int)(sizeof j->mf / sizeof j->mf[0])) continue;
            snprintf(j->mf[k].name, sizeof j->mf[k].name, "%s", de->d_name);
            j->mf[k].off = 0;
            j->nmf++;
        }
        snprintf(path, sizeof path, "%s/%s/metrics.jsonl", cdir, de->d_name);
        poll_file(j, path, &j->mf[k].off);
    }
    closedir(d);
}

/* Reads /proc/<pid>/<what> (NUL-separated) into buf; returns its length. */
static ssize_t proc_read(long pid, const char *what, char *buf, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/%s", pid, what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t got = 0, r;
    while ((size_t)got < n - 1 && (r = read(fd, buf + got, n - 1 - (size_t)got)) > 0) got += r;
    close(fd);
    buf[got < 0 ? 0 : got] = 0;
    return got;
}

static int env_has(const char *env, ssize_t len, const char *kv)
{
    for (ssize_t i = 0; i < len; i += (ssize_t)strlen(env + i) + 1)
        if (!strcmp(env + i, kv)) return 1;
    return 0;
}

/* The pid of training rank `rank` of the job whose launcher run dir is
 * launch_dir: the plumb process with PLUMB_LAUNCH_RUN_DIR=launch_dir and
 * OMPI_COMM_WORLD_RANK=rank in its environment (set by plumb launch and
 * mpirun), or -1. */
static pid_t find_rank(const char *launch_dir, int rank)
{
    char want_dir[PATH_MAX + 32], want_rank[48];
    snprintf(want_dir, sizeof want_dir, "PLUMB_LAUNCH_RUN_DIR=%s", launch_dir);
    snprintf(want_rank, sizeof want_rank, "OMPI_COMM_WORLD_RANK=%d", rank);
    DIR *d = opendir("/proc");
    if (!d) return -1;
    pid_t found = -1;
    static char env[1 << 17];
    struct dirent *de;
    while ((de = readdir(d)) && found < 0) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == getpid()) continue;
        char cmd[512];
        ssize_t cl = proc_read(pid, "cmdline", cmd, sizeof cmd);
        if (cl <= 0) continue;
        const char *base = strrchr(cmd, '/');
        base = base ? base + 1 : cmd;
        if (strcmp(base, "plumb")) continue;
        ssize_t el = proc_read(pid, "environ", env, sizeof env);
        if (el <= 0) continue;
        if (env_has(env, el, want_dir) && env_has(env, el, want_rank)) found = (pid_t)pid;
    }
    closedir(d);
    return found;
}

/* Runs argv (a plumb launch command) with stdout+stderr appended to
 * DIR/log.txt, watching metrics and acting as j says. */
static int run_job(struct job *j, char **argv, const struct drill_opts *o, plumb_err *e)
{
    char logp[PATH_MAX], launch_dir[PATH_MAX];
    snprintf(logp, sizeof logp, "%s/log.txt", j->dir);
    snprintf(launch_dir, sizeof launch_dir, "%s/launch", j->dir);
    int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(e, PLUMB_EIO, "drills: cannot open '%s': %s", logp, strerror(errno));
    {
        /* the command line, for whoever reads the log */
        char head[8192];
        size_t n = 0;
        n += (size_t)snprintf(head + n, sizeof head - n, "$");
        for (char **a = argv; *a && n < sizeof head; a++) n += (size_t)snprintf(head + n, sizeof head - n, " %s", *a);
        if (n < sizeof head) n += (size_t)snprintf(head + n, sizeof head - n, "\n");
        if (n > sizeof head) n = sizeof head;
        if (write(fd, head, n) < 0) {
        }
    }
    fflush(NULL);
    j->t_start = timer_wall();
    double m0 = timer_now();
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return err_set(e, PLUMB_EIO, "drills: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        execv(argv[0], argv);
        dprintf(2, "drills: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    setpgid(pid, pid);
    int stopping = 0;
    double t_stop = 0;
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        poll_metrics(j);
        if (w == pid) {
            j->wstatus = st;
            break;
        }
        if (j->act != ACT_NONE && !j->acted && max_step(j) >= j->act_step) {
            if (j->act == ACT_KILL_RANK) {
                pid_t rp = find_rank(launch_dir, j->act_rank);
                if (rp > 0 && kill(rp, SIGKILL) == 0) {
                    j->t_act = timer_wall();
                    j->act_at_step = max_step(j);
                    j->acted = 1;
                    if (!o->quiet) log_info("drill: SIGKILL sent to rank %d (pid %d) at step %ld", j->act_rank, (int)rp,
                                            j->act_at_step);
                }
            } else if (j->act == ACT_TERM_LAUNCHER) {
                kill(pid, SIGTERM);
                j->t_act = timer_wall();
                j->act_at_step = max_step(j);
                j->acted = 1;
                if (!o->quiet) log_info("drill: SIGTERM sent to plumb launch at step %ld", j->act_at_step);
            }
        }
        double el = timer_now() - m0;
        if (!stopping && el > j->limit_s) {
            log_error("drill: job in %s still running after %.0f s; stopping it", j->dir, el);
            j->timed_out = 1;
            kill(pid, SIGTERM);
            kill(pid, SIGTERM); /* second signal: the launcher passes it to the command itself too */
            stopping = 1;
            t_stop = el;
        }
        if (stopping && el - t_stop > 15) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    j->t_end = timer_wall();
    return PLUMB_OK;
}

/* ----------------------------------------------------------- outcome */

struct launch_ev {
    char event[16];
    double t;
    int attempt;
    long restarts;
};

static int read_events(const char *dir, struct launch_ev *ev, int max)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/launch/launch.jsonl", dir);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    char line[16384];
    while (n < max && fgets(line, sizeof line, f)) {
        json_t *o = json_loads(line, 0, NULL);
        if (!o) continue;
        const char *evn = jsonx_str(o, "event");
        snprintf(ev[n].event, sizeof ev[n].event, "%s", evn ? evn : "");
        ev[n].t = jsonx_num(o, "t");
        double a = jsonx_num(o, "attempt");
        ev[n].attempt = isfinite(a) ? (int)a : -1;
        n++;
        json_decref(o);
    }
    fclose(f);
    return n;
}

/* First event named name at or after t0 (wall time); NULL if none. */
static const struct launch_ev *find_ev(const struct launch_ev *ev, int n, const char *name, double t0)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(ev[i].event, name) && ev[i].t >= t0) return &ev[i];
    return NULL;
}

static int count_ev(const struct launch_ev *ev, int n, const char *name)
{
    int c = 0;
    for (int i = 0; i < n; i++) c += !strcmp(ev[i].event, name);
    return c;
}

/* results.json of the drill's run folder: param_digest and train.steps. */
static void read_final(const char *dir, char digest[65], long *steps)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/run/results.json", dir);
    digest[0] = 0;
    *steps = -1;
    json_t *r = NULL;
    if (jsonx_read_file(path, &r, NULL)) return;
    const char *d = jsonx_str(r, "param_digest");
    if (d) snprintf(digest, 65, "%s", d);
    json_t *t = json_object_get(r, "train");
    double s = jsonx_num(t, "steps");
    if (isfinite(s)) *steps = (long)s;
    json_decref(r);
}

static int log_contains(const char *dir, const char *needle)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    char *txt = NULL;
    size_t n;
    if (file_read_all(path, &txt, &n, NULL)) return 0;
    int r = strstr(txt, needle) != NULL;
    free(txt);
    return r;
}

/* ----------------------------------------------------------- commands */

struct argv_buf {
    char *a[128];
    int n;
    char store[32][PATH_MAX];
    char train[16384];      /* the plumb train words (train_config_argv) */
};

static void av_add(struct argv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void av_add(struct argv_buf *b, const char *fmt, ...)
{
    if (b->n >= 31) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->store[b->n], PATH_MAX, fmt, ap);
    va_end(ap);
    b->a[b->n] = b->store[b->n];
    b->n++;
    b->a[b->n] = NULL;
}

/* The drills' training: a short golden run of the workload's preset that
 * checkpoints and resumes, built as a train_config through the option table
 * and turned back into words (train/options.h). */
static int train_words(struct argv_buf *b, const struct drill_opts *o, const char *dir, const char *inject,
                       const char *skip, plumb_err *e)
{
    struct train_config c;
    char steps[32], batch[32], every[32], timeout[32], ck[PATH_MAX], out[PATH_MAX];
    snprintf(steps, sizeof steps, "%ld", o->steps);
    snprintf(batch, sizeof batch, "%ld", o->batch);
    snprintf(every, sizeof every, "%ld", o->ckpt_every);
    snprintf(timeout, sizeof timeout, "%g", o->step_timeout);
    snprintf(ck, sizeof ck, "%s/ckpt", dir);
    snprintf(out, sizeof out, "%s/run", dir);
    const char *set[][2] = {
        {"--preset", o->preset ? o->preset : o->wl->presets[0].name},
        {"--numerics", "golden"}, {"--steps", steps}, {"--batch", batch}, {"--warmup", "10"},
        {"--train-samples", "20000"}, {"--eval-samples", "2000"}, {"--checkpoint-dir", ck},
        {"--checkpoint-every", every}, {"--checkpoint-keep", "3"}, {"--resume", "auto"}, {"--out", out},
        {"--param-digest", NULL}, {"--step-timeout", timeout}, {"--device", o->device}, {"--threads", "1"},
        {"--inject", inject}, {"--skip-batches", skip},
    };
    train_config_defaults(&c, o->wl);
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++) {
        int flag = !strcmp(set[i][0], "--param-digest");
        if (!flag && !set[i][1]) continue;
        int rc = train_option_set(&c, set[i][0], set[i][1], e);
        if (rc) return err_wrap(e, "drills: the training command");
    }
    int rc = train_config_finish(&c, e);
    if (rc) return err_wrap(e, "drills: the training command");
    av_add(b, "%s", o->plumb);
    av_add(b, "train");
    av_add(b, "%s", o->wl->name);
    int w = train_config_argv(&c, b->a + b->n, 127 - b->n, b->train, sizeof b->train);
    if (w < 0) return err_set(e, PLUMB_EINTERNAL, "drills: the training command is too long");
    b->n += w;
    b->a[b->n] = NULL;
    return PLUMB_OK;
}

/* plumb launch ... -- mpirun -np N plumb train WORKLOAD <golden preset> ... */
static int build_cmd(struct argv_buf *b, const struct drill_opts *o, const char *dir, const char *inject,
                     const char *skip, plumb_err *e)
{
    b->n = 0;
    av_add(b, "%s", o->plumb);
    av_add(b, "launch");
    av_add(b, "--max-restarts"), av_add(b, "3");
    av_add(b, "--backoff"), av_add(b, "0.2");
    av_add(b, "--stop-grace"), av_add(b, "60");
    av_add(b, "--run-dir"), av_add(b, "%s/launch", dir);
    av_add(b, "--");
    av_add(b, "%s", o->mpirun);
    av_add(b, "--oversubscribe");
    av_add(b, "-np"), av_add(b, "%d", o->ranks);
    return train_words(b, o, dir, inject, skip, e);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path) ? -1 : 0;
}

static int fresh_dir(const char *dir, plumb_err *e)
{
    /* a drill always starts from nothing: leftovers would be resumed */
    if (file_exists(dir) && nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return err_set(e, PLUMB_EIO, "drills: cannot clear '%s': %s", dir, strerror(errno));
    return file_mkdirs(dir, e);
}

/* Runs one job in out_dir/name: fresh folder, command, watch. */
static int drill_job(const struct drill_opts *o, const char *name, const char *inject, const char *skip,
                     enum act act, long act_step, int act_rank, struct job *j, char *dirbuf, plumb_err *e)
{
    snprintf(dirbuf, PATH_MAX, "%s/%s", o->out_dir, name);
    int rc = fresh_dir(dirbuf, e);
    if (rc) return rc;
    memset(j, 0, sizeof *j);
    j->dir = dirbuf;
    j->act = act;
    j->act_step = act_step;
    j->act_rank = act_rank;
    j->limit_s = 120 + 4 * o->step_timeout;
    static struct argv_buf b;
    if ((rc = build_cmd(&b, o, dirbuf, inject, skip, e))) return rc;
    if (!o->quiet) log_info("drill %s: %s%s%s", name, inject ? "--inject " : "", inject ? inject : "",
                            act == ACT_KILL_RANK ? "SIGKILL a rank" : act == ACT_TERM_LAUNCHER ? "SIGTERM the launcher" : "");
    return run_job(j, b.a, o, e);
}

/* Fills the restart-related fields from a job that failed once at t_fault
 * and was restarted by the launcher. */
static void restart_outcome(struct drill_result *r, const struct job *j, const struct launch_ev *ev, int nev,
                            double t_fault)
{
    const struct launch_ev *fail = find_ev(ev, nev, "failure", t_fault - 1.0);
    r->restarts = count_ev(ev, nev, "start") - 1;
    if (!fail) {
        r->detected = 0;
        return;
    }
    r->detected = 1;
    r->t_detect_s = fail->t - t_fault;
    const struct launch_ev *st2 = find_ev(ev, nev, "start", fail->t);
    long last = -1;
    for (int i = 0; i < j->nrec; i++)
        if (j->recs[i].t <= fail->t && j->recs[i].step > last) last = j->recs[i].step;
    if (!st2) return;
    for (int i = 0; i < j->nrec; i++) {
        if (j->recs[i].t >= st2->t) {
            r->t_resume_s = j->recs[i].t - fail->t;
            r->resumed_from = j->recs[i].step - 1;
            r->steps_lost = last - r->resumed_from;
            if (r->steps_lost < 0) r->steps_lost = 0;
            break;
        }
    }
}

static double first_seen(const struct job *j, long step)
{
    for (int i = 0; i < j->nrec; i++)
        if (j->recs[i].step >= step) return j->recs[i].t;
    return NAN;
}

static void finish(struct drill_result *r, const struct job *j, const char *want, const struct drill_opts *o)
{
    long steps;
    read_final(j->dir, r->digest, &steps);
    snprintf(r->want, sizeof r->want, "%s", want);
    r->recovered = WIFEXITED(j->wstatus) && WEXITSTATUS(j->wstatus) == 0 && steps == o->steps && !j->timed_out;
    r->digest_equal = r->digest[0] && !strcmp(r->digest, want);
    if (r->timing_applies)
        r->within_limit = isfinite(r->t_detect_s) && isfinite(r->t_resume_s) &&
                          r->t_detect_s + r->t_resume_s < DRILL_RECOVERY_LIMIT_S;
    r->ok = r->fault_delivered && r->detected && r->recovered && r->digest_equal;
    if (!r->recovered && !r->note[0])
        snprintf(r->note, sizeof r->note, "training did not finish (launcher exit %d, %ld of %ld steps)%s",
                 WIFEXITED(j->wstatus) ? WEXITSTATUS(j->wstatus) : 128 + WTERMSIG(j->wstatus), steps, o->steps,
                 j->timed_out ? ", timed out" : "");
    if (r->recovered && !r->digest_equal && !r->note[0])
        snprintf(r->note, sizeof r->note, "final digest differs from the reference run's");
}

static void res_init(struct drill_result *r, const char *name)
{
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->t_detect_s = r->t_resume_s = NAN;
    r->resumed_from = -1;
    r->fault_step = -1;
}

static int has_drill(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == n && !strncmp(p, name, n)) return 1;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

int drills_check_list(const char *list, plumb_err *e)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    char *save = NULL;
    int any = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!has_drill(DRILL_NAMES, t))
            return err_set(e, PLUMB_EUSAGE, "--drills: unknown drill '%s' (expected some of %s)", t, DRILL_NAMES);
        any = 1;
    }
    if (!any) return err_set(e, PLUMB_EUSAGE, "--drills: no drill named (expected some of %s)", DRILL_NAMES);
    return PLUMB_OK;
}

int drills_run(const struct drill_opts *o, struct drill_result *res, int *nres, plumb_err *e)
{
    *nres = 0;
    int lrc = drills_check_list(o->drills, e);
    if (lrc) return lrc;
    if (!o->wl) return err_set(e, PLUMB_EUSAGE, "drills: no workload to train");
    if (o->ranks < 1 || o->ranks > 64) return err_set(e, PLUMB_EUSAGE, "--ranks: %d (expected 1..64)", o->ranks);
    if (!(o->step_timeout > 0)) return err_set(e, PLUMB_EUSAGE, "--step-timeout: %g (expected > 0 s)", o->step_timeout);
    if (o->steps < 6 * o->ckpt_every || o->ckpt_every < 2)
        return err_set(e, PLUMB_EUSAGE, "drills: %ld steps with a checkpoint every %ld: need steps >= 6 x interval >= 12",
                       o->steps, o->ckpt_every);
    int rc = file_mkdirs(o->out_dir, e);
    if (rc) return rc;
    /* mpirun refuses root without these; drills are short jobs of our own */
    if (geteuid() == 0) {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    unsetenv("PLUMB_LAUNCH_ATTEMPT"); /* the drills' own launchers set it */

    const long C = o->ckpt_every, S = o->steps;
    const int victim = o->ranks - 1;
    /* fault steps: a little past a checkpoint, so steps are lost and must
     * be recomputed identically */
    const long k_kill = 4 * C + C / 2, k_hang = 4 * C + C / 2 + 1, k_corrupt = 5 * C + C / 2, k_term = 4 * C + 3;
    const long k_oom = 2 * C + 1, k_nan = 3 * C + 2;
    char dir[PATH_MAX];
    struct job j;
    struct launch_ev ev[64];

    /* reference: uninterrupted */
    if ((rc = drill_job(o, "reference", NULL, NULL, ACT_NONE, 0, 0, &j, dir, e))) return rc;
    char want[65];
    long ref_steps;
    read_final(dir, want, &ref_steps);
    job_free(&j);
    if (!want[0] || ref_steps != S)
        return err_set(e, PLUMB_EFAIL, "drills: the uninterrupted reference run failed (see %s/log.txt)", dir);
    if (!o->quiet) log_info("drill reference: %ld steps, digest %.16s", S, want);

    if (has_drill(o->drills, "kill")) {
        struct drill_result *r = &res[(*nres)++];
        res_init(r, "kill");
        r->timing_applies = 1;
        if ((rc = drill_job(o, "kill", NULL, NULL, ACT_KILL_RANK, k_kill, victim, &j, dir, e))) return rc;
        int nev = read_events(dir, ev, 64);
        r->fault_delivered = j.acted;
        r->fault_step = j.act_at_step;
        if (j.acted) restart_outcome(r, &j, ev, nev, j.t_act);
        else
            snprintf(r->note, sizeof r->note,
                     "rank %d was not killed before training ended (newest step seen %ld, fault at >= %ld); use more "
                     "--steps",
                     victim, max_step(&j), k_kill);
        finish(r, &j, want, o);
        job_free(&j);
    }
    if (has_drill(o->drills, "hang")) {
        struct drill_result *r = &res[(*nres)++];
        res_init(r, "hang");
        r->timing_applies = 1;
        char inj[64];
        snprintf(inj, sizeof inj, "hang@%ld:%d", k_hang, victim);
        if ((rc = drill_job(o, "hang", inj, NULL, ACT_NONE, 0, 0, &j, dir, e))) return rc;
        int nev = read_events(dir, ev, 64);
        /* the hang starts right after step k_hang - 1 completes (record k_hang) */
        double t_fault = first_seen(&j, k_hang);
        r->fault_step = k_hang;
        r->fault_delivered = log_contains(dir, "injected fault: rank") && isfinite(t_fault);
        if (r->fault_delivered) restart_outcome(r, &j, ev, nev, t_fault);
        if (r->detected && !log_contains(dir, "watchdog: timed out"))
            snprintf(r->note, sizeof r->note, "the job failed but no watchdog report was logged");
        finish(r, &j, want, o);
        job_free(&j);
    }
    if (has_drill(o->drills, "oom")) {
        static const struct {
            const char *name;
            int count;
            const char *marker;
        } v[2] = {{"oom-retry", 2, "emptying the allocator cache and retrying"},
                  {"oom-split", 4, "micro-batches"}};
        for (int i = 0; i < 2; i++) {
            struct drill_result *r = &res[(*nres)++];
            res_init(r, v[i].name);
            char inj[64];
            snprintf(inj, sizeof inj, "oom@%ld:%dx%d", k_oom, victim, v[i].count);
            if ((rc = drill_job(o, v[i].name, inj, NULL, ACT_NONE, 0, 0, &j, dir, e))) return rc;
            int nev = read_events(dir, ev, 64);
            r->fault_step = k_oom;
            r->fault_delivered = log_contains(dir, "out of memory");
            r->detected = log_contains(dir, v[i].marker);
            r->restarts = count_ev(ev, nev, "start") - 1;
            r->steps_lost = 0;
            finish(r, &j, want, o);
            if (r->restarts > 0) {
                /* recovered only by restarting: the in-step tier did not hold */
                r->ok = 0;
                snprintf(r->note, sizeof r->note, "the job failed and was restarted (%d) instead of recovering in the step",
                         r->restarts);
            } else if (!r->detected && !r->note[0]) {
                snprintf(r->note, sizeof r->note, "no '%s' in the log", v[i].marker);
            }
            job_free(&j);
        }
    }
    if (has_drill(o->drills, "nan")) {
        struct drill_result *r = &res[(*nres)++];
        res_init(r, "nan");
        char skip[32], inj[64];
        snprintf(skip, sizeof skip, "%ld", k_nan);
        snprintf(inj, sizeof inj, "nan@%ld", k_nan);
        char want_skip[65] = "";
        if ((rc = drill_job(o, "nan-reference", NULL, skip, ACT_NONE, 0, 0, &j, dir, e))) return rc;
        long st;
        read_final(dir, want_skip, &st);
        job_free(&j);
        if (!want_skip[0] || st != S)
            snprintf(r->note, sizeof r->note, "the reference run with --skip-batches %s failed (see %s/log.txt)", skip, dir);
        if ((rc = drill_job(o, "nan", inj, NULL, ACT_NONE, 0, 0, &j, dir, e))) return rc;
        int nev = read_events(dir, ev, 64);
        r->fault_step = k_nan;
        r->fault_delivered = log_contains(dir, "injected fault: non-finite");
        r->detected = log_contains(dir, "step skipped");
        r->restarts = count_ev(ev, nev, "start") - 1;
        r->batches_skipped = 1;
        finish(r, &j, want_skip, o);
        if (r->restarts > 0) r->ok = 0;
        job_free(&j);

        /* more non-finite steps in a row than --max-bad-steps (3): the run
         * rolls back to the last checkpoint and recomputes, so the digest is
         * the uninterrupted run's */
        r = &res[(*nres)++];
        res_init(r, "nan-rollback");
        long k0 = 3 * C + 2;
        snprintf(inj, sizeof inj, "nan@%ld,nan@%ld,nan@%ld,nan@%ld", k0, k0 + 1, k0 + 2, k0 + 3);
        if ((rc = drill_job(o, "nan-rollback", inj, NULL, ACT_NONE, 0, 0, &j, dir, e))) return rc;
        nev = read_events(dir, ev, 64);
        r->fault_step = k0;
        r->fault_delivered = log_contains(dir, "injected fault: non-finite");
        r->detected = log_contains(dir, "rolled back from step");
        r->restarts = count_ev(ev, nev, "start") - 1;
        r->resumed_from = 3 * C;
        r->steps_lost = k0 + 4 - 3 * C;
        finish(r, &j, want, o);
        if (r->restarts > 0) r->ok = 0;
        job_free(&j);
    }    if (has_drill(o->drills, "corrupt")) {
        struct drill_result *r = &res[(*nres)++];
        res_init(r, "corrupt");
        /* corrupt the checkpoint written at 5C (the newest when rank `victim`
         * exits at 5C + C/2): the restart must fall back to 4C */
        char inj[96];
        snprintf(inj, sizeof inj, "corrupt-checkpoint@%ld,exit@%ld:%d", 5 * C, k_corrupt, victim);
        if ((rc = drill_job(o, "corrupt", inj, NULL, ACT_NONE, 0, 0, &j, dir, e))) return rc;
        int nev = read_events(dir, ev, 64);
        double t_fault = first_seen(&j, k_corrupt);
        r->fault_step = k_corrupt;
        r->fault_delivered = log_contains(dir, "injected fault: corrupting checkpoint") && isfinite(t_fault);
        if (r->fault_delivered) restart_outcome(r, &j, ev, nev, t_fault);
        if (r->detected && r->resumed_from != 4 * C) {
            r->detected = 0;
            snprintf(r->note, sizeof r->note, "resumed from step %ld, expected the previous checkpoint (%ld)",
                     r->resumed_from, 4 * C);
        }
        finish(r, &j, want, o);
        job_free(&j);
    }
    if (has_drill(o->drills, "sigterm")) {
        struct drill_result *r = &res[(*nres)++];
        res_init(r, "sigterm");
        if ((rc = drill_job(o, "sigterm", NULL, NULL, ACT_TERM_LAUNCHER, k_term, 0, &j, dir, e))) return rc;
        r->fault_delivered = j.acted;
        r->fault_step = j.act_at_step;
        long stop_step = max_step(&j);
        if (!j.acted)
            snprintf(r->note, sizeof r->note,
                     "SIGTERM not sent before training ended (newest step seen %ld, fault at >= %ld); use more --steps",
                     stop_step, k_term);
        int clean = WIFEXITED(j.wstatus) && WEXITSTATUS(j.wstatus) == 0 && log_contains(dir, "interrupted at step");
        r->detected = clean;
        r->t_detect_s = j.acted ? j.t_end - j.t_act : NAN; /* signal -> checkpoint written and job ended */
        if (!clean && j.acted)
            snprintf(r->note, sizeof r->note, "the job did not stop cleanly after SIGTERM (status 0x%x)", j.wstatus);
        /* second launch: resumes from the clean checkpoint (same folder) */
        static struct argv_buf b;
        if ((rc = build_cmd(&b, o, dir, NULL, NULL, e))) return rc;
        struct job j2;
        memset(&j2, 0, sizeof j2);
        j2.dir = dir;
        j2.limit_s = 120 + 4 * o->step_timeout;
        memcpy(j2.mf, j.mf, sizeof j2.mf);
        j2.nmf = j.nmf;
        if ((rc = run_job(&j2, b.a, o, e))) return rc;
        if (j2.nrec > 0) {
            r->t_resume_s = j2.recs[0].t - j2.t_start;
            r->resumed_from = j2.recs[0].step - 1;
            r->steps_lost = stop_step - r->resumed_from;
            if (r->steps_lost < 0) r->steps_lost = 0;
        }
        r->restarts = 1;
        finish(r, &j2, want, o);
        job_free(&j);
        job_free(&j2);
    }
    json_t *arr = drills_json(res, *nres);
    json_t *doc = json_pack("{s:s, s:o, s:s, s:i, s:f, s:I, s:I, s:s}", "schema", "plumb.faults/1", "drills", arr,
                            "device", o->device, "ranks", o->ranks, "step_timeout_s", o->step_timeout, "steps",
                            (json_int_t)S, "checkpoint_every", (json_int_t)C, "reference_digest", want);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/faults.json", o->out_dir);
    rc = jsonx_write_file(path, doc, e);
    json_decref(doc);
    return rc;
}

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *drills_json(const struct drill_result *res, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        const struct drill_result *r = &res[i];
        json_t *o = json_pack("{s:s, s:b, s:b, s:b, s:b, s:b, s:o, s:o, s:I, s:I, s:I, s:I, s:i, s:s, s:s}", "name",
                              r->name, "ok", r->ok, "fault_delivered", r->fault_delivered, "detected", r->detected,
                              "recovered", r->recovered, "digest_equal", r->digest_equal, "detect_s",
                              num_or_null(r->t_detect_s), "resume_s", num_or_null(r->t_resume_s), "fault_step",
                              (json_int_t)r->fault_step, "resumed_from", (json_int_t)r->resumed_from, "steps_lost",
                              (json_int_t)r->steps_lost, "batches_skipped", (json_int_t)r->batches_skipped, "restarts",
                              r->restarts, "digest", r->digest, "reference_digest", r->want);
        if (r->timing_applies) {
            json_object_set_new(o, "recovery_limit_s", json_real(DRILL_RECOVERY_LIMIT_S));
            json_object_set_new(o, "within_limit", json_boolean(r->within_limit));
        }
        if (r->note[0]) json_object_set_new(o, "note", json_string(r->note));
        json_array_append_new(a, o);
    }
    return a;
}

static void fmt_s(char *b, size_t n, double v)
{
    if (isfinite(v)) snprintf(b, n, "%.2f", v);
    else snprintf(b, n, "-");
}

void drills_print(const struct drill_result *res, int n, void *file)
{
    FILE *f = file;
    fprintf(f, "%-13s %-7s %-9s %-9s %-7s %9s %9s %-5s %6s %5s %8s\n", "drill", "result", "detected", "recovered",
            "digest", "detect_s", "resume_s", "<30s", "lost", "skip", "restarts");
    for (int i = 0; i < n; i++) {
        const struct drill_result *r = &res[i];
        char d[16], s[16];
        fmt_s(d, sizeof d, r->t_detect_s);
        fmt_s(s, sizeof s, r->t_resume_s);
        fprintf(f, "%-13s %-7s %-9s %-9s %-7s %9s %9s %-5s %6ld %5ld %8d\n", r->name, r->ok ? "pass" : "FAIL",
                r->detected ? "yes" : "no", r->recovered ? "yes" : "no", r->digest_equal ? "equal" : "DIFFERS", d, s,
                r->timing_applies ? (r->within_limit ? "pass" : "FAIL") : "n/a", r->steps_lost, r->batches_skipped,
                r->restarts);
        if (r->note[0]) fprintf(f, "              note: %s\n", r->note);
    }
}
