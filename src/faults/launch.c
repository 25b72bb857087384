/* plumb launch: supervise a command, restart it on failure (see launch.h).
 *
 * Process layout: launcher -> command (own process group, e.g. mpirun) ->
 * ranks. The launcher is a child subreaper (prctl), so processes of an
 * attempt orphaned by a dying mpirun are reparented to it and can be killed
 * and reaped before the next attempt starts; a restart never runs next to
 * leftovers of the previous attempt. */
#include "faults/launch.h"
#include "core/file.h"
#include "core/log.h"
#include "core/timer.h"
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_sig;      /* last signal received (0 none) */
static volatile sig_atomic_t g_nsig;     /* signals received so far */
static const int g_fwd[] = {SIGINT, SIGTERM, SIGHUP};
#define NFWD ((int)(sizeof g_fwd / sizeof g_fwd[0]))

/* The handler only records; the wait loop forwards (walking /proc is not
 * async-signal-safe). */
static void on_signal(int sig)
{
    g_sig = sig;
    g_nsig++;
}

/* Process groups to signal for a stop request. When the command has
 * descendants in process groups of their own (mpirun starts every rank as a
 * group leader), the signal goes to those groups and not to the command:
 * the ranks agree on the stop through their status word, write a clean
 * checkpoint and exit 0, and mpirun then ends normally. Signalling mpirun
 * itself would make it kill the ranks after odls_base_sigkill_timeout (1 s),
 * possibly in the middle of the checkpoint. Without such descendants (a
 * plain command, or srun whose tasks run elsewhere) the command's own group
 * gets it. hard: the command's group as well (second signal). Returns the
 * number of groups signalled. */
static int forward_signal(pid_t child, int sig, int hard)
{
    /* pid -> (ppid, pgid) of every process, from /proc/<pid>/stat */
    enum { MAXP = 65536 };
    static pid_t ppid_of[MAXP], pgid_of[MAXP];
    static pid_t pids[MAXP];
    int np = 0;
    DIR *d = opendir("/proc");
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) && np < MAXP) {
            char *end;
            long pid = strtol(de->d_name, &end, 10);
            if (*end || pid <= 0) continue;
            char path[64], buf[512];
            snprintf(path, sizeof path, "/proc/%ld/stat", pid);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue;
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n <= 0) continue;
            buf[n] = 0;
            /* "pid (comm) state ppid pgrp ...": comm may hold spaces and ')' */
            char *rp = strrchr(buf, ')');
            char state;
            int pp, pg;
            if (!rp || sscanf(rp + 1, " %c %d %d", &state, &pp, &pg) != 3) continue;
            pids[np] = (pid_t)pid;
            ppid_of[np] = pp;
            pgid_of[np] = pg;
            np++;
        }
        closedir(d);
    }
    /* descendants of child: repeated passes (the tree is small) */
    static unsigned char in[MAXP];
    memset(in, 0, (size_t)np);
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < np; i++) {
            if (in[i]) continue;
            int par = ppid_of[i] == child;
            for (int j = 0; !par && j < np; j++) par = in[j] && pids[j] == ppid_of[i];
            if (par) in[i] = 1, changed = 1;
        }
    }
    int sent = 0;
    pid_t done[256];
    int nd = 0;
    for (int i = 0; i < np; i++) {
        if (!in[i] || pgid_of[i] == child || pgid_of[i] <= 1) continue;
        int dup = 0;
        for (int k = 0; k < nd; k++) dup |= done[k] == pgid_of[i];
        if (dup || nd == 256) continue;
        done[nd++] = pgid_of[i];
        if (kill(-pgid_of[i], sig) == 0) sent++;
    }
    if (hard || nd == 0) {
        if (kill(-child, sig) == 0) sent++;
    }
    return sent;
}

void launch_describe_status(int st, char *buf, size_t n)
{
    if (WIFEXITED(st))
        snprintf(buf, n, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, n, "signal %d (SIG%s)", WTERMSIG(st), sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
    else
        snprintf(buf, n, "wait status 0x%x", st);
}

static int status_code(int st)
{
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 1;
}

static void iso_now(char *buf, size_t n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

/* Appends obj (stolen) with "time"/"t" to launch.jsonl. One write(2) per line
 * on an O_APPEND descriptor, so a reader never sees half a line. */
static int log_event(const char *path, json_t *obj, plumb_err *e)
{
    char iso[40];
    iso_now(iso, sizeof iso);
    json_object_set_new(obj, "time", json_string(iso));
    json_object_set_new(obj, "t", json_real(timer_wall()));
    char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    if (!s) return err_set(e, PLUMB_EINTERNAL, "launch: cannot encode a log line");
    int rc = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = err_set(e, PLUMB_EIO, "launch: cannot open '%s': %s", path, strerror(errno));
    } else {
        size_t len = strlen(s);
        s[len] = '\n'; /* json_dumps leaves room for the NUL we overwrite */
        if (write(fd, s, len + 1) != (ssize_t)(len + 1))
            rc = err_set(e, PLUMB_EIO, "launch: cannot write '%s': %s", path, strerror(errno));
        close(fd);
    }
    free(s);
    return rc;
}

/* Sleeps up to s seconds; returns early (1) when a signal was received. */
static int sleep_unless_signal(double s)
{
    double end = timer_now() + s;
    while (!g_sig) {
        double left = end - timer_now();
        if (left <= 0) return 0;
        if (left > 0.05) left = 0.05;
        struct timespec ts = {0, (long)(left * 1e9)};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* Reaps every child that has exited (orphans of the attempt land here). */
static void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

/* Ends whatever is left of an attempt's process group: SIGTERM, up to 3 s
 * grace, then SIGKILL. */
static void clear_group(pid_t pgid)
{
    if (pgid <= 0) return;
    reap_all();
    if (kill(-pgid, 0) != 0) return;
    log_warn("launch: processes of the failed attempt remain in group %d; sending SIGTERM", (int)pgid);
    kill(-pgid, SIGTERM);
    double end = timer_now() + 3.0;
    while (timer_now() < end) {
        reap_all();
        if (kill(-pgid, 0) != 0) return;
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    log_warn("launch: group %d still alive after 3 s; sending SIGKILL", (int)pgid);
    kill(-pgid, SIGKILL);
    end = timer_now() + 3.0;
    while (timer_now() < end && kill(-pgid, 0) == 0) {
        reap_all();
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
}

/* Starts one attempt. Returns the pid, or -1 with e set when the command
 * cannot be executed at all (reported by the child through a CLOEXEC pipe). */
static pid_t start_attempt(const struct launch_opts *o, int attempt, plumb_err *e)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        err_set(e, PLUMB_EIO, "launch: pipe: %s", strerror(errno));
        return -1;
    }
    sigset_t all, old;
    sigfillset(&all);
    /* block the forwarded signals across fork so the handler never sees a
     * child pid without its group set */
    sigprocmask(SIG_BLOCK, &all, &old);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        for (int i = 0; i < NFWD; i++) signal(g_fwd[i], SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        char a[32];
        snprintf(a, sizeof a, "%d", attempt);
        setenv("PLUMB_LAUNCH_ATTEMPT", a, 1);
        setenv("PLUMB_LAUNCH_RUN_DIR", o->run_dir, 1);
        execvp(o->argv[0], o->argv);
        int err = errno;
        if (write(pfd[1], &err, sizeof err) < 0) {
        }
        _exit(127);
    }
    int fork_errno = errno;
    if (pid > 0) {
        setpgid(pid, pid); /* also done by the child; whichever runs first */
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(pfd[1]);
    if (pid < 0) {
        close(pfd[0]);
        err_set(e, PLUMB_EIO, "launch: fork: %s", strerror(fork_errno));
        return -1;
    }
    int child_errno = 0;
    ssize_t r;
    do r = read(pfd[0], &child_errno, sizeof child_errno);
    while (r < 0 && errno == EINTR);
    close(pfd[0]);
    if (r == (ssize_t)sizeof child_errno) {
        waitpid(pid, NULL, 0);
        err_set(e, PLUMB_EUSAGE, "cannot run '%s': %s", o->argv[0], strerror(child_errno));
        return -1;
    }
    return pid;
}

int launch_run(const struct launch_opts *o, struct launch_result *res, plumb_err *e)
{
    memset(res, 0, sizeof *res);
    if (!o->argv || !o->argv[0]) return err_set(e, PLUMB_EUSAGE, "launch: no command given (put it after --)");
    if (o->max_restarts < 0) return err_set(e, PLUMB_EUSAGE, "--max-restarts: %d is negative", o->max_restarts);
    if (!(o->restart_window > 0))
        return err_set(e, PLUMB_EUSAGE, "--restart-window: %g is not a positive number of seconds", o->restart_window);
    if (!(o->backoff >= 0)) return err_set(e, PLUMB_EUSAGE, "--backoff: %g is negative", o->backoff);
    int rc = file_mkdirs(o->run_dir, e);
    if (rc) return rc;
    char logp[4096];
    if ((rc = file_join(logp, sizeof logp, o->run_dir, "launch.jsonl", e))) return rc;

    g_sig = 0;
    g_nsig = 0;
    struct sigaction sa, old[NFWD];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NFWD; i++) sigaction(g_fwd[i], &sa, &old[i]);
    int was_subreaper = 0;
    prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    double *fail_t = calloc((size_t)o->max_restarts + 2, sizeof *fail_t);
    int nfail = 0; /* failures within the window, oldest first */
    if (!fail_t) {
        rc = err_set(e, PLUMB_ENOMEM, "launch: out of memory");
        goto out;
    }
    {
        json_t *cmd = json_array();
        for (char **a = o->argv; *a; a++) json_array_append_new(cmd, json_string(*a));
        json_t *ev = json_pack("{s:s, s:o, s:i, s:f, s:f}", "event", "launch", "command", cmd, "max_restarts",
                               o->max_restarts, "restart_window_s", o->restart_window, "backoff_s", o->backoff);
        if ((rc = log_event(logp, ev, e))) goto out;
    }
    for (int attempt = 0;; attempt++) {
        if (g_sig) { /* arrived during the backoff: nothing is running */
            res->outcome = LAUNCH_INTERRUPTED;
            res->exit_status = 128 + g_sig;
            log_warn("launch: signal %d (SIG%s) before attempt %d started; not starting it", (int)g_sig,
                     sigabbrev_np(g_sig), attempt + 1);
            rc = log_event(logp, json_pack("{s:s, s:i, s:i}", "event", "interrupted", "signal", (int)g_sig,
                                           "before_attempt", attempt), e);
            goto out;
        }
        double t0 = timer_now();
        pid_t pid = start_attempt(o, attempt, e);
        if (pid < 0) {
            rc = e->code;
            log_event(logp, json_pack("{s:s, s:i, s:s}", "event", "not_started", "attempt", attempt, "error", e->msg),
                      NULL);
            goto out;
        }
        res->attempts = attempt + 1;
        res->restarts = attempt;
        log_info("launch: attempt %d started (pid %d)", attempt + 1, (int)pid);
        if ((rc = log_event(logp, json_pack("{s:s, s:i, s:i}", "event", "start", "attempt", attempt, "pid", (int)pid), e)))
            goto out;
        /* Wait, polling, so that a signal recorded by the handler at any
         * moment is forwarded within 20 ms (no race with a blocking wait). */
        int st = 0, handled = 0, killed = 0;
        double t_sig = 0;
        for (;;) {
            pid_t w = waitpid(pid, &st, WNOHANG);
            if (w == pid) break;
            if (w < 0 && errno != EINTR) {
                rc = err_set(e, PLUMB_EINTERNAL, "launch: waitpid(%d): %s", (int)pid, strerror(errno));
                goto out;
            }
            int ns = g_nsig;
            if (ns > handled) {
                int sig = g_sig, hard = handled > 0;
                if (!handled) t_sig = timer_now();
                handled = ns;
                int n = forward_signal(pid, sig, hard);
                log_info("launch: forwarded signal %d (SIG%s) to %d process group%s of attempt %d%s", sig,
                         sigabbrev_np(sig), n, n == 1 ? "" : "s", attempt + 1,
                         hard ? " including the command's own" : "");
            }
            if (handled && !killed && o->stop_grace > 0 && timer_now() - t_sig > o->stop_grace) {
                log_error("launch: the command did not end within %g s of the forwarded signal; sending SIGKILL",
                          o->stop_grace);
                forward_signal(pid, SIGKILL, 1);
                killed = 1;
            }
            struct timespec ts = {0, 20000000L};
            nanosleep(&ts, NULL);
        }
        double runtime = timer_now() - t0;
        int sig_seen = handled ? g_sig : 0;
        char desc[96];
        launch_describe_status(st, desc, sizeof desc);
        int failed = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        if (failed || sig_seen) clear_group(pid);
        reap_all();
        json_t *ev = json_pack("{s:s, s:i, s:i, s:s, s:f, s:i}", "event", failed ? "failure" : "exit", "attempt",
                               attempt, "pid", (int)pid, "status", desc, "runtime_s", runtime, "restarts", attempt);
        if (WIFEXITED(st)) json_object_set_new(ev, "exit_code", json_integer(WEXITSTATUS(st)));
        if (WIFSIGNALED(st)) {
            json_object_set_new(ev, "signal", json_integer(WTERMSIG(st)));
            const char *ab = sigabbrev_np(WTERMSIG(st));
            char nm[32];
            snprintf(nm, sizeof nm, "SIG%s", ab ? ab : "?");
            json_object_set_new(ev, "signal_name", json_string(nm));
        }
        if (sig_seen) json_object_set_new(ev, "forwarded_signal", json_integer(sig_seen));
        if ((rc = log_event(logp, ev, e))) goto out;
        res->exit_status = status_code(st);
        if (sig_seen) {
            res->outcome = LAUNCH_INTERRUPTED;
            log_info("launch: the command ended with %s after forwarded signal %d (SIG%s); not restarting",
                     desc, sig_seen, sigabbrev_np(sig_seen));
            goto out;
        }
        if (!failed) {
            res->outcome = LAUNCH_SUCCEEDED;
            log_info("launch: the command succeeded on attempt %d (%d restart%s)", attempt + 1, attempt,
                     attempt == 1 ? "" : "s");
            goto out;
        }
        if (WIFEXITED(st) && o->no_restart[WEXITSTATUS(st)]) {
            res->outcome = LAUNCH_NOT_RESTARTED;
            log_error("launch: not restarting: the command ended with %s, a status --no-restart names (plumb's 2 is "
                      "a usage or input error, which a restart would repeat)",
                      desc);
            rc = log_event(logp, json_pack("{s:s, s:i, s:i}", "event", "not_restarted", "attempt", attempt + 1,
                                           "exit_status", res->exit_status),
                           e);
            goto out;
        }
        /* a failure: forget failures older than the window, then decide */
        double now = timer_now();
        int k = 0;
        for (int i = 0; i < nfail; i++)
            if (now - fail_t[i] <= o->restart_window) fail_t[k++] = fail_t[i];
        nfail = k;
        fail_t[nfail++] = now;
        if (nfail > o->max_restarts) {
            res->outcome = LAUNCH_GAVE_UP;
            log_error("launch: giving up: the command failed %d time%s within %g s (--max-restarts %d, "
                      "--restart-window %g); last attempt: %s",
                      nfail, nfail == 1 ? "" : "s", o->restart_window, o->max_restarts, o->restart_window, desc);
            rc = log_event(logp, json_pack("{s:s, s:i, s:i, s:f, s:s, s:i}", "event", "give_up", "failures_in_window",
                                           nfail, "max_restarts", o->max_restarts, "restart_window_s",
                                           o->restart_window, "last_status", desc, "exit_status", res->exit_status),
                           e);
            goto out;
        }
        double delay = o->backoff;
        for (int i = 1; i < nfail && delay < o->backoff_max; i++) delay *= 2;
        if (o->backoff_max > 0 && delay > o->backoff_max) delay = o->backoff_max;
        log_warn("launch: attempt %d failed (%s) after %.1f s; restart %d of at most %d in %g s, in %.2f s",
                 attempt + 1, desc, runtime, nfail, o->max_restarts, o->restart_window, delay);
        if ((rc = log_event(logp, json_pack("{s:s, s:i, s:f, s:i}", "event", "restart", "attempt", attempt + 1,
                                            "backoff_s", delay, "failures_in_window", nfail), e)))
            goto out;
        sleep_unless_signal(delay);
    }
out:
    free(fail_t);
    for (int i = 0; i < NFWD; i++) sigaction(g_fwd[i], &old[i], NULL);
    if (!was_subreaper) prctl(PR_SET_CHILD_SUBREAPER, 0);
    return rc;
}
