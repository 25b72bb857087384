/* The train-<workload> check's spread verdict, on ctr's fast AUC (accept/check_train.c):
 * the device's AUC at seed s0 must lie within max(cpu seed spread, floor)
 * of the cpu's AUC at s0. Injected numbers, known answers. */
#include "accept/checks.h"
#include "test.h"
#include <math.h>

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
