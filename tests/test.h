/* A small test harness: tests/test_*.c define TEST(name) { ... } blocks; the
 * runner (tests/test_main.c) runs all, or those whose name contains argv[1],
 * and ends with the line "N passed, N failed" (exit 1 on any failure).
 * PLUMB_TEST_DEVICE=cuda runs device-parametrised tests on that device;
 * tests that need a missing device call TEST_SKIP("why"). */
#ifndef PLUMB_TEST_H
#define PLUMB_TEST_H
#include <math.h>
#include <stdio.h>
#include <string.h>

struct test_case {
    const char *name;
    void (*fn)(void);
    struct test_case *next;
};
void test_register(struct test_case *t);
/* state of the running test */
extern int test_failed_now, test_skipped_now;
extern char test_skip_reason[256];
/* A scratch directory unique to this test run (removed at the end unless
 * PLUMB_TEST_KEEP=1); tests write real files there. */
const char *test_tmpdir(void);
/* "cpu" unless PLUMB_TEST_DEVICE is set. */
const char *test_device(void);

#define TEST(name)                                                                  \
    static void test_fn_##name(void);                                               \
    static struct test_case test_case_##name = {#name, test_fn_##name, NULL};       \
    __attribute__((constructor)) static void test_reg_##name(void)                  \
    {                                                                               \
        test_register(&test_case_##name);                                           \
    }                                                                               \
    static void test_fn_##name(void)

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
            test_failed_now = 1;                                                    \
        }                                                                           \
    } while (0)

#define CHECK_MSG(cond, ...)                                                        \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            test_failed_now = 1;                                                    \
        }                                                                           \
    } while (0)

/* stops the test on failure */
#define REQUIRE(cond)                                                               \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  %s:%d: REQUIRE(%s) failed\n", __FILE__, __LINE__, #cond); \
            test_failed_now = 1;                                                    \
            return;                                                                 \
        }                                                                           \
    } while (0)

/* REQUIRE with a message (printf arguments) */
#define REQUIRE_MSG(cond, ...)                                                      \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "  %s:%d: REQUIRE(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            test_failed_now = 1;                                                    \
            return;                                                                 \
        }                                                                           \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                          \
    do {                                                                            \
        long long va_ = (long long)(a), vb_ = (long long)(b);                       \
        if (va_ != vb_) {                                                           \
            fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a, #b, va_, vb_); \
            test_failed_now = 1;                                                    \
        }                                                                           \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                       \
    do {                                                                            \
        double va_ = (double)(a), vb_ = (double)(b);                                \
        if (!(fabs(va_ - vb_) <= (tol))) {                                          \
            fprintf(stderr, "  %s:%d: |%s - %s| <= %g failed: %.17g vs %.17g\n", __FILE__, __LINE__, #a, #b, (double)(tol), va_, vb_); \
            test_failed_now = 1;                                                    \
        }                                                                           \
    } while (0)

#define CHECK_STREQ(a, b)                                                           \
    do {                                                                            \
        const char *sa_ = (a), *sb_ = (b);                                          \
        if (!sa_ || !sb_ || strcmp(sa_, sb_)) {                                     \
            fprintf(stderr, "  %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a, #b, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)"); \
            test_failed_now = 1;                                                    \
        }                                                                           \
    } while (0)

#define TEST_SKIP(...)                                                              \
    do {                                                                            \
        snprintf(test_skip_reason, sizeof test_skip_reason, __VA_ARGS__);           \
        test_skipped_now = 1;                                                       \
        return;                                                                     \
    } while (0)

#endif
