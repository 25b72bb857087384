/* gpu/conv_picks.h, the file that keeps the cuDNN convolution picks across
 * processes (gpu/conv_lib.cu): where it lives, the context a line is good
 * for, the line format both ways, what a reader refuses, and the appends. The
 * cuDNN side (a pick read back and checked with the library before use) runs
 * in the GPU suite (resnet training twice in two processes: the same bits). */
#include "test.h"
#include "gpu/conv_picks.h"
#include <stdlib.h>
#include <string.h>

static struct conv_pick_rec sample_rec(void)
{
    struct conv_pick_rec r;
    memset(&r, 0, sizeof r);
    r.dir = 2, r.rt = 1, r.tf32 = 0;
    CHECK_MSG(train_conv_set(&r.g, 64, 56, 56, 64, 256, 1, 1, 1, 0) == 0, "geometry");
    r.usable = 1, r.algo = 5, r.math = 1, r.ws = 123456789;
    return r;
}

TEST(conv_picks_line_round_trip_and_refusals)
{
    char ctx[512], other[512], line[1024];
    conv_picks_ctx(ctx, sizeof ctx, "cuDNN 9.1.0", "NVIDIA H100 80GB HBM3", "580.159.04 CUDA 13.0", (size_t)256 << 20, 1);
    CHECK_MSG(!strchr(ctx, ' '), "context has a blank: %s", ctx);
    CHECK(strstr(ctx, "NVIDIA_H100_80GB_HBM3") != NULL);
    struct conv_pick_rec r = sample_rec(), back;
    REQUIRE(conv_picks_format(line, sizeof line, ctx, &r) > 0);
    CHECK(line[strlen(line) - 1] == '\n');
    line[strcspn(line, "\n")] = '\0';
    REQUIRE(conv_picks_parse(line, ctx, &back) == 1);
    CHECK(!memcmp(&back.g, &r.g, sizeof r.g));
    CHECK(back.dir == 2 && back.rt == 1 && back.tf32 == 0 && back.usable == 1 && back.algo == 5 && back.math == 1 &&
          back.ws == 123456789);
    /* another context: the workspace limit, the retiming, the device, the library */
    conv_picks_ctx(other, sizeof other, "cuDNN 9.1.0", "NVIDIA H100 80GB HBM3", "580.159.04 CUDA 13.0", (size_t)128 << 20, 1);
    CHECK(conv_picks_parse(line, other, &back) == 0);
    conv_picks_ctx(other, sizeof other, "cuDNN 9.1.0", "NVIDIA H100 80GB HBM3", "580.159.04 CUDA 13.0", (size_t)256 << 20, 0);
    CHECK(conv_picks_parse(line, other, &back) == 0);
    conv_picks_ctx(other, sizeof other, "cuDNN 9.1.0", "NVIDIA H200", "580.159.04 CUDA 13.0", (size_t)256 << 20, 1);
    CHECK(conv_picks_parse(line, other, &back) == 0);
    conv_picks_ctx(other, sizeof other, "cuDNN 9.2.0", "NVIDIA H100 80GB HBM3", "580.159.04 CUDA 13.0", (size_t)256 << 20, 1);
    CHECK(conv_picks_parse(line, other, &back) == 0);
    /* damaged lines */
    char bad[1100];
    snprintf(bad, sizeof bad, "%s 7", line); /* trailing text */
    CHECK(conv_picks_parse(bad, ctx, &back) == 0);
    snprintf(bad, sizeof bad, "plumb-conv-pick 2%s", line + strlen("plumb-conv-pick 1")); /* another version */
    CHECK(conv_picks_parse(bad, ctx, &back) == 0);
    char *cut = strrchr(line, ' ');
    REQUIRE(cut != NULL);
    snprintf(bad, sizeof bad, "%.*s", (int)(cut - line), line); /* a field short */
    CHECK(conv_picks_parse(bad, ctx, &back) == 0);
    struct conv_pick_rec w = r;
    w.g.P = 55; /* P and Q must follow from the geometry */
    REQUIRE(conv_picks_format(bad, sizeof bad, ctx, &w) > 0);
    CHECK(conv_picks_parse(bad, ctx, &back) == 0);
    w = r, w.dir = 3;
    REQUIRE(conv_picks_format(bad, sizeof bad, ctx, &w) > 0);
    CHECK(conv_picks_parse(bad, ctx, &back) == 0);
    w = r, w.algo = -1;
    REQUIRE(conv_picks_format(bad, sizeof bad, ctx, &w) > 0);
    CHECK(conv_picks_parse(bad, ctx, &back) == 0);
    CHECK(conv_picks_parse("", ctx, &back) == 0);
    CHECK(conv_picks_parse("# a comment", ctx, &back) == 0);
    /* a line too long for the buffer is refused, not cut */
    char tiny[40];
    CHECK(conv_picks_format(tiny, sizeof tiny, ctx, &r) == -1);
}

/* the path: PLUMB_CONV_CACHE, then XDG_CACHE_HOME, then HOME; off */
TEST(conv_picks_path_from_the_environment)
{
    char *old_c = getenv("PLUMB_CONV_CACHE") ? strdup(getenv("PLUMB_CONV_CACHE")) : NULL;
    char *old_x = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    char *old_h = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char p[1024];
    setenv("PLUMB_CONV_CACHE", "/tmp/x/picks.txt", 1);
    CHECK(conv_picks_path(p, sizeof p) == 1 && !strcmp(p, "/tmp/x/picks.txt"));
    setenv("PLUMB_CONV_CACHE", "off", 1);
    CHECK(conv_picks_path(p, sizeof p) == 0);
    setenv("PLUMB_CONV_CACHE", "0", 1);
    CHECK(conv_picks_path(p, sizeof p) == 0);
    unsetenv("PLUMB_CONV_CACHE");
    setenv("XDG_CACHE_HOME", "/c", 1);
    setenv("HOME", "/h", 1);
    CHECK(conv_picks_path(p, sizeof p) == 1 && !strcmp(p, "/c/plumb/conv-picks.txt"));
    unsetenv("XDG_CACHE_HOME");
    CHECK(conv_picks_path(p, sizeof p) == 1 && !strcmp(p, "/h/.cache/plumb/conv-picks.txt"));
    unsetenv("HOME");
    CHECK(conv_picks_path(p, sizeof p) == 0);
    if (old_c) setenv("PLUMB_CONV_CACHE", old_c, 1);
    if (old_x) setenv("XDG_CACHE_HOME", old_x, 1);
    if (old_h) setenv("HOME", old_h, 1);
    free(old_c), free(old_x), free(old_h);
}

/* appends make the folders, add lines, and name a failure by errno */
TEST(conv_picks_append_creates_and_appends)
{
    char path[1024], ctx[256], l1[512], l2[512];
    snprintf(path, sizeof path, "%s/picks/a/b/conv-picks.txt", test_tmpdir());
    conv_picks_ctx(ctx, sizeof ctx, "cuDNN 9.1.0", "dev", "drv", 1 << 20, 1);
    struct conv_pick_rec r = sample_rec();
    REQUIRE(conv_picks_format(l1, sizeof l1, ctx, &r) > 0);
    r.algo = 6;
    REQUIRE(conv_picks_format(l2, sizeof l2, ctx, &r) > 0);
    CHECK_EQ_INT(conv_picks_append(path, l1), 0);
    CHECK_EQ_INT(conv_picks_append(path, l2), 0);
    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL);
    char got[1024];
    int n = 0, algo_last = -1;
    while (fgets(got, sizeof got, f)) {
        got[strcspn(got, "\n")] = '\0';
        struct conv_pick_rec b;
        if (conv_picks_parse(got, ctx, &b)) n++, algo_last = b.algo;
    }
    fclose(f);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(algo_last, 6); /* the reader's "last line wins" sees the later pick last */
    /* a folder that is a file */
    char bad[1100];
    snprintf(bad, sizeof bad, "%s/x.txt", path);
    CHECK(conv_picks_append(bad, l1) != 0);
}
