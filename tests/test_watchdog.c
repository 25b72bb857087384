/* Watchdog: a block held past the timeout ends the process with
 * WATCHDOG_EXIT_CODE after logging what it waited on and running the abort
 * hook; blocks that finish in time do not. Run in forked children because a
 * firing watchdog ends the process. */
#include "test.h"
#include "core/watchdog.h"
#include "core/file.h"
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *g_hook_file;
static void hook(void *arg)
{
    int fd = open(g_hook_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        const char *s = arg;
        if (write(fd, s, strlen(s)) < 0) { /* nothing to do in a dying child */ }
        close(fd);
    }
}

/* Forks; the child runs fn with stderr sent to errpath and _exits 0 if fn
 * returns. Returns the child's wait status. */
static int in_child(void (*fn)(void), const char *errpath)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 2);
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return st;
}

static void hang_in_collective(void)
{
    watchdog_set_abort_hook(hook, "aborted");
    watchdog_start(0.3);
    watchdog_enter("step 7");
    watchdog_enter("allreduce grads bucket 3");
    sleep(30); /* the watchdog ends the process long before */
    _exit(0);
}

static void quick_blocks(void)
{
    watchdog_start(1.0);
    for (int i = 0; i < 20; i++) {
        watchdog_enter("step");
        watchdog_enter("allreduce");
        usleep(10000);
        watchdog_leave();
        watchdog_leave();
    }
    usleep(1200000); /* idle time outside any block never fires */
    watchdog_stop();
    watchdog_enter("after stop");
    usleep(500000);
    watchdog_leave();
    _exit(0);
}

static void slow_step_quick_collectives(void)
{
    watchdog_start(0.3);
    watchdog_enter("step 12");
    for (int i = 0; i < 100; i++) {
        watchdog_enter("allreduce");
        usleep(5000);
        watchdog_leave();
        usleep(5000);
    }
    _exit(0);
}

static void off_when_zero(void)
{
    watchdog_start(0);
    watchdog_enter("x");
    usleep(300000);
    watchdog_leave();
    _exit(0);
}

TEST(watchdog_fires_naming_innermost_wait_and_runs_hook)
{
    char err[512], hk[512];
    plumb_err e = {0};
    REQUIRE(file_join(err, sizeof err, test_tmpdir(), "wd_err.txt", &e) == 0);
    REQUIRE(file_join(hk, sizeof hk, test_tmpdir(), "wd_hook.txt", &e) == 0);
    g_hook_file = hk;
    int st = in_child(hang_in_collective, err);
    REQUIRE(WIFEXITED(st));
    CHECK_EQ_INT(WEXITSTATUS(st), WATCHDOG_EXIT_CODE);
    char *txt = NULL, *h = NULL;
    size_t n;
    REQUIRE(file_read_all(err, &txt, &n, &e) == 0);
    CHECK_MSG(strstr(txt, "allreduce grads bucket 3") != NULL, "%s", txt);
    CHECK_MSG(strstr(txt, "step 7") != NULL, "%s", txt);
    REQUIRE(file_read_all(hk, &h, &n, &e) == 0);
    CHECK_STREQ(h, "aborted");
    free(txt);
    free(h);
}

TEST(watchdog_quiet_when_blocks_finish_in_time)
{
    char err[512];
    plumb_err e = {0};
    REQUIRE(file_join(err, sizeof err, test_tmpdir(), "wd_err2.txt", &e) == 0);
    int st = in_child(quick_blocks, err);
    REQUIRE(WIFEXITED(st));
    CHECK_EQ_INT(WEXITSTATUS(st), 0);
    st = in_child(off_when_zero, err);
    REQUIRE(WIFEXITED(st));
    CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

TEST(watchdog_fires_on_slow_step_with_quick_collectives)
{
    char err[512];
    plumb_err e = {0};
    REQUIRE(file_join(err, sizeof err, test_tmpdir(), "wd_err3.txt", &e) == 0);
    int st = in_child(slow_step_quick_collectives, err);
    REQUIRE(WIFEXITED(st));
    CHECK_EQ_INT(WEXITSTATUS(st), WATCHDOG_EXIT_CODE);
    char *txt = NULL;
    size_t n;
    REQUIRE(file_read_all(err, &txt, &n, &e) == 0);
    CHECK_MSG(strstr(txt, "step 12") != NULL, "%s", txt);
    free(txt);
}
