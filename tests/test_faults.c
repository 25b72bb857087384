/* Torn checkpoint writes (fault tolerance): a process killed between writing
 * a checkpoint and renaming it into place, and a checkpoint truncated by
 * hand, are never loaded; the previous checkpoint is. */
#include "test.h"
#include "core/file.h"
#include "train/ckpt.h"
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

static int write_step(const char *dir, long step, float *params, size_t n, plumb_err *e)
{
    char meta[64];
    snprintf(meta, sizeof meta, "{\"step\": %ld}", step);
    params[0] = (float)step;
    struct ckpt_section sec[2] = {{"meta", meta, strlen(meta)}, {"params", params, n * sizeof(float)}};
    return ckpt_write(dir, step, sec, 2, 0, NULL, e);
}

static long latest(const char *dir)
{
    plumb_err e = {0};
    struct ckpt c;
    int found = 0;
    if (ckpt_load_latest(dir, &c, &found, &e) || !found) return -1;
    size_t len;
    const float *p = ckpt_find(&c, "params", &len);
    long s = (p && (long)p[0] == c.step) ? c.step : -2; /* the content is that step's */
    ckpt_free(&c);
    return s;
}

TEST(torn_checkpoint_killed_before_rename_is_never_loaded)
{
    plumb_err e = {0};
    char dir[512];
    REQUIRE(!file_join(dir, sizeof dir, test_tmpdir(), "torn", &e));
    static float params[20000];
    for (size_t i = 0; i < 20000; i++) params[i] = (float)i;
    REQUIRE(write_step(dir, 10, params, 20000, &e) == 0);
    REQUIRE(write_step(dir, 20, params, 20000, &e) == 0);
    /* a real process writes step 30 and is killed (SIGKILL) after the data
     * is written and fsync'ed, before the rename */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        file_test_fail_before_rename = 1;
        plumb_err ce = {0};
        write_step(dir, 30, params, 20000, &ce);
        raise(SIGKILL);
        _exit(0);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* the complete-but-unrenamed file is on disk... */
    int tmp_files = 0;
    DIR *d = opendir(dir);
    REQUIRE(d);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strstr(de->d_name, "ckpt-0000000030.plumb.tmp")) tmp_files++;
    closedir(d);
    CHECK_EQ_INT(tmp_files, 1);
    /* ...and never loaded or listed */
    long *steps;
    int n;
    REQUIRE(ckpt_list(dir, &steps, &n, &e) == 0);
    CHECK_EQ_INT(n, 2);
    if (n == 2) CHECK_EQ_INT(steps[0], 20);
    free(steps);
    CHECK_EQ_INT(latest(dir), 20);
    /* a later write of the same step is not disturbed by the leftover */
    REQUIRE(write_step(dir, 30, params, 20000, &e) == 0);
    CHECK_EQ_INT(latest(dir), 30);
}

TEST(torn_checkpoint_truncated_by_hand_is_never_loaded)
{
    plumb_err e = {0};
    char dir[512], p20[4096];
    REQUIRE(!file_join(dir, sizeof dir, test_tmpdir(), "trunc", &e));
    static float params[5000];
    for (size_t i = 0; i < 5000; i++) params[i] = (float)i;
    REQUIRE(write_step(dir, 10, params, 5000, &e) == 0);
    REQUIRE(write_step(dir, 20, params, 5000, &e) == 0);
    REQUIRE(ckpt_path(dir, 20, p20, sizeof p20, &e) == 0);
    struct stat sb;
    REQUIRE(stat(p20, &sb) == 0);
    off_t full = sb.st_size;
    /* every cut: empty, inside the magic, the header, the section table,
     * the data, one byte short */
    off_t cuts[] = {0, 5, 20, 40, 100, full / 2, full - 4, full - 1};
    char *orig;
    size_t olen;
    REQUIRE(file_read_all(p20, &orig, &olen, &e) == 0);
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        REQUIRE(file_write_atomic(p20, orig, olen, &e) == 0);
        CHECK_EQ_INT(latest(dir), 20);
        REQUIRE(truncate(p20, cuts[i]) == 0);
        struct ckpt c;
        CHECK_MSG(ckpt_read(p20, &c, &e) == PLUMB_ECORRUPT, "cut at %ld of %ld read as valid", (long)cuts[i], (long)full);
        CHECK_MSG(latest(dir) == 10, "cut at %ld of %ld: newest loaded %ld", (long)cuts[i], (long)full, latest(dir));
    }
    /* and a file that grew (garbage appended) is not trusted either */
    REQUIRE(file_write_atomic(p20, orig, olen, &e) == 0);
    FILE *f = fopen(p20, "ab");
    REQUIRE(f);
    fputs("garbage", f);
    fclose(f);
    CHECK_EQ_INT(latest(dir), 10);
    free(orig);
}
