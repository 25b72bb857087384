/* libFuzzer target: checkpoint files (train/ckpt.h): ckpt_read on the bytes
 * as a file, then what the trainer's resume does with a checkpoint that
 * verifies (train/trainer.c): the "meta" section as JSON, each section
 * looked up by name.
 *
 * Input: one mode byte, then the file. Mutated bytes almost never keep the
 * CRC-32s right, which would stop every input at "checksum mismatch"; with
 * mode bit 0 set the harness first rewrites the header CRC and the CRC of
 * every section whose table entry lies inside the file (layout in
 * train/ckpt.h), so the section table, offsets, lengths and the meta JSON
 * behind the checksums get fuzzed too. Mode bit 0 clear: the bytes as they
 * are (the checksum paths). */
#include "fuzz_util.h"
#include "core/hash.h"
#include "core/jsonx.h"
#include "train/ckpt.h"
#include <jansson.h>
#include <string.h>

#define HDR 24 /* magic 8, version u32, nsec u32, step u64 */
#define ENT 56 /* name 32, offset u64, length u64, crc u32, pad u32 */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static uint64_t le64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t le32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static void fix_crcs(uint8_t *u, size_t size)
{
    if (size < HDR + 4) return;
    uint64_t nsec = le32(u + 12);
    if (nsec > 4096 || size < HDR + nsec * ENT + 4) return;
    size_t hlen = HDR + (size_t)nsec * ENT + 4;
    for (size_t i = 0; i < nsec; i++) {
        uint8_t *p = u + HDR + i * ENT;
        uint64_t off = le64(p + 32), len = le64(p + 40);
        if (off <= size && len <= size - off) {
            uint32_t c = hash_crc32(0, u + off, (size_t)len);
            memcpy(p + 48, &c, 4);
        }
    }
    uint32_t c = hash_crc32(0, u, hlen - 4);
    memcpy(u + hlen - 4, &c, 4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t mode = data[0];
    size--, data++;
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) abort();
    memcpy(copy, data, size);
    if (mode & 1) fix_crcs(copy, size);
    char path[64];
    fuzz_memfile("ckpt", copy, size, path, sizeof path);
    free(copy);

    struct ckpt ck;
    plumb_err e = {0};
    if (ckpt_read(path, &ck, &e) != PLUMB_OK) {
        if (!e.msg[0]) abort();
        return 0;
    }
    if (ck.size != size || ck.nsec < 0) abort();
    for (int i = 0; i < ck.nsec; i++) {
        const char *p = ck.sec[i].data;
        if (p < ck.buf || ck.sec[i].len > ck.size || (size_t)(p - ck.buf) > ck.size - ck.sec[i].len) abort();
        size_t len;
        if (!ckpt_find(&ck, ck.sec[i].name, &len)) abort();
    }
    size_t ml;
    const char *ms = ckpt_find(&ck, "meta", &ml);
    json_error_t je;
    json_t *meta = ms ? json_loadb(ms, ml, 0, &je) : NULL;
    if (meta) {
        (void)jsonx_str(meta, "config_hash");
        (void)jsonx_str(meta, "config");
        (void)jsonx_num(meta, "step");
        (void)jsonx_num(json_object_get(meta, "scaler"), "scale");
        json_decref(meta);
    }
    ckpt_free(&ck);
    return 0;
}
