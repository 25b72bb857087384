/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC'11; the Random123 library) and plumb's stream mapping
 * (docs/numerics.md). Header-only, PLUMB_HD: the cpu backend and the CUDA/HIP
 * kernels include this file, so every device draws the same numbers.
 *
 * Generator: a 4x32-bit counter and a 2x32-bit key; 10 rounds; round:
 *   (hi0, lo0) = mulhilo32(0xD2511F53, c0), (hi1, lo1) = mulhilo32(0xCD9E8D57, c2)
 *   c' = {hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0}
 * the key bumped by (0x9E3779B9, 0xBB67AE85) before rounds 2..10.
 * Checked against Random123's kat_vectors in tests/test_philox.c.
 *
 * Streams. Every random number is a pure function of
 * (seed, purpose, a, b, index); nothing depends on rank, thread or device.
 *   key     = { (uint32)seed, (uint32)(seed >> 32) }
 *   blk     = index / 4   (index < 2^48)
 *   counter = { (uint32)blk, (uint32)((blk >> 32) & 0xffff) | (purpose << 16), a, b }
 *   u32 element `index` = word (index % 4) of philox(counter, key)
 *   uniform element `index` = (u32 >> 8) * 2^-24, in [0, 1), exact in fp32
 *   normal element `index` (golden Box-Muller): block k = index / 4 gives
 *     words w0..w3; the pair (w0, w1) gives elements 4k and 4k+1, the pair
 *     (w2, w3) gives 4k+2 and 4k+3. For a pair (w, w'):
 *       u1 = ((float)(w >> 8) + 0.5f) * 2^-24     (the add is an IEEE fp32 add;
 *            it rounds to even for w >> 8 >= 2^23, and for w >> 8 = 2^24-1 it
 *            gives u1 = 1, i.e. r = 0: u1 lies in [2^-25, 1])
 *       u2 = (float)(w' >> 8) * 2^-24               (in [0, 1), exact)
 *       r  = sqrtf(-2 * glogf(u1))
 *       first  = r * gcospif(2 * u2)
 *       second = r * gsinpif(2 * u2)
 *     with the golden functions of core/gmath.h, so normals have the same
 *     bits on every device.
 */
#ifndef PLUMB_PHILOX_H
#define PLUMB_PHILOX_H
#include <stdint.h>
#include "core/gmath.h"
#include "core/hd.h"

enum rng_purpose {
    RNG_INIT = 1,     /* parameter initialisation; a = tensor id      */
    RNG_SHUFFLE = 2,  /* sampler permutation; a = epoch               */
    RNG_DROPOUT = 3,  /* dropout masks; a = step, b = layer           */
    RNG_AUGMENT = 4,  /* data augmentation; a = epoch, b = sample     */
    RNG_DATA = 5,     /* synthetic data; a = dataset id, b = split    */
    RNG_STATS = 6,    /* resampling tests (report/parity.c); a, b = the
                         resample number's low and high words         */
    RNG_COMM_CHECK = 7, /* collective check inputs; a = rank, b = case */
};

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

PLUMB_HD void philox_round(uint32_t c[4], const uint32_t k[2])
{
    uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k[0];
    uint32_t n2 = hi0 ^ c[3] ^ k[1];
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

/* out = Philox4x32-10(ctr, key) */
PLUMB_HD void philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k[0] += PHILOX_W0;
            k[1] += PHILOX_W1;
        }
        philox_round(c, k);
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
}

/* The four words of block `blk` (elements 4*blk .. 4*blk+3) of a stream. */
PLUMB_HD void philox_block(uint64_t seed, uint32_t purpose, uint32_t a, uint32_t b,
                           uint64_t blk, uint32_t out[4])
{
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    uint32_t ctr[4] = {(uint32_t)blk, (uint32_t)((blk >> 32) & 0xffffu) | (purpose << 16), a, b};
    philox4x32_10(ctr, key, out);
}

/* Raw 32-bit element `index` of the stream. */
PLUMB_HD uint32_t philox_u32_at(uint64_t seed, uint32_t purpose, uint32_t a, uint32_t b,
                                uint64_t index)
{
    uint32_t w[4];
    philox_block(seed, purpose, a, b, index >> 2, w);
    return w[index & 3];
}

/* 24-bit mapping to [0, 1): exact in fp32. */
PLUMB_HD float philox_u01(uint32_t x) { return (float)(x >> 8) * 0x1p-24f; }

PLUMB_HD float philox_uniform_at(uint64_t seed, uint32_t purpose, uint32_t a, uint32_t b,
                                 uint64_t index)
{
    return philox_u01(philox_u32_at(seed, purpose, a, b, index));
}

/* Golden Box-Muller of one pair of words (w, w2): z[0] = r*cospi(2u2),
 * z[1] = r*sinpi(2u2). */
PLUMB_HD void philox_box_muller(uint32_t w, uint32_t w2, float z[2])
{
    float u1 = ((float)(w >> 8) + 0.5f) * 0x1p-24f;
    float u2 = (float)(w2 >> 8) * 0x1p-24f;
    float r = sqrtf(-2.0f * glogf(u1));
    float t = 2.0f * u2;
    z[0] = r * gcospif(t);
    z[1] = r * gsinpif(t);
}

/* Normal elements 4*blk .. 4*blk+3 of the stream. */
PLUMB_HD void philox_normal4(uint64_t seed, uint32_t purpose, uint32_t a, uint32_t b,
                             uint64_t blk, float out[4])
{
    uint32_t w[4];
    philox_block(seed, purpose, a, b, blk, w);
    philox_box_muller(w[0], w[1], out);
    philox_box_muller(w[2], w[3], out + 2);
}

PLUMB_HD float philox_normal_at(uint64_t seed, uint32_t purpose, uint32_t a, uint32_t b,
                                uint64_t index)
{
    float z[4];
    philox_normal4(seed, purpose, a, b, index >> 2, z);
    return z[index & 3];
}

#endif
