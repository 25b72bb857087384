/* Test runner: see tests/test.h. */
#include "test.h"
#include "core/timer.h"
#include <stdlib.h>
#include <unistd.h>

int test_failed_now, test_skipped_now;
char test_skip_reason[256];
static struct test_case *g_head, **g_tail = &g_head;
static char g_tmp[256];

void test_register(struct test_case *t)
{
    *g_tail = t;
    g_tail = &t->next;
}

const char *test_tmpdir(void)
{
    if (!g_tmp[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(g_tmp, sizeof g_tmp, "%s/plumb-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(g_tmp)) {
            perror("mkdtemp");
            exit(3);
        }
    }
    return g_tmp;
}

const char *test_device(void)
{
    const char *d = getenv("PLUMB_TEST_DEVICE");
    return d && *d ? d : "cpu";
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0, skipped = 0;
    for (struct test_case *t = g_head; t; t = t->next) {
        if (filter && !strstr(t->name, filter)) continue;
        test_failed_now = test_skipped_now = 0;
        double t0 = timer_now();
        t->fn();
        double dt = timer_now() - t0;
        if (test_failed_now) {
            failed++;
            printf("FAIL %s (%.2fs)\n", t->name, dt);
        } else if (test_skipped_now) {
            skipped++;
            printf("skip %s: %s\n", t->name, test_skip_reason);
        } else {
            passed++;
            printf("ok   %s (%.2fs)\n", t->name, dt);
        }
        fflush(stdout);
    }
    if (g_tmp[0] && !getenv("PLUMB_TEST_KEEP")) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
