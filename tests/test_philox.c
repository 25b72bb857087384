/* Philox4x32-10 known answers (Random123 kat_vectors) and the stream
 * mapping of core/philox.h. */
#include "core/philox.h"
#include "test.h"

struct kat { uint32_t ctr[4], key[2], out[4]; };

/* Random123 tests/kat_vectors, "philox4x32 10" lines. */
static const struct kat kats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(philox_kat_vectors)
{
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        philox4x32_10(kats[i].ctr, kats[i].key, out);
        for (int j = 0; j < 4; j++)
            CHECK_MSG(out[j] == kats[i].out[j], "kat %d word %d: %08x want %08x", i, j, out[j], kats[i].out[j]);
    }
}

TEST(philox_stream_mapping)
{
    /* element index of stream (seed, purpose, a, b) is word index%4 of the
     * block counter {blk lo, blk hi16 | purpose<<16, a, b}, key = seed halves */
    uint64_t seed = 0x0123456789abcdefull;
    uint64_t idx = ((uint64_t)0x1234 << 34) + 4 * 77 + 2; /* blk uses the high 16 bits */
    uint64_t blk = idx / 4;
    uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)((blk >> 32) & 0xffff) | (3u << 16), 11, 22};
    uint32_t key[2] = {0x89abcdefu, 0x01234567u};
    uint32_t w[4];
    philox4x32_10(ctr, key, w);
    CHECK_EQ_INT(philox_u32_at(seed, RNG_DROPOUT, 11, 22, idx), w[2]);
    /* different purpose, a, b or seed give different words */
    CHECK(philox_u32_at(seed, RNG_INIT, 11, 22, idx) != w[2]);
    CHECK(philox_u32_at(seed, RNG_DROPOUT, 12, 22, idx) != w[2]);
    CHECK(philox_u32_at(seed, RNG_DROPOUT, 11, 23, idx) != w[2]);
    CHECK(philox_u32_at(seed + 1, RNG_DROPOUT, 11, 22, idx) != w[2]);
    /* stream (0,0,0,0) block 0 is the first KAT */
    CHECK_EQ_INT(philox_u32_at(0, 0, 0, 0, 1), 0xe169c58du);
    /* uniform: (x>>8)*2^-24 */
    CHECK(philox_uniform_at(0, 0, 0, 0, 0) == (float)(0x6627e8d5u >> 8) / 16777216.0f);
    CHECK(philox_u01(0xffffffffu) < 1.0f && philox_u01(0xffffffffu) == 1.0f - 0x1p-24f);
    CHECK(philox_u01(0xffu) == 0.0f);
}

TEST(philox_normal_mapping)
{
    /* element 4k+j of the normal stream comes from block k, pairs (w0,w1), (w2,w3) */
    uint32_t w[4];
    philox_block(42, RNG_INIT, 5, 0, 9, w);
    for (int pair = 0; pair < 2; pair++) {
        double u1 = ((double)(w[2 * pair] >> 8) + 0.5) / 16777216.0;
        double u2 = (double)(w[2 * pair + 1] >> 8) / 16777216.0;
        double r = sqrt(-2.0 * log(u1));
        double z0 = r * cos(2 * M_PI * u2), z1 = r * sin(2 * M_PI * u2);
        float g0 = philox_normal_at(42, RNG_INIT, 5, 0, 36 + 2 * pair);
        float g1 = philox_normal_at(42, RNG_INIT, 5, 0, 37 + 2 * pair);
        CHECK_NEAR(g0, z0, 1e-6 * (1 + fabs(z0)));
        CHECK_NEAR(g1, z1, 1e-6 * (1 + fabs(z1)));
    }
    /* the extreme words: u1 smallest gives the largest radius; top value gives 0 */
    float z[2];
    philox_box_muller(0, 0, z);
    CHECK_NEAR(z[0], sqrt(-2.0 * log(0x1p-25)), 1e-5);
    CHECK(z[1] == 0.0f);
    philox_box_muller(0xffffffffu, 0x40000000u, z);
    CHECK(z[0] == 0.0f || z[0] == -0.0f);
}

TEST(philox_pure_function_of_index)
{
    /* drawing in any order and in any chunking gives the same values */
    float fwd[1000], bwd[1000];
    for (int i = 0; i < 1000; i++) fwd[i] = philox_normal_at(7, RNG_DATA, 1, 2, (uint64_t)i);
    for (int i = 999; i >= 0; i--) bwd[i] = philox_normal_at(7, RNG_DATA, 1, 2, (uint64_t)i);
    CHECK(memcmp(fwd, bwd, sizeof fwd) == 0);
    double s = 0, s2 = 0;
    for (int i = 0; i < 1000; i++) {
        CHECK(isfinite(fwd[i]));
        s += fwd[i];
        s2 += (double)fwd[i] * fwd[i];
    }
    /* 1000 normals: mean within 5 sigma of 0, variance within 0.8..1.2 */
    CHECK(fabs(s / 1000) < 5 / sqrt(1000.0));
    CHECK(s2 / 1000 > 0.8 && s2 / 1000 < 1.2);
}
