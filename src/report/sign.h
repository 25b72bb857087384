/* Signed run folders (docs/COMPARE.md, "Signed reports"): Ed25519 over a
 * manifest of SHA-256 digests, with OpenSSL's EVP (one-shot
 * EVP_DigestSign/EVP_DigestVerify, no separate digest: Ed25519 hashes the
 * message itself).
 *
 *   DIR/manifest.json  {"schema": "plumb.manifest/1", "algorithm": "ed25519",
 *                       "signed_at", "public_key": base64 of the 32 raw bytes,
 *                       "key_fingerprint": "sha256:" + hex of SHA-256(raw key),
 *                       "files": [{"path", "sha256", "bytes"}, ...] sorted by path}
 *   DIR/manifest.sig   base64 of the 64-byte signature over manifest.json's bytes
 *
 * Files covered: the run folder's document (results.json, or compare.json
 * in a `plumb compare --out` folder), every artifact results.json lists,
 * and every regular file under checks/. The rendered reports (report.html,
 * compare.html) are derived from those and re-rendered freely; they are not
 * covered. Verification fails when the signature does not verify with the
 * trusted key, when any listed file is missing or its bytes changed, or when
 * a covered file exists that the manifest does not list. */
#ifndef PLUMB_SIGN_H
#define PLUMB_SIGN_H
#include <jansson.h>
#include "core/err.h"

#define MANIFEST_SCHEMA "plumb.manifest/1"

/* Writes an Ed25519 key pair as PEM (PKCS#8 private key, mode 0600; SPKI
 * public key): the files `openssl genpkey -algorithm ed25519` and
 * `openssl pkey -pubout` write. Refuses to overwrite an existing key. */
int sign_keygen(const char *key_path, const char *pub_path, plumb_err *e);
/* Signs DIR with the private key in key_path (PEM). *nfiles gets the count covered. */
int sign_dir(const char *dir, const char *key_path, int *nfiles, plumb_err *e);

struct sign_check {
    int signed_;          /* a manifest is there */
    int sig_ok;           /* the signature verifies with the key used */
    int key_matches;      /* the key used is the manifest's public_key */
    int files_ok;         /* every file as listed, no file added */
    int trusted;          /* the key came from the caller (pub_path), not the manifest */
    char fingerprint[80]; /* of the key used */
    char signed_at[40];
    int nfiles;
    json_t *problems;     /* ["results.json: changed (sha256 ...)", ...], owned */
};
/* Verifies DIR against pub_path (PEM public key), or, when pub_path is NULL,
 * against the manifest's own public key (integrity only, not authenticity).
 * Returns PLUMB_OK when the check could be made (see r for the outcome),
 * PLUMB_EUSAGE when DIR has no manifest or a file cannot be parsed. */
int sign_verify(const char *dir, const char *pub_path, struct sign_check *r, plumb_err *e);
void sign_check_free(struct sign_check *r);
/* A trusted public key given by the user (plumb compare --pub, plumb report --pub): readable,
 * PEM, Ed25519; else PLUMB_EUSAGE naming the file. Checked before the folders are read, so that
 * a wrong path is not reported as the folder's signature being invalid. */
int sign_check_pub(const char *pub_path, plumb_err *e);
/* 1 when every part of r passed. */
int sign_check_passed(const struct sign_check *r);

/* For the reports: {"status": "unsigned" | "verified" (trusted key) | "valid"
 * (the manifest's own key) | "invalid", "fingerprint", "signed_at", "files",
 * "problems": [...], "message"}. */
json_t *sign_status_json(const char *dir, const char *pub_path);

#endif
