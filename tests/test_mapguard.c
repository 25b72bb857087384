/* core/mapguard.h: a read out of a mapped file that was truncated is an
 * error naming the file when it runs under a guard, on any thread, as often
 * as it happens; a SIGBUS anywhere else still ends the process with SIGBUS. */
#include "test.h"
#include "core/mapguard.h"
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* a file of `pages` pages of byte 0x5a, mapped whole, then cut to one page:
 * pages 1.. of the mapping now lie past the end of the file */
struct cut_map {
    char path[512];
    char *map;
    size_t len, page;
};

static int cut_map_make(struct cut_map *c, const char *name, int pages)
{
    c->page = (size_t)sysconf(_SC_PAGESIZE);
    c->len = c->page * (size_t)pages;
    snprintf(c->path, sizeof c->path, "%s/%s", test_tmpdir(), name);
    int fd = open(c->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    char *buf = malloc(c->len);
    int ok = buf != NULL;
    if (ok) memset(buf, 0x5a, c->len);
    ok = ok && write(fd, buf, c->len) == (ssize_t)c->len;
    free(buf);
    c->map = ok ? mmap(NULL, c->len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    ok = ok && c->map != MAP_FAILED && ftruncate(fd, (off_t)c->page) == 0;
    close(fd);
    return ok ? 0 : -1;
}

static void cut_map_free(struct cut_map *c)
{
    if (c->map && c->map != MAP_FAILED) munmap(c->map, c->len);
    unlink(c->path);
}

/* n bytes from src (inside c's mapping) into dst under a guard, as the
 * readers of models/gpt/data.c and models/ctr/data.c do */
static int guarded_copy(const struct cut_map *c, const char *src, size_t n, char *dst, plumb_err *e)
{
    struct mapguard g;
    mapguard_prepare(&g, c->map, c->len);
    if (sigsetjmp(g.jb, 0)) return mapguard_error(&g, c->path, "test file", e);
    mapguard_arm(&g);
    memcpy(dst, src, n);
    mapguard_disarm(&g);
    return PLUMB_OK;
}

struct thread_read {
    const struct cut_map *c;
    int rc;
    plumb_err e;
};

static void *read_on_thread(void *arg)
{
    struct thread_read *t = arg;
    char buf[64];
    t->rc = guarded_copy(t->c, t->c->map + 2 * t->c->page + 100, sizeof buf, buf, &t->e);
    return NULL;
}

TEST(mapguard_truncated_read_is_an_error_naming_the_file)
{
    plumb_err e = {0};
    REQUIRE(mapguard_init(&e) == 0);
    struct cut_map c;
    REQUIRE(cut_map_make(&c, "cut.bin", 3) == 0);
    char buf[256];
    /* the page still in the file reads normally under the guard */
    memset(buf, 0, sizeof buf);
    CHECK_EQ_INT(guarded_copy(&c, c.map + 8, sizeof buf, buf, &e), PLUMB_OK);
    CHECK(buf[0] == 0x5a && buf[sizeof buf - 1] == 0x5a);
    /* a read that runs off the file's new end mid-copy */
    CHECK_EQ_INT(guarded_copy(&c, c.map + c.page - 16, sizeof buf, buf, &e), PLUMB_EIO);
    CHECK_MSG(strstr(e.msg, c.path) != NULL, "message names the file: %s", e.msg);
    CHECK_MSG(strstr(e.msg, "shrank while being read") != NULL, "%s", e.msg);
    char now[64];
    snprintf(now, sizeof now, "%zu bytes when opened, %zu bytes now", c.len, c.page);
    CHECK_MSG(strstr(e.msg, now) != NULL, "expected '%s' in: %s", now, e.msg);
    /* the faulting byte: past the end, inside what the copy read (memcpy
     * may load its tail first) */
    const char *at = strstr(e.msg, "the read at byte ");
    size_t off = 0;
    CHECK_MSG(at && sscanf(at, "the read at byte %zu", &off) == 1, "%s", e.msg);
    CHECK_MSG(off >= c.page && off < c.page + sizeof buf - 16, "fault at byte %zu (expected in [%zu, %zu))", off, c.page,
              c.page + sizeof buf - 16);
    /* again, and again: the handler stays, and SIGBUS is not left blocked
     * after the jump (a blocked SIGBUS from a fault kills the process) */
    for (int i = 0; i < 3; i++) {
        err_clear(&e);
        CHECK_EQ_INT(guarded_copy(&c, c.map + 2 * c.page, 8, buf, &e), PLUMB_EIO);
    }
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    CHECK(!sigismember(&mask, SIGBUS));
    /* on another thread, its own guard (thread-local) */
    struct thread_read t = {&c, -1, {0}};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, read_on_thread, &t) == 0);
    pthread_join(th, NULL);
    CHECK_EQ_INT(t.rc, PLUMB_EIO);
    CHECK_MSG(strstr(t.e.msg, c.path) != NULL, "%s", t.e.msg);
    /* the good page still reads */
    CHECK_EQ_INT(guarded_copy(&c, c.map, 16, buf, &e), PLUMB_OK);
    cut_map_free(&c);
}

/* Runs fn in a child; the child's wait status. */
static int in_child(void (*fn)(const struct cut_map *, const struct cut_map *), const struct cut_map *a,
                    const struct cut_map *b)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10); /* a hang is the failure, not the runner's problem */
        fn(a, b);
        _exit(0);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return st;
}

/* no guard armed: the fault is not ours */
static void touch_unguarded(const struct cut_map *a, const struct cut_map *b)
{
    (void)b;
    volatile const char *p = a->map + 2 * a->page;
    (void)*p;
}

/* a guard armed over mapping b, the fault in mapping a: not ours either */
static void touch_outside_guard(const struct cut_map *a, const struct cut_map *b)
{
    struct mapguard g;
    mapguard_prepare(&g, b->map, b->len);
    if (sigsetjmp(g.jb, 0)) _exit(42); /* swallowed: the bug this checks for */
    mapguard_arm(&g);
    volatile const char *p = a->map + 2 * a->page;
    (void)*p;
    mapguard_disarm(&g);
}

/* and the same guard does catch its own range in the child, so the two
 * deaths above are the range check's doing, not a handler that is absent */
static void touch_inside_guard(const struct cut_map *a, const struct cut_map *b)
{
    (void)b;
    char buf[8];
    plumb_err e;
    _exit(guarded_copy(a, a->map + 2 * a->page, sizeof buf, buf, &e) == PLUMB_EIO ? 7 : 1);
}

/* What "died of SIGBUS" looks like here: the signal itself; under
 * AddressSanitizer (PLUMB_ASAN=1, make asan) the disposition the handler
 * hands back to is the sanitizer's, which reports the fault and exits 1. */
static int died_of_sigbus(int st)
{
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS) return 1;
    const char *asan = getenv("PLUMB_ASAN");
    return asan && !strcmp(asan, "1") && WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 42;
}

TEST(mapguard_other_sigbus_still_crashes)
{
    plumb_err e = {0};
    REQUIRE(mapguard_init(&e) == 0);
    struct cut_map a, b;
    REQUIRE(cut_map_make(&a, "a.bin", 3) == 0);
    REQUIRE(cut_map_make(&b, "b.bin", 3) == 0);
    int st = in_child(touch_unguarded, &a, &b);
    CHECK_MSG(died_of_sigbus(st), "unguarded fault: wait status 0x%x (expected death by SIGBUS)", st);
    st = in_child(touch_outside_guard, &a, &b);
    CHECK_MSG(died_of_sigbus(st), "fault outside the armed guard's range: wait status 0x%x (exit 42: swallowed)", st);
    st = in_child(touch_inside_guard, &a, &b);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 7, "fault inside the guard in a child: wait status 0x%x", st);
    cut_map_free(&a);
    cut_map_free(&b);
}
