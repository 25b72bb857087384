/* The train-<workload> check's spread verdict, on ctr's fast AUC (accept/check_train.c):
 * the device's AUC at seed s0 must lie within max(cpu seed spread, floor)
 * of the cpu's AUC at s0. Injected numbers, known answers. And the
 * workloads' accept descriptors (train/model.h, accept/workload_accept.h):
 * every literal in the table validates, ctr keeps its figures, and a bad
 * literal is refused naming what is wrong. */
#include "accept/checks.h"
#include "accept/seed_runs.h"
#include "accept/workload_accept.h"
#include "models/workloads.h"
#include "train/options.h"
#include "test.h"
#include <math.h>
#include <string.h>

TEST(train_ctr_spread_inside_band_passes)
{
    /* cpu AUCs over seeds s0, s0+1, s0+2: spread 0.760 - 0.752 = 0.008 */
    const double cpu[3] = {0.758, 0.752, 0.760};
    double spread = -1, tol = -1;
    CHECK_EQ_INT(train_spread_verdict(0.758, cpu, 3, 0.002, &spread, &tol), 1); /* same number */
    CHECK_NEAR(spread, 0.008, 1e-12);
    CHECK_NEAR(tol, 0.008, 1e-12);
    CHECK_EQ_INT(train_spread_verdict(0.7655, cpu, 3, 0.002, &spread, &tol), 1); /* +0.0075 */
    CHECK_EQ_INT(train_spread_verdict(0.7505, cpu, 3, 0.002, &spread, &tol), 1); /* -0.0075 */
    /* the boundary itself passes: dev equal to the cpu's lowest seed, 0.008 below s0's */
    CHECK_EQ_INT(train_spread_verdict(0.752, cpu, 3, 0.002, &spread, &tol), 1);
}

TEST(train_ctr_spread_outside_band_fails)
{
    const double cpu[3] = {0.758, 0.752, 0.760};
    double spread, tol;
    CHECK_EQ_INT(train_spread_verdict(0.7670, cpu, 3, 0.002, &spread, &tol), 0); /* +0.009 > 0.008 */
    CHECK_EQ_INT(train_spread_verdict(0.7490, cpu, 3, 0.002, &spread, &tol), 0); /* -0.009 */
    /* the band is centred on the cpu's AUC at s0 (cpu_aucs[0]), not on the
     * cpu's range: 0.7496 is 0.0104 from s0's 0.760; spread 0.0105 passes it,
     * spread 0.005 does not, although 0.7496 lies below both ranges alike */
    const double wide[3] = {0.760, 0.7495, 0.752};
    CHECK_EQ_INT(train_spread_verdict(0.7496, wide, 3, 0.002, &spread, &tol), 1);
    CHECK_NEAR(spread, 0.0105, 1e-12);
    const double narrow[3] = {0.760, 0.755, 0.756};
    CHECK_EQ_INT(train_spread_verdict(0.7496, narrow, 3, 0.002, &spread, &tol), 0);
    CHECK_NEAR(tol, 0.005, 1e-12);
    /* off-centre s0: 0.0049 below s0's AUC passes (spread 0.010); 0.0069
     * above it fails (spread 0.0051), whatever the other seeds' AUCs */
    const double top[3] = {0.760, 0.750, 0.7551};
    CHECK_EQ_INT(train_spread_verdict(0.7551, top, 3, 0.002, &spread, &tol), 1); /* 0.0049 <= 0.010 */
    const double mid[3] = {0.7551, 0.760, 0.7549};
    CHECK_EQ_INT(train_spread_verdict(0.7620, mid, 3, 0.002, &spread, &tol), 0); /* 0.0069 > 0.0051 */
    /* a device far off (a broken platform) */
    CHECK_EQ_INT(train_spread_verdict(0.50, cpu, 3, 0.002, &spread, &tol), 0);
}

TEST(train_ctr_spread_floor_applies)
{
    /* K seeds that look identical: the spread is 0, the tolerance is the floor */
    const double same[3] = {0.7600, 0.7600, 0.7600};
    double spread = -1, tol = -1;
    CHECK_EQ_INT(train_spread_verdict(0.7615, same, 3, 0.002, &spread, &tol), 1); /* 0.0015 <= 0.002 */
    CHECK_NEAR(spread, 0.0, 0.0);
    CHECK_NEAR(tol, 0.002, 0.0);
    CHECK_EQ_INT(train_spread_verdict(0.7585, same, 3, 0.002, &spread, &tol), 1);
    CHECK_EQ_INT(train_spread_verdict(0.7625, same, 3, 0.002, &spread, &tol), 0); /* 0.0025 > 0.002 */
    CHECK_EQ_INT(train_spread_verdict(0.7575, same, 3, 0.002, &spread, &tol), 0);
    /* a spread below the floor: still the floor */
    const double close[3] = {0.7600, 0.7605, 0.7598};
    CHECK_EQ_INT(train_spread_verdict(0.7619, close, 3, 0.002, &spread, &tol), 1);
    CHECK_NEAR(spread, 0.0007, 1e-12);
    CHECK_NEAR(tol, 0.002, 0.0);
    /* one seed: no spread at all, only the floor */
    CHECK_EQ_INT(train_spread_verdict(0.7610, close, 1, 0.002, &spread, &tol), 1);
    CHECK_EQ_INT(train_spread_verdict(0.7630, close, 1, 0.002, &spread, &tol), 0);
    CHECK_NEAR(spread, 0.0, 0.0);
    /* floor 0 and a zero spread: only the identical AUC passes */
    CHECK_EQ_INT(train_spread_verdict(0.7600, same, 3, 0.0, &spread, &tol), 1);
    CHECK_EQ_INT(train_spread_verdict(0.7601, same, 3, 0.0, &spread, &tol), 0);
    /* spread/tol may be NULL */
    CHECK_EQ_INT(train_spread_verdict(0.7601, same, 3, 0.002, NULL, NULL), 1);
}

TEST(train_ctr_spread_non_finite_fails)
{
    const double cpu[3] = {0.758, 0.752, 0.760};
    const double cpu_nan[3] = {0.758, NAN, 0.760};
    double spread = 0, tol = 0;
    CHECK_EQ_INT(train_spread_verdict(NAN, cpu, 3, 0.002, &spread, &tol), 0);
    CHECK(isnan(spread) && isnan(tol));
    CHECK_EQ_INT(train_spread_verdict(0.758, cpu_nan, 3, 0.002, &spread, &tol), 0);
    CHECK(isnan(tol));
    CHECK_EQ_INT(train_spread_verdict(INFINITY, cpu, 3, 0.002, &spread, &tol), 0);
    CHECK_EQ_INT(train_spread_verdict(0.758, cpu, 0, 0.002, &spread, &tol), 0); /* no cpu runs */
    CHECK(isnan(tol));
}

/* ---- the accept descriptors ---- */

TEST(workload_accept_every_descriptor_validates)
{
    /* every workload of the table that has a descriptor, so a new one (gpt, resnet) is checked when it lands */
    int n = 0, has_ctr = 0, has_toy = 0;
    for (int i = 0; accept_workload_at(i); i++) {
        const struct workload *wl = accept_workload_at(i);
        plumb_err e = {0};
        CHECK_MSG(workload_accept_validate(wl, &e) == PLUMB_OK, "%s: %s", wl->name, e.msg);
        has_ctr |= !strcmp(wl->name, "ctr");
        has_toy |= !strcmp(wl->name, "toy");
        n++;
    }
    CHECK(n >= 2 && has_ctr && has_toy);
    char names[256];
    accept_workload_names(names, sizeof names);
    CHECK(strstr(names, "ctr") == names && strstr(names, "toy"));
    /* a workload without accept checks, or none at all: refused naming the option and listing the good ones */
    const struct workload *wl;
    plumb_err e = {0};
    CHECK(accept_workload_find("nope", "--workload", &wl, &e) == PLUMB_EUSAGE && !wl);
    CHECK(strstr(e.msg, "--workload: 'nope' is not a workload") && strstr(e.msg, "ctr, gpt, toy"));
    CHECK(accept_workload_find("toy", "--workload", &wl, &e) == PLUMB_OK && wl == workload_find("toy"));
}

TEST(workload_accept_ctr_keeps_todays_figures)
{
    const struct workload *ctr = workload_find("ctr");
    REQUIRE(ctr && ctr->accept);
    const struct workload_accept *a = ctr->accept;
    CHECK_STREQ(a->preset, "ctr-tiny");
    CHECK_STREQ(a->metric, "auc");
    CHECK(a->higher_is_better == 1 && a->bound == 0.75 && a->spread_floor == 0.002);
    CHECK_STREQ(a->margin, "0.15%");
    struct train_config c;
    plumb_err e = {0};
    /* the fast run: ctr-tiny's schedule, 1500 steps, 50000 eval samples (what seed_runs.c hard-coded) */
    REQUIRE(accept_train_config(ctr, 0, NULL, 0, &c, &e) == PLUMB_OK);
    CHECK_STREQ(c.preset, "ctr-tiny");
    CHECK(c.steps == 1500 && c.eval_samples == 50000 && c.batch == 256 && c.warmup == 50);
    CHECK(!strcmp(c.optimizer, "adamw") && c.lr == 0.004 && c.numerics == NUMERICS_FAST && c.quiet);
    /* the golden run: 60 steps scored on 2000 samples */
    REQUIRE(accept_train_config(ctr, 1, NULL, 0, &c, &e) == PLUMB_OK);
    CHECK(c.steps == 60 && c.eval_samples == 2000 && c.numerics == NUMERICS_GOLDEN);
    /* extra options come last and win */
    struct accept_opt x[2] = {{"--device", "cpu"}, {"--steps", "7"}};
    REQUIRE(accept_train_config(ctr, 1, x, 2, &c, &e) == PLUMB_OK);
    CHECK(c.steps == 7 && !strcmp(c.device, "cpu"));
    struct accept_opt bad[1] = {{"--steps", "-3"}};
    CHECK(accept_train_config(ctr, 0, bad, 1, &c, &e) == PLUMB_EUSAGE && strstr(e.msg, "--steps"));
}

/* resnet's descriptor (src/models/resnet/workload.c): resnet-tiny's own
 * schedule judged on top-1, golden 8 steps, in --standard's default set */
TEST(workload_accept_resnet_descriptor)
{
    const struct workload *wl = workload_find("resnet");
    REQUIRE(wl && wl->accept);
    const struct workload_accept *a = wl->accept;
    CHECK_STREQ(a->preset, "resnet-tiny");
    CHECK_STREQ(a->metric, "top1");
    CHECK(a->higher_is_better == 1 && a->bound == 0.85 && a->spread_floor == 0.02);
    CHECK(accept_metric_higher(wl, "top1") == 1 && accept_metric_higher(wl, "loss") == 0);
    CHECK(accept_precision_ok(wl, DT_BF16) && accept_precision_ok(wl, DT_F16));
    CHECK(accept_bound_ok(a, 0.9) && !accept_bound_ok(a, 0.5));
    char why[256] = "";
    CHECK_MSG(accept_workload_standard(wl, why, sizeof why) == 1, "left out of --standard: %s", why);
    char desc[512];
    accept_standard_desc(desc, sizeof desc);
    const char *semi = strchr(desc, ';'), *at = strstr(desc, "resnet");
    CHECK_MSG(at && (!semi || at < semi), "--standard's default set: %s", desc);
    struct train_config c;
    plumb_err e = {0};
    /* fast: plumb train resnet's defaults (60 steps of 64, 1000 test images, no augmentation) */
    REQUIRE(accept_train_config(wl, 0, NULL, 0, &c, &e) == PLUMB_OK);
    CHECK_STREQ(c.preset, "resnet-tiny");
    CHECK(c.steps == 60 && c.batch == 64 && c.eval_samples == 1000 && c.numerics == NUMERICS_FAST);
    REQUIRE(accept_train_config(wl, 1, NULL, 0, &c, &e) == PLUMB_OK);
    CHECK(c.steps == 8 && c.eval_samples == 250 && c.numerics == NUMERICS_GOLDEN);
    char name[64];
    accept_check_name("parity", wl, name, sizeof name);
    CHECK_STREQ(name, "parity-resnet");
}

TEST(workload_accept_names_and_directions)
{
    const struct workload *ctr = workload_find("ctr"), *toy = workload_find("toy");
    REQUIRE(ctr && toy && ctr->accept && toy->accept);
    char buf[64];
    accept_check_name("parity", ctr, buf, sizeof buf);
    CHECK_STREQ(buf, "parity");
    accept_check_name("ladder", toy, buf, sizeof buf);
    CHECK_STREQ(buf, "ladder-toy");
    /* directions: the deciding metric's from higher_is_better, the others from lower_is_better */
    CHECK(accept_metric_higher(ctr, "auc") == 1 && accept_metric_higher(ctr, "logloss") == 0 &&
          accept_metric_higher(ctr, "accuracy") == 1);
    CHECK(accept_metric_higher(toy, "mse") == 0 && accept_metric_higher(toy, "rmse") == 0);
    /* a floor for a higher-is-better metric, a ceiling for a lower-is-better one; 0: no bound */
    CHECK(accept_bound_ok(ctr->accept, 0.75) && !accept_bound_ok(ctr->accept, 0.7499));
    CHECK(accept_bound_ok(toy->accept, 0.3) && !accept_bound_ok(toy->accept, 0.3001) && accept_bound_ok(toy->accept, 0.01));
    struct workload_accept none = *toy->accept;
    none.bound = 0;
    CHECK(accept_bound_ok(&none, 1e9));
    accept_bound_name(ctr->accept, buf, sizeof buf);
    CHECK_STREQ(buf, "auc_floor");
    accept_bound_name(toy->accept, buf, sizeof buf);
    CHECK_STREQ(buf, "mse_ceiling");
    /* precisions: toy is fp32 only; ctr (NULL) all three */
    CHECK(accept_precision_ok(toy, DT_F32) && !accept_precision_ok(toy, DT_BF16) && !accept_precision_ok(toy, DT_F16));
    CHECK(accept_precision_ok(ctr, DT_BF16) && accept_precision_ok(ctr, DT_F16));
    /* --standard's default set: ctr and gpt (runs in seconds, on the device); toy opts out, saying why */
    char why[256];
    CHECK(accept_workload_standard(ctr, why, sizeof why) == 1 && !why[0]);
    const struct workload *gpt = workload_find("gpt");
    REQUIRE(gpt && gpt->accept);
    CHECK(accept_workload_standard(gpt, why, sizeof why) == 1 && !why[0]);
    CHECK(accept_metric_higher(gpt, "val_loss") == 0 && accept_metric_higher(gpt, "perplexity") == 0);
    accept_bound_name(gpt->accept, buf, sizeof buf);
    CHECK_STREQ(buf, "val_loss_ceiling");
    CHECK(accept_workload_standard(toy, why, sizeof why) == 0 && strstr(why, "host"));
    struct workload slow = *ctr;
    struct workload_accept sa = *ctr->accept;
    sa.cpu_run_s = ACCEPT_STANDARD_RUN_S + 1;
    slow.accept = &sa;
    CHECK(accept_workload_standard(&slow, why, sizeof why) == 0 && strstr(why, "more than 30 s"));
    char desc[512];
    accept_standard_desc(desc, sizeof desc);
    /* the default set first (ctr, then the other workloads that qualify), then who is left out and why */
    const char *semi = strchr(desc, ';');
    CHECK_MSG(!strncmp(desc, "ctr", 3) && semi && !strncmp(semi, "; not toy: ", 11), "%s", desc);
}

TEST(workload_accept_validate_rejects_bad_literals)
{
    const struct workload *toy = workload_find("toy");
    REQUIRE(toy && toy->accept);
    static const struct preset_default bad_steps[] = {{"--steps", "-1", NULL, NULL}, {0}};
    static const struct preset_default unknown[] = {{"--no-such-option", "1", NULL, NULL}, {0}};
    /* case i edits one field (the switch below); want: what the message names */
    static const char *const want[] = {
        "margin", "lower_is_better lists the deciding metric", "not a toy preset", "--steps",
        "unknown option '--no-such-option'", "spread_floor", "precision 'fp8'", "lack fp32", "required",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        struct workload_accept a = *toy->accept;
        switch (i) {
        case 0: a.margin = "lots"; break;
        case 1: a.lower_is_better = "rmse,mse"; break;
        case 2: a.preset = "toy-huge"; break;
        case 3: a.golden = bad_steps; break;
        case 4: a.fast = unknown; break;
        case 5: a.spread_floor = 0; break;
        case 6: a.precisions = "fp32,fp8"; break;
        case 7: a.precisions = "bf16"; break;
        case 8: a.label = NULL; break;
        }
        struct workload w = *toy;
        w.accept = &a;
        plumb_err e = {0};
        CHECK_MSG(workload_accept_validate(&w, &e) == PLUMB_EUSAGE, "case %zu accepted", i);
        CHECK_MSG(strstr(e.msg, want[i]) != NULL, "case %zu: '%s' (want '%s')", i, e.msg, want[i]);
    }
}

TEST(seed_runs_follow_the_descriptor)
{
    /* the seed runs are the accept preset's fast runs: the setting names the preset and its resolved schedule */
    struct seed_run_cfg c;
    char d[256];
    seed_run_cfg_defaults(&c, "cpu", 1);
    CHECK(seed_run_workload(&c) == workload_find("ctr"));
    seed_run_describe(&c, d, sizeof d);
    CHECK_MSG(!strcmp(d, "ctr-tiny, fast fp32, strict fp32, lr 0.004, 1500 steps"), "%s", d);
    /* a planted learning-rate factor multiplies the lr the preset resolves to */
    c.lr_scale = 3;
    seed_run_describe(&c, d, sizeof d);
    CHECK_MSG(strstr(d, "lr 0.012,") != NULL, "%s", d);
    c.wl = workload_find("toy");
    c.lr_scale = 1;
    c.steps = 40;
    seed_run_describe(&c, d, sizeof d);
    CHECK_MSG(!strcmp(d, "toy-bn, fast fp32, strict fp32, lr 0.02, 40 steps"), "%s", d);
    /* a precision the workload lacks is named, not trained */
    c.precision = DT_BF16;
    seed_run_describe(&c, d, sizeof d);
    CHECK_MSG(strstr(d, "toy trains in fp32 only, not bf16") != NULL, "%s", d);
}
