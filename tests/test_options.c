/* The option table of plumb train (train/options.h): preset defaults from
 * the workload's table, given values win, validation names the option, and
 * a config turns back into the command line that rebuilds it. */
#include "test.h"
#include "cli/args.h"
#include "models/workloads.h"
#include "train/options.h"
#include <math.h>
#include <string.h>

static int set(struct train_config *c, const char *name, const char *v)
{
    plumb_err e = {0};
    return train_option_set(c, name, v, &e);
}

TEST(train_options_preset_defaults)
{
    const struct workload *wl = workload_find("ctr");
    REQUIRE(wl != NULL);
    struct train_config c;
    plumb_err e = {0};
    train_config_defaults(&c, wl);
    REQUIRE(train_config_finish(&c, &e) == 0);
    CHECK(!strcmp(c.preset, "ctr-tiny") && c.steps == 1500 && c.batch == 256 && c.warmup == 50);
    CHECK(!strcmp(c.optimizer, "adamw") && c.lr == 0.004);
    train_config_defaults(&c, wl);
    REQUIRE(set(&c, "--optimizer", "sgd") == 0);
    REQUIRE(train_config_finish(&c, &e) == 0);
    CHECK(c.lr == 0.2); /* the preset's lr for the optimizer given */
    train_config_defaults(&c, wl);
    REQUIRE(set(&c, "--preset", "dlrm-kaggle") == 0 && set(&c, "--lr", "0.03") == 0);
    REQUIRE(train_config_finish(&c, &e) == 0);
    CHECK(c.batch == 2048 && c.steps == 1000 && c.warmup == 100 && !strcmp(c.optimizer, "sgd") && c.lr == 0.03);
    CHECK(c.numerics == NUMERICS_FAST && c.precision == DT_F32);
    /* the toy's presets set momentum and weight decay */
    const struct workload *toy = workload_find("toy");
    REQUIRE(toy != NULL);
    train_config_defaults(&c, toy);
    REQUIRE(set(&c, "--preset", "toy-bn") == 0 && train_config_finish(&c, &e) == 0);
    CHECK(c.momentum == 0.9 && c.weight_decay == 0.0005 && c.batch == 64);
}

TEST(train_options_validation_names_the_option)
{
    const struct workload *wl = workload_find("ctr");
    struct train_config c;
    train_config_defaults(&c, wl);
    const char *bad[][2] = {{"--steps", "-1"}, {"--lr", "-0.5"}, {"--lr", "0"},        {"--warmup", "-2"},
                            {"--max-rows", "-2"}, {"--eval-every", "-3"}, {"--checkpoint-every", "-5"},
                            {"--eval-fraction", "0"}, {"--momentum", "1"}, {"--rows", "-1"},
                            {"--numerics", "exact"}, {"--steps", "5x"}, {"--lr", "nan"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        plumb_err e = {0};
        int rc = train_option_set(&c, bad[i][0], bad[i][1], &e);
        CHECK_MSG(rc == PLUMB_EUSAGE && strstr(e.msg, bad[i][0]), "%s %s: rc %d, '%s'", bad[i][0], bad[i][1], rc, e.msg);
    }
    plumb_err e = {0};
    CHECK(train_option_set(&c, "--hidden", "8", &e) == PLUMB_EUSAGE); /* the toy's, not ctr's */
    CHECK(set(&c, "--steps", "0") == 0 && c.steps == 0);
    CHECK(set(&c, "--eval-fraction", "0.5") == 0 && c.eval_fraction == 0.5);
}

TEST(train_options_argv_round_trip)
{
    const struct workload *wl = workload_find("ctr");
    struct train_config c, d;
    plumb_err e = {0};
    train_config_defaults(&c, wl);
    const char *v[][2] = {{"--preset", "dlrm-kaggle"}, {"--rows", "77"},        {"--steps", "40"},
                          {"--lr", "0.2"},             {"--numerics", "golden"}, {"--step-timeout", "12.5"},
                          {"--resume", NULL},          {"--checkpoint-dir", "/tmp/x y"}, {"--seed", "18446744073709551"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) REQUIRE(set(&c, v[i][0], v[i][1]) == 0);
    REQUIRE(train_config_finish(&c, &e) == 0);
    char *argv[64], buf[4096];
    int n = train_config_argv(&c, argv, 64, buf, sizeof buf);
    REQUIRE(n == 17); /* 8 options with a value, 1 flag */
    train_config_defaults(&d, wl);
    for (int i = 0; i < n; i++) {
        int flag = !strcmp(argv[i], "--resume");
        REQUIRE(set(&d, argv[i], flag ? NULL : argv[i + 1]) == 0);
        if (!flag) i++;
    }
    REQUIRE(train_config_finish(&d, &e) == 0);
    CHECK(!strcmp(d.preset, "dlrm-kaggle") && !strcmp(d.wl_opt[0], "77") && d.steps == 40 && d.lr == 0.2);
    CHECK(d.numerics == NUMERICS_GOLDEN && d.watchdog_s == 12.5 && d.resume && !strcmp(d.ckpt_dir, "/tmp/x y"));
    CHECK(d.seed == 18446744073709551ull && d.batch == 2048);
    /* only what was given travels: the preset's defaults stay the preset's */
    for (int i = 0; i < n; i++) CHECK(strcmp(argv[i], "--batch") && strcmp(argv[i], "--watchdog-timeout"));
    CHECK(train_config_argv(&c, argv, 4, buf, sizeof buf) == -1);
}

/* cli/args.h: an option's target holds its default, or NULL for a string
 * without one, whatever it held before the parse (bench ceilings left its
 * --json target unset, and an ASan build wrote the figures to a file named
 * after the stack's garbage) */
TEST(args_parse_sets_every_target)
{
    const char *out = "garbage", *mode = "garbage";
    long n = -7;
    int flag = 5;
    const struct opt opts[] = {
        {"--json", OPT_STR, &out, NULL, "a file", NULL, "FILE"},
        {"--mode", OPT_CHOICE, &mode, "fast", "a mode", "fast|golden", NULL},
        {"--n", OPT_INT, &n, "3", "a count", NULL, "N"},
        {"--flag", OPT_FLAG, &flag, NULL, "a flag", NULL, NULL},
        {0},
    };
    char a0[] = "plumb", a1[] = "--json", a2[] = "x.json";
    char *argv1[] = {a0, NULL}, *argv2[] = {a0, a1, a2, NULL};
    plumb_err e = {0};
    REQUIRE(args_parse("plumb t [options]", "a test", opts, 1, argv1, NULL, 0, NULL, &e) == 0);
    CHECK(out == NULL && mode && !strcmp(mode, "fast") && n == 3 && flag == 0);
    REQUIRE(args_parse("plumb t [options]", "a test", opts, 3, argv2, NULL, 0, NULL, &e) == 0);
    CHECK(out && !strcmp(out, "x.json"));
}
