/* Child jobs of accept checks (child.h). */
#include "accept/child.h"
#include "core/timer.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int accept_find_plumb(char *out, size_t n, plumb_err *e)
{
    const char *env = getenv("PLUMB");
    if (env && *env && access(env, X_OK) == 0) {
        snprintf(out, n, "%s", env);
        return PLUMB_OK;
    }
    char self[PATH_MAX];
    ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
    if (l <= 0) return err_set(e, PLUMB_EINTERNAL, "cannot read /proc/self/exe");
    self[l] = 0;
    char *slash = strrchr(self, '/');
    const char *base = slash ? slash + 1 : self;
    if (!strcmp(base, "plumb")) {
        snprintf(out, n, "%s", self);
        return PLUMB_OK;
    }
    if (slash) *slash = 0;
    snprintf(out, n, "%s/plumb", self);
    if (access(out, X_OK) != 0) return err_set(e, PLUMB_EINTERNAL, "no plumb binary next to %s (set PLUMB=path/to/plumb)", self);
    return PLUMB_OK;
}

int accept_have_mpirun(void)
{
    const char *path = getenv("PATH");
    if (!path) return 0;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/mpirun", d);
        if (access(p, X_OK) == 0) return 1;
    }
    return 0;
}

int accept_run_child(char *const *argv, const char *log_path, double limit_s, int *exit_code, int *timed_out,
                     plumb_err *e)
{
    *exit_code = -1;
    *timed_out = 0;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return err_set(e, PLUMB_EIO, "cannot open '%s': %s", log_path, strerror(errno));
    char head[4096];
    size_t n = (size_t)snprintf(head, sizeof head, "$");
    for (char *const *a = argv; *a && n < sizeof head; a++) n += (size_t)snprintf(head + n, sizeof head - n, " %s", *a);
    if (n < sizeof head) n += (size_t)snprintf(head + n, sizeof head - n, "\n");
    if (n > sizeof head) n = sizeof head;
    if (write(fd, head, n) < 0) {
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return err_set(e, PLUMB_EIO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        execvp(argv[0], argv);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    setpgid(pid, pid);
    double t0 = timer_now(), t_term = 0;
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
            break;
        }
        if (w < 0 && errno != EINTR) return err_set(e, PLUMB_EIO, "waitpid: %s", strerror(errno));
        double el = timer_now() - t0;
        if (!*timed_out && el > limit_s) {
            *timed_out = 1;
            t_term = el;
            kill(-pid, SIGTERM);
        }
        if (*timed_out && el - t_term > 10) kill(-pid, SIGKILL);
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    return PLUMB_OK;
}
