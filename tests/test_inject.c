/* Fault-injection spec parsing and firing rules (train/inject.h). */
#include "test.h"
#include "train/inject.h"
#include <stdlib.h>

TEST(inject_parse_and_fire_once)
{
    plumb_err e = {0};
    REQUIRE(inject_parse("oom@3:1x2,nan@5,hang@7:0,exit@9:1,corrupt-checkpoint@4", &e) == 0);
    CHECK(inject_active());
    /* wrong step, wrong rank, wrong kind: nothing */
    CHECK_EQ_INT(inject_take(INJECT_OOM, 2, 1), 0);
    CHECK_EQ_INT(inject_take(INJECT_OOM, 3, 0), 0);
    CHECK_EQ_INT(inject_take(INJECT_NAN, 3, 1), 0);
    /* oom x2 on rank 1 at step 3, once */
    CHECK_EQ_INT(inject_take(INJECT_OOM, 3, 1), 2);
    CHECK_EQ_INT(inject_take(INJECT_OOM, 3, 1), 0);
    /* nan without rank fires on whichever rank asks first, once per process */
    CHECK_EQ_INT(inject_take(INJECT_NAN, 5, 3), 1);
    CHECK_EQ_INT(inject_take(INJECT_NAN, 5, 3), 0);
    CHECK_EQ_INT(inject_take(INJECT_HANG, 7, 1), 0);
    CHECK_EQ_INT(inject_take(INJECT_HANG, 7, 0), 1);
    CHECK_EQ_INT(inject_take(INJECT_EXIT, 9, 1), 1);
    CHECK_EQ_INT(inject_take(INJECT_CORRUPT_CKPT, 2, 0), 0);
    CHECK(inject_active());
    CHECK_EQ_INT(inject_take(INJECT_CORRUPT_CKPT, 4, 0), 1);
    CHECK(!inject_active());
    REQUIRE(inject_parse(NULL, &e) == 0);
    CHECK(!inject_active());
    CHECK_EQ_INT(inject_take(INJECT_OOM, 3, 1), 0);
}

TEST(inject_corrupt_without_step_fires_at_first_checkpoint)
{
    plumb_err e = {0};
    REQUIRE(inject_parse("corrupt-checkpoint", &e) == 0);
    CHECK_EQ_INT(inject_take(INJECT_CORRUPT_CKPT, 10, 0), 1);
    CHECK_EQ_INT(inject_take(INJECT_CORRUPT_CKPT, 20, 0), 0);
    REQUIRE(inject_parse("", &e) == 0);
    CHECK(!inject_active());
}

TEST(inject_rejects_bad_specs_naming_them)
{
    static const char *bad[] = {"boom@3", "oom", "oom@", "oom@-1", "hang@3", "exit@4", "nan@3x2",
                                "oom@3:1x0", "oom@3:1y", "oom@3:", ",", "hang@3:a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        plumb_err e = {0};
        int rc = inject_parse(bad[i], &e);
        CHECK_MSG(rc == PLUMB_EUSAGE, "'%s' accepted", bad[i]);
        CHECK_MSG(strstr(e.msg, "--inject") != NULL, "'%s': %s", bad[i], e.msg);
    }
    /* a bad spec leaves the previous table alone */
    plumb_err e = {0};
    REQUIRE(inject_parse("exit@2:0", &e) == 0);
    CHECK(inject_parse("exit@2", &e) == PLUMB_EUSAGE);
    CHECK_EQ_INT(inject_take(INJECT_EXIT, 2, 0), 1);
    inject_parse(NULL, &e);
}

TEST(inject_not_armed_on_launch_restart)
{
    plumb_err e = {0};
    setenv("PLUMB_LAUNCH_ATTEMPT", "1", 1);
    int rc = inject_parse("exit@3:0", &e);
    int active = inject_active();
    CHECK(inject_parse("exit@3", &e) == PLUMB_EUSAGE); /* still checked */
    setenv("PLUMB_LAUNCH_ATTEMPT", "0", 1);
    REQUIRE(rc == 0);
    CHECK(!active);
    REQUIRE(inject_parse("exit@3:0", &e) == 0);
    CHECK(inject_active());
    unsetenv("PLUMB_LAUNCH_ATTEMPT");
    inject_parse(NULL, &e);
}
