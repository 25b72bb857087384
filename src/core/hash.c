#include "core/hash.h"
#include <openssl/evp.h>
#include <zlib.h>

int hash_sha256_init(hash_sha256 *h)
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (!c) return -1;
    if (EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(c);
        return -1;
    }
    h->ctx = c;
    return 0;
}

void hash_sha256_update(hash_sha256 *h, const void *data, size_t len)
{
    EVP_DigestUpdate((EVP_MD_CTX *)h->ctx, data, len);
}

void hash_sha256_final(hash_sha256 *h, uint8_t out[32])
{
    unsigned int n = 32;
    EVP_DigestFinal_ex((EVP_MD_CTX *)h->ctx, out, &n);
    EVP_MD_CTX_free((EVP_MD_CTX *)h->ctx);
    h->ctx = NULL;
}

void hash_to_hex(const uint8_t *bytes, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[bytes[i] >> 4];
        out[2 * i + 1] = hex[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

void hash_sha256_hex(const void *data, size_t len, char out[65])
{
    uint8_t d[32];
    hash_sha256 h;
    if (hash_sha256_init(&h) != 0) {
        out[0] = '\0';
        return;
    }
    hash_sha256_update(&h, data, len);
    hash_sha256_final(&h, d);
    hash_to_hex(d, 32, out);
}

uint32_t hash_crc32(uint32_t crc, const void *data, size_t len)
{
    /* zlib's crc32 takes uInt lengths: feed large buffers in pieces */
    const unsigned char *p = data;
    uLong c = crc;
    while (len) {
        uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
        c = crc32(c, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)c;
}
