/* Hashes: SHA-256 (OpenSSL libcrypto) for digests that two hosts compare,
 * CRC-32 (zlib) for cheap section checksums. */
#ifndef PLUMB_HASH_H
#define PLUMB_HASH_H
#include <stddef.h>
#include <stdint.h>

typedef struct hash_sha256 {
    void *ctx; /* EVP_MD_CTX */
} hash_sha256;

int hash_sha256_init(hash_sha256 *h);  /* 0 ok */
void hash_sha256_update(hash_sha256 *h, const void *data, size_t len);
/* Writes 32 bytes and frees the context. */
void hash_sha256_final(hash_sha256 *h, uint8_t out[32]);
/* One-shot digest as 64 lowercase hex chars + NUL. */
void hash_sha256_hex(const void *data, size_t len, char out[65]);
void hash_to_hex(const uint8_t *bytes, size_t n, char *out /* 2n+1 */);
uint32_t hash_crc32(uint32_t crc, const void *data, size_t len);

#endif
