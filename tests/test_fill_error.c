/* A data source whose fill fails (train/model.h: a mapped data file that
 * shrank during the run) stops the host loader and the device feed with its
 * error, never a batch for the failed step or one after it. The loader hands
 * over every batch built before the failure first; the feed may return the
 * error before the ready batches (the run stops either way). */
#include "test.h"
#include "dev/dev.h"
#include "train/devfeed.h"
#include "train/loader.h"
#include <stdatomic.h>

/* fills field 0 with the sample index; call number fail_at (0-based) fails */
struct data_source {
    atomic_int calls;
    int fail_at;
};

static const struct batch_field fe_fields[1] = {{"x", DT_U32, 1}};

static int fe_fill(const struct data_source *s, int split, long epoch, const uint32_t *idx, int count,
                   void *const *field, plumb_err *e)
{
    (void)split, (void)epoch;
    struct data_source *m = (struct data_source *)s;
    if (atomic_fetch_add(&m->calls, 1) == m->fail_at)
        return err_set(e, PLUMB_EIO, "fake.bin: test file shrank while being read");
    uint32_t *x = field[0];
    for (int i = 0; i < count; i++) x[i] = idx[i];
    return PLUMB_OK;
}

static const struct data_ops fe_ops = {.fill = fe_fill};

enum { N = 1000, B = 10, STEPS = 20, FAIL = 5 };

static void fe_source(struct data_source *src, struct feed_source *fs)
{
    atomic_init(&src->calls, 0);
    src->fail_at = FAIL;
    fs->ops = &fe_ops;
    fs->src = src;
    fs->n_fields = 1;
    fs->fields = fe_fields;
}

TEST(fill_error_stops_the_host_loader)
{
    plumb_err e = {0};
    struct data_source src;
    struct feed_source fs;
    fe_source(&src, &fs);
    struct sampler s;
    REQUIRE(sampler_init(&s, N, B, B, 3, 1, &e) == 0);
    struct loader *l = NULL;
    REQUIRE(loader_start(&fs, &s, 0, 1, 0, STEPS, 3, &l, &e) == 0);
    long got = 0;
    int rc = 0;
    for (long step = 0; step < STEPS; step++) {
        struct host_batch *b;
        double w;
        rc = loader_next(l, &b, &w, &e);
        if (rc) break;
        CHECK_EQ_INT(b->st.step, step);
        got++;
        loader_release(l, b);
    }
    CHECK_EQ_INT(got, FAIL); /* steps 0..4 built by calls 0..4; step 5's fill failed */
    CHECK_EQ_INT(rc, PLUMB_EIO);
    CHECK_MSG(strstr(e.msg, "fake.bin: test file shrank while being read") != NULL, "%s", e.msg);
    loader_stop(l);
    sampler_free(&s);
}

TEST(fill_error_stops_the_device_feed)
{
    plumb_err e = {0};
    struct data_source src;
    struct feed_source fs;
    fe_source(&src, &fs);
    struct sampler s;
    REQUIRE(sampler_init(&s, N, B, B, 3, 1, &e) == 0);
    struct dev *d = NULL;
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    struct devfeed *f = NULL;
    /* one build thread: a batch of 10 is one chunk, one fill call a step */
    REQUIRE(devfeed_start(d, &fs, SPLIT_TRAIN, &s, 0, 1, 0, STEPS, 3, 1, &f, &e) == 0);
    long got = 0;
    int rc = 0;
    for (long step = 0; step < STEPS; step++) {
        struct batch b;
        long sn = -1;
        double w;
        rc = devfeed_next(f, &b, &sn, &w, &e);
        if (rc) break;
        CHECK_EQ_INT(sn, step);
        got++;
        devfeed_release(f);
    }
    CHECK_MSG(got <= FAIL, "%ld batches handed over (the fill of step %d failed)", got, FAIL);
    CHECK_EQ_INT(rc, PLUMB_EIO);
    CHECK_MSG(strstr(e.msg, "fake.bin: test file shrank while being read") != NULL, "%s", e.msg);
    devfeed_stop(f);
    sampler_free(&s);
    dev_close(d);
}
