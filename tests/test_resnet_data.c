/* resnet's data (models/resnet/cifar.h, imgsynth.h, imgdata.h): the CIFAR-10
 * binary format round trip and its errors (a wrong size or a bad label
 * names the file and the record), synthetic images as pure functions of
 * (seed, split, index), augmentation (crop with zero padding 4, flip) keyed
 * by (seed, epoch, sample) and equal to the crop done by hand, exact eval
 * totals. */
#include "test.h"
#include "core/file.h"
#include "core/hash.h"
#include "models/resnet/cifar.h"
#include "models/resnet/imgdata.h"
#include "models/resnet/imgsynth.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void write_bytes(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

TEST(cifar_round_trip_and_errors)
{
    struct cifar_set s;
    plumb_err e = {0};
    REQUIRE(imgsynth_cifar_set(7, IMG_SPLIT_TRAIN, 0, 25, &s, &e) == 0);
    char path[512];
    snprintf(path, sizeof path, "%s/c.bin", test_tmpdir());
    REQUIRE(cifar_write_file(path, &s, 3, 20, &e) == 0);
    struct cifar_set r = {0};
    REQUIRE(cifar_read_file(path, &r, &e) == 0);
    REQUIRE(r.n == 20);
    CHECK(!memcmp(r.labels, s.labels + 3, 20));
    CHECK(!memcmp(r.pixels, s.pixels + 3 * CIFAR_PIXELS, 20 * CIFAR_PIXELS));
    cifar_set_free(&r);
    /* the record layout: label byte, then 1024 R, 1024 G, 1024 B */
    uint8_t *raw = malloc(3 * CIFAR_RECORD + 7);
    for (int i = 0; i < 3; i++) {
        raw[i * CIFAR_RECORD] = (uint8_t)(i + 4);
        for (int p = 0; p < CIFAR_PIXELS; p++) raw[i * CIFAR_RECORD + 1 + p] = (uint8_t)(p / 1024 * 100 + i);
    }
    write_bytes(path, raw, 3 * CIFAR_RECORD);
    memset(&r, 0, sizeof r);
    REQUIRE(cifar_read_file(path, &r, &e) == 0);
    CHECK(r.n == 3 && r.labels[2] == 6 && r.pixels[2 * CIFAR_PIXELS + 2048] == 202);
    cifar_set_free(&r);
    /* a cut file: the error names the file and the partial record */
    write_bytes(path, raw, 2 * CIFAR_RECORD + 7);
    memset(&r, 0, sizeof r);
    CHECK(cifar_read_file(path, &r, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, path) && strstr(e.msg, "record 2") && strstr(e.msg, "6153 bytes"), "message: %s", e.msg);
    cifar_set_free(&r);
    /* a label above 9 in record 1 */
    raw[CIFAR_RECORD] = 12;
    write_bytes(path, raw, 3 * CIFAR_RECORD);
    memset(&r, 0, sizeof r);
    CHECK(cifar_read_file(path, &r, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, path) && strstr(e.msg, "record 1") && strstr(e.msg, "label 12"), "message: %s", e.msg);
    cifar_set_free(&r);
    /* a directory without its fourth training file */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/cdir", test_tmpdir());
    REQUIRE(file_mkdirs(dir, &e) == 0);
    for (int b = 1; b <= 3; b++) {
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, b);
        REQUIRE(cifar_write_file(path, &s, 0, 5, &e) == 0);
    }
    CHECK(cifar_read_dir(dir, 1, &r, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, "data_batch_4.bin"), "message: %s", e.msg);
    free(raw);
    cifar_set_free(&s);
}

/* An empty CIFAR file is said to be empty (before: "0 bytes is not a
 * whole number of 3073-byte CIFAR-10 records (0 records and 0 bytes of
 * record 0)", which 0 is). */
TEST(cifar_empty_file_is_named_empty)
{
    char path[512];
    snprintf(path, sizeof path, "%s/empty_batch.bin", test_tmpdir());
    write_bytes(path, (const uint8_t *)"", 0);
    struct cifar_set r = {0};
    plumb_err e = {0};
    CHECK(cifar_read_file(path, &r, &e) == PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, path) && strstr(e.msg, ": empty (expected") && !strstr(e.msg, "whole number"), "message: %s",
              e.msg);
    cifar_set_free(&r);
}

TEST(imgsynth_pure_function_of_seed_split_index)
{
    struct cifar_set a, b, c;
    plumb_err e = {0};
    REQUIRE(imgsynth_cifar_set(11, IMG_SPLIT_TRAIN, 0, 300, &a, &e) == 0);
    REQUIRE(imgsynth_cifar_set(11, IMG_SPLIT_TRAIN, 120, 7, &b, &e) == 0);
    CHECK(!memcmp(b.pixels, a.pixels + 120 * CIFAR_PIXELS, 7 * CIFAR_PIXELS) && !memcmp(b.labels, a.labels + 120, 7));
    REQUIRE(imgsynth_cifar_set(11, IMG_SPLIT_TEST, 0, 300, &c, &e) == 0);
    CHECK(memcmp(c.pixels, a.pixels, 300 * CIFAR_PIXELS)); /* the splits are different images */
    int count[CIFAR_CLASSES] = {0};
    for (int i = 0; i < 300; i++) count[a.labels[i]]++;
    for (int k = 0; k < CIFAR_CLASSES; k++) CHECK_MSG(count[k] >= 10 && count[k] <= 55, "class %d: %d of 300", k, count[k]);
    /* images of one class share their grating: the mean image of a class
     * differs between classes far more than within (two halves) */
    double mean[2][CIFAR_CLASSES][64] = {{{0}}};
    int n2[2][CIFAR_CLASSES] = {{0}};
    for (int i = 0; i < 300; i++) {
        int h = i & 1, k = a.labels[i];
        n2[h][k]++;
        for (int q = 0; q < 64; q++) mean[h][k][q] += a.pixels[(size_t)i * CIFAR_PIXELS + q * 48];
    }
    double within = 0, between = 0;
    for (int k = 0; k < CIFAR_CLASSES; k++)
        for (int q = 0; q < 64; q++) {
            double m0 = mean[0][k][q] / n2[0][k], m1 = mean[1][k][q] / n2[1][k];
            double o = mean[0][(k + 1) % CIFAR_CLASSES][q] / n2[0][(k + 1) % CIFAR_CLASSES];
            within += fabs(m0 - m1);
            between += fabs(m0 - o);
        }
    CHECK_MSG(between > 1.5 * within, "class means: between %.1f, within %.1f", between, within);
    cifar_set_free(&a), cifar_set_free(&b), cifar_set_free(&c);
    /* the 224 source: labels in range, a sample is a pure function too */
    struct img224 *s;
    REQUIRE(img224_create(3, 1000, &s, &e) == 0);
    uint8_t *p1 = malloc(IMG224_SIDE * IMG224_SIDE * 3), *p2 = malloc(IMG224_SIDE * IMG224_SIDE * 3);
    int32_t l1, l2;
    img224_sample(s, 0, 12345, &l1, p1);
    img224_sample(s, 0, 12345, &l2, p2);
    CHECK(l1 == l2 && l1 >= 0 && l1 < 1000 && !memcmp(p1, p2, IMG224_SIDE * IMG224_SIDE * 3));
    free(p1), free(p2);
    img224_free(s);
}

TEST(imgdata_augment_is_the_torchvision_crop_and_flip)
{
    struct imgdata_opts o = {.seed = 2, .train_samples = 40, .test_samples = 4};
    struct imgdata *d;
    plumb_err e = {0};
    REQUIRE(imgdata_open("synthetic", &o, &d, &e) == 0);
    uint32_t idx[40];
    for (int i = 0; i < 40; i++) idx[i] = (uint32_t)(39 - i);
    float *plain = malloc(40 * 3072 * 4), *aug = malloc(40 * 3072 * 4), *aug2 = malloc(40 * 3072 * 4);
    int32_t lab[40], lab2[40];
    imgdata_fill(d, 0, idx, 40, 0, 0, 0, plain, lab);
    imgdata_fill(d, 0, idx, 40, 1, 99, 3, aug, lab2);
    CHECK(!memcmp(lab, lab2, sizeof lab));
    int flips = 0, shifted = 0;
    size_t bad = 0;
    for (int r = 0; r < 40; r++) {
        int ox, oy, fl;
        imgdata_augment_params(99, 3, idx[r], &ox, &oy, &fl);
        CHECK(ox >= 0 && ox <= 8 && oy >= 0 && oy <= 8);
        flips += fl;
        shifted += ox != 4 || oy != 4;
        for (int h = 0; h < 32; h++)
            for (int w = 0; w < 32; w++)
                for (int c = 0; c < 3; c++) {
                    int sw = fl ? 31 - w : w, ih = oy + h - 4, iw = ox + sw - 4;
                    float want = ih >= 0 && ih < 32 && iw >= 0 && iw < 32 ? plain[(size_t)r * 3072 + (ih * 32 + iw) * 3 + c]
                                                                           : d->lut[c][0];
                    bad += aug[(size_t)r * 3072 + (h * 32 + w) * 3 + c] != want;
                }
    }
    CHECK_MSG(bad == 0, "%zu pixels differ from the crop and flip done by hand", bad);
    CHECK(flips > 5 && flips < 35 && shifted > 20);
    /* normalisation: (v / 255 - mean) / std with CIFAR-10's constants */
    CHECK_NEAR(d->lut[0][255], (1.0 - 0.4914) / 0.2470, 1e-5);
    CHECK_NEAR(d->lut[2][0], -0.4465 / 0.2616, 1e-5);
    /* the same (seed, epoch, sample) gives the same image in any batch;
     * another epoch moves some crops */
    uint32_t one = idx[7];
    imgdata_fill(d, 0, &one, 1, 1, 99, 3, aug2, lab2);
    CHECK(!memcmp(aug2, aug + 7 * 3072, 3072 * 4));
    imgdata_fill(d, 0, idx, 40, 1, 99, 4, aug2, lab2);
    CHECK(memcmp(aug2, aug, 40 * 3072 * 4));
    free(plain), free(aug), free(aug2);
    imgdata_free(d);
}

TEST(img_eval_totals_are_exact)
{
    float loss[5] = {0.5f, 1.25f, 2.0f, 0.125f, 3.0f};
    int32_t pred[5] = {1, 2, 3, 4, 5}, lab[5] = {1, 0, 3, 4, 0};
    struct img_eval a = {0}, b = {0}, all = {0};
    img_eval_add(&all, loss, pred, lab, 5);
    img_eval_add(&a, loss, pred, lab, 2);
    img_eval_add(&b, loss + 2, pred + 2, lab + 2, 3);
    CHECK(a.count + b.count == all.count && a.correct + b.correct == all.correct && a.loss_fix + b.loss_fix == all.loss_fix);
    CHECK(img_eval_top1(&all) == 0.6);
    CHECK(img_eval_loss(&all) == 6.875 / 5);
}

/* The synthetic image sources are data the recorded figures are computed
 * from (resnet-tiny's top-1 and golden digests, BENCHMARKS.md), as ctr's
 * stream is (tests/test_data.c data_synth_stream_pinned): their bits are
 * pinned here. SHA-256 over synthetic CIFAR images 0..499 of both splits
 * (label byte, then 3072 CHW bytes each) and the 224 source's samples
 * 0..7 and 1000000..1000003 of both splits (label int32, then the HWC
 * bytes). Re-record only with a change that redefines a generator, and say
 * so in that commit. */
TEST(imgsynth_streams_pinned)
{
    plumb_err e = {0};
    hash_sha256 h;
    REQUIRE(hash_sha256_init(&h) == 0);
    for (int split = 0; split < 2; split++) {
        struct cifar_set s;
        REQUIRE(imgsynth_cifar_set(1234, split ? IMG_SPLIT_TEST : IMG_SPLIT_TRAIN, 0, 500, &s, &e) == 0);
        for (size_t i = 0; i < 500; i++) {
            hash_sha256_update(&h, &s.labels[i], 1);
            hash_sha256_update(&h, s.pixels + i * CIFAR_PIXELS, CIFAR_PIXELS);
        }
        cifar_set_free(&s);
    }
    uint8_t d[32];
    char hex[65];
    hash_sha256_final(&h, d);
    hash_to_hex(d, 32, hex);
    CHECK_STREQ(hex, "1eab9ce970c19ce13f58779d2f13b524d09c995398a5e403dc2c4e6b7f94fce8");

    struct img224 *s224;
    REQUIRE(img224_create(1234, 1000, &s224, &e) == 0);
    uint8_t *px = malloc(IMG224_SIDE * IMG224_SIDE * 3);
    REQUIRE(px);
    REQUIRE(hash_sha256_init(&h) == 0);
    const uint32_t idx[] = {0, 1, 2, 3, 4, 5, 6, 7, 1000000, 1000001, 1000002, 1000003};
    for (int split = 0; split < 2; split++)
        for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
            int32_t l;
            img224_sample(s224, split, idx[i], &l, px);
            hash_sha256_update(&h, &l, sizeof l);
            hash_sha256_update(&h, px, IMG224_SIDE * IMG224_SIDE * 3);
        }
    hash_sha256_final(&h, d);
    hash_to_hex(d, 32, hex);
    CHECK_STREQ(hex, "6f22f2440c5833d7e5c995eaff45b8cc5f6e3314c8eb76bf0f5787ae9b2d76a2");
    free(px);
    img224_free(s224);
}

/* imgdata_fill over "synthetic224": each row is the 224 source's sample,
 * HWC, through ImageNet's mean and std per channel; the label the
 * source's. (The 32 x 32 sources' fill is imgdata_augment_is_the_torchvision_crop_and_flip.) */
TEST(imgdata_fill_synthetic224_is_the_normalised_source)
{
    plumb_err e = {0};
    struct imgdata_opts o = {.seed = 77, .train_samples = 100, .test_samples = 10, .classes = 13};
    struct imgdata *d = NULL;
    REQUIRE(imgdata_open("synthetic224", &o, &d, &e) == 0);
    CHECK_EQ_INT(d->side, IMG224_SIDE);
    CHECK_EQ_INT(d->classes, 13);
    CHECK(d->n[0] == 100 && d->n[1] == 10);
    struct img224 *s;
    REQUIRE(img224_create(77, 13, &s, &e) == 0);
    const size_t row = (size_t)IMG224_SIDE * IMG224_SIDE * 3;
    const uint32_t idx[3] = {5, 0, 99};
    float *x = malloc(3 * row * sizeof(float));
    uint8_t *px = malloc(row);
    REQUIRE(x && px);
    int32_t lab[3] = {-1, -1, -1};
    for (int split = 0; split < 2; split++) {
        imgdata_fill(d, split, idx, split ? 2 : 3, 1, 9, 3, x, lab); /* augment asked: the 224 source has none */
        for (int r = 0; r < (split ? 2 : 3); r++) {
            int32_t l;
            img224_sample(s, split, idx[r], &l, px);
            CHECK_EQ_INT(lab[r], l);
            static const double mean[3] = {0.485, 0.456, 0.406}, sd[3] = {0.229, 0.224, 0.225};
            size_t bad = 0, distinct = 0;
            for (size_t i = 0; i < row; i++) {
                const double want = ((double)px[i] / 255.0 - mean[i % 3]) / sd[i % 3];
                bad += fabs(x[r * row + i] - want) > 1e-5;
                distinct += i && px[i] != px[i - 1];
            }
            CHECK_MSG(bad == 0, "split %d row %d: %zu of %zu values off the normalised pixels", split, r, bad, row);
            CHECK_MSG(distinct > row / 100, "split %d row %d: a flat image", split, r);
        }
    }
    free(x), free(px);
    img224_free(s);
    imgdata_free(d);
}
