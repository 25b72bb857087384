/* The bench tables' forward/backward split (cli/bench.h): an op-by-op step
 * gives the forward and the rest; a graphed one gives only the whole, "-"
 * in the table and null in the JSON, since its forward was timed apart from
 * the graph that ran it. */
#include "test.h"
#include "cli/bench.h"
#include <math.h>
#include <string.h>

TEST(bench_split_op_by_op_gives_forward_and_backward)
{
    struct bench_split s;
    bench_split_set(&s, 0.2, 0.5, 10.0, 0); /* 0.2 s of forwards, 0.5 s of steps, 10 steps */
    CHECK(!s.graphed);
    CHECK(fabs(s.fwd_ms - 20.0) < 1e-9 && fabs(s.bwd_ms - 30.0) < 1e-9 && fabs(s.fb_ms - 50.0) < 1e-9);
    char c[24];
    CHECK_MSG(!strcmp(bench_ms_cell(c, sizeof c, 8, s.fwd_ms), "   20.00"), "cell '%s'", c);
    json_t *j = bench_ms_json(s.bwd_ms);
    CHECK(j && json_is_real(j) && fabs(json_real_value(j) - 30.0) < 1e-9);
    json_decref(j);
}

TEST(bench_split_graphed_gives_only_the_whole)
{
    struct bench_split s;
    bench_split_set(&s, 0.2733, 0.3319, 10.0, 1);
    CHECK(s.graphed && isnan(s.fwd_ms) && isnan(s.bwd_ms) && fabs(s.fb_ms - 33.19) < 1e-9);
    char c[24];
    CHECK_MSG(!strcmp(bench_ms_cell(c, sizeof c, 8, s.fwd_ms), "       -"), "cell '%s'", c);
    CHECK_MSG(!strcmp(bench_ms_cell(c, sizeof c, 8, s.bwd_ms), "       -"), "cell '%s'", c);
    json_t *j = bench_ms_json(s.fwd_ms);
    CHECK(j && json_is_null(j));
    json_decref(j);
}
