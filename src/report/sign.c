#include "report/sign.h"
#include "core/file.h"
#include "core/hash.h"
#include "core/jsonx.h"
#include "core/timer.h"
#include "report/results.h"
#include "report/sysinfo.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the most bytes of a PEM key or a manifest.sig read (an Ed25519 PEM key is about 120 bytes) */
#define SIGN_KEY_CAP ((size_t)64 << 10)

static int ossl_fail(plumb_err *e, int code, const char *what)
{
    unsigned long err = ERR_get_error();
    char buf[256] = "no OpenSSL error queued";
    if (err) ERR_error_string_n(err, buf, sizeof buf);
    ERR_clear_error();
    return err_set(e, code, "%s: %s", what, buf);
}

/* ---------------------------------------------------------------- keys */

static int write_pem(const char *path, EVP_PKEY *k, int private_key, plumb_err *e)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, private_key ? 0600 : 0644);
    if (fd < 0)
        return err_set(e, errno == EEXIST ? PLUMB_EUSAGE : PLUMB_EIO, "%s: cannot create (%s)%s", path, strerror(errno),
                       errno == EEXIST ? ": refusing to overwrite a key" : "");
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return err_set(e, PLUMB_EIO, "%s: %s", path, strerror(errno));
    }
    int ok = private_key ? PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) : PEM_write_PUBKEY(f, k);
    if (fclose(f) != 0) ok = 0;
    if (ok != 1) {
        unlink(path);
        return ossl_fail(e, PLUMB_EIO, path);
    }
    return PLUMB_OK;
}

int sign_keygen(const char *key_path, const char *pub_path, plumb_err *e)
{
    EVP_PKEY *k = NULL;
    EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    if (!c || EVP_PKEY_keygen_init(c) != 1 || EVP_PKEY_keygen(c, &k) != 1) {
        EVP_PKEY_CTX_free(c);
        return ossl_fail(e, PLUMB_EINTERNAL, "Ed25519 key generation");
    }
    EVP_PKEY_CTX_free(c);
    int rc = write_pem(key_path, k, 1, e);
    if (!rc && (rc = write_pem(pub_path, k, 0, e))) unlink(key_path);
    EVP_PKEY_free(k);
    return rc;
}

static int load_key(const char *path, int private_key, EVP_PKEY **out, plumb_err *e)
{
    *out = NULL;
    /* a key is a small regular file: a FIFO (--pub, --key) blocked the PEM reader for ever */
    plumb_err ce = {0};
    if (file_check_input(path, SIGN_KEY_CAP, &ce))
        return err_set(e, PLUMB_EUSAGE, "the %s key: %s", private_key ? "private" : "public", ce.msg);
    FILE *f = fopen(path, "r");
    if (!f) return err_set(e, PLUMB_EUSAGE, "%s: cannot open the %s key (%s)", path, private_key ? "private" : "public",
                           strerror(errno));
    EVP_PKEY *k = private_key ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : PEM_read_PUBKEY(f, NULL, NULL, NULL);
    fclose(f);
    if (!k) {
        ERR_clear_error();
        return err_set(e, PLUMB_EUSAGE, "%s: not a PEM %s key (expected the output of 'plumb report keygen' or "
                       "'openssl genpkey -algorithm ed25519'%s)", path, private_key ? "private" : "public",
                       private_key ? "" : " then 'openssl pkey -pubout'");
    }
    if (EVP_PKEY_id(k) != EVP_PKEY_ED25519) {
        EVP_PKEY_free(k);
        return err_set(e, PLUMB_EUSAGE, "%s: the key is not Ed25519", path);
    }
    *out = k;
    return PLUMB_OK;
}

static int raw_public(EVP_PKEY *k, unsigned char raw[32], plumb_err *e)
{
    size_t n = 32;
    if (EVP_PKEY_get_raw_public_key(k, raw, &n) != 1 || n != 32) return ossl_fail(e, PLUMB_EINTERNAL, "raw public key");
    return PLUMB_OK;
}

static void fingerprint(const unsigned char raw[32], char *out, size_t n)
{
    char hex[65];
    hash_sha256_hex(raw, 32, hex);
    snprintf(out, n, "sha256:%s", hex);
}

static char *b64(const unsigned char *p, size_t n)
{
    char *s = malloc(4 * ((n + 2) / 3) + 1);
    if (s) EVP_EncodeBlock((unsigned char *)s, p, (int)n);
    return s;
}

/* Decodes base64 (whitespace at the end allowed) into out (room for max);
 * returns the length or -1. */
static int unb64(const char *s, unsigned char *out, int max)
{
    size_t L = strlen(s);
    while (L && (s[L - 1] == '\n' || s[L - 1] == '\r' || s[L - 1] == ' ')) L--;
    if (!L || L % 4 || (int)(L / 4 * 3) > max + 2) return -1;
    unsigned char *tmp = malloc(L / 4 * 3 + 1);
    if (!tmp) return -1;
    int n = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)L);
    if (n >= 0) {
        if (s[L - 1] == '=') n--;
        if (s[L - 2] == '=') n--;
    }
    if (n < 0 || n > max) {
        free(tmp);
        return -1;
    }
    memcpy(out, tmp, (size_t)n);
    free(tmp);
    return n;
}

/* ---------------------------------------------------------------- the files covered */

struct names {
    char **v;
    size_t n, cap;
};

static int names_add(struct names *s, const char *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], p)) return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        char **nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) return -1;
        s->v = nv, s->cap = cap;
    }
    if (!(s->v[s->n] = strdup(p))) return -1;
    s->n++;
    return 0;
}

static void names_free(struct names *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int walk(const char *dir, const char *rel, struct names *out, int depth, plumb_err *e)
{
    if (depth > 16) return err_set(e, PLUMB_EUSAGE, "%s/%s: folders nested too deep", dir, rel);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? PLUMB_OK : err_set(e, PLUMB_EIO, "%s: %s", path, strerror(errno));
    struct dirent *de;
    int rc = PLUMB_OK;
    while (!rc && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char sub[PATH_MAX], full[PATH_MAX + 8];
        if (snprintf(sub, sizeof sub, "%s/%s", rel, de->d_name) >= (int)sizeof sub) continue;
        snprintf(full, sizeof full, "%s/%s", dir, sub);
        struct stat st;
        if (lstat(full, &st)) continue;
        if (S_ISDIR(st.st_mode)) rc = walk(dir, sub, out, depth + 1, e);
        else if (S_ISREG(st.st_mode) && names_add(out, sub)) rc = err_set(e, PLUMB_ENOMEM, "out of memory");
    }
    closedir(d);
    return rc;
}

static int safe_rel(const char *p) { return p && *p && p[0] != '/' && !strstr(p, ".."); }

/* The root document's name: results.json, else compare.json. */
static const char *root_doc(const char *dir)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/results.json", dir);
    if (file_exists(p)) return "results.json";
    snprintf(p, sizeof p, "%s/compare.json", dir);
    if (file_exists(p)) return "compare.json";
    return NULL;
}

static int covered_files(const char *dir, struct names *out, plumb_err *e)
{
    memset(out, 0, sizeof *out);
    const char *root = root_doc(dir);
    if (!root) return err_set(e, PLUMB_EUSAGE, "%s: no results.json or compare.json: not a run folder", dir);
    if (names_add(out, root)) return err_set(e, PLUMB_ENOMEM, "out of memory");
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, root);
    json_t *doc;
    if (jsonx_read_input(p, RESULTS_READ_CAP, &doc, e)) {
        names_free(out);
        return e->code;
    }
    size_t i, j;
    json_t *c, *a;
    json_array_foreach(json_object_get(doc, "checks"), i, c) json_array_foreach(json_object_get(c, "artifacts"), j, a)
    {
        const char *s = json_string_value(a);
        if (safe_rel(s) && names_add(out, s)) {
            json_decref(doc);
            names_free(out);
            return err_set(e, PLUMB_ENOMEM, "out of memory");
        }
    }
    json_decref(doc);
    int rc = walk(dir, "checks", out, 0, e);
    if (rc) {
        names_free(out);
        return rc;
    }
    qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return PLUMB_OK;
}

int sign_check_pub(const char *pub_path, plumb_err *e)
{
    EVP_PKEY *k = NULL;
    int rc = load_key(pub_path, 0, &k, e);
    EVP_PKEY_free(k);
    return rc;
}

/* SHA-256 of a file, streamed. */
static int file_sha256(const char *path, char hex[65], long long *bytes, plumb_err *e)
{
    /* a regular file only: a FIFO put in place of a covered file blocked verify for ever */
    int fd;
    struct stat st;
    int r = file_open_regular(path, 0, &fd, &st);
    if (r > 0) return err_set(e, PLUMB_EIO, "%s: %s", path, strerror(r));
    if (r < 0) return err_set(e, PLUMB_EUSAGE, "%s: not a regular file (%s)", path, file_kind(&st));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return err_set(e, PLUMB_EIO, "%s: %s", path, strerror(errno));
    }
    hash_sha256 h;
    if (hash_sha256_init(&h)) {
        fclose(f);
        return err_set(e, PLUMB_ENOMEM, "sha256 context");
    }
    unsigned char buf[65536];
    size_t n;
    long long total = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        hash_sha256_update(&h, buf, n);
        total += (long long)n;
    }
    int bad = ferror(f);
    fclose(f);
    uint8_t d[32];
    hash_sha256_final(&h, d);
    if (bad) return err_set(e, PLUMB_EIO, "%s: read error", path);
    hash_to_hex(d, 32, hex);
    *bytes = total;
    return PLUMB_OK;
}

/* ---------------------------------------------------------------- sign */

int sign_dir(const char *dir, const char *key_path, int *nfiles, plumb_err *e)
{
    EVP_PKEY *k;
    if (load_key(key_path, 1, &k, e)) return e->code;
    struct names fl;
    int rc = covered_files(dir, &fl, e);
    if (rc) {
        EVP_PKEY_free(k);
        return rc;
    }
    json_t *files = json_array();
    for (size_t i = 0; i < fl.n && !rc; i++) {
        char path[PATH_MAX], hex[65];
        long long bytes;
        snprintf(path, sizeof path, "%s/%s", dir, fl.v[i]);
        if (!(rc = file_sha256(path, hex, &bytes, e)))
            json_array_append_new(files, json_pack("{s:s, s:s, s:I}", "path", fl.v[i], "sha256", hex, "bytes",
                                                   (json_int_t)bytes));
    }
    unsigned char raw[32];
    if (!rc) rc = raw_public(k, raw, e);
    char *man = NULL, *sig64 = NULL;
    if (!rc) {
        char fp[80], when[32];
        fingerprint(raw, fp, sizeof fp);
        sysinfo_utc_iso(timer_wall(), when, sizeof when);
        char *pub64 = b64(raw, 32);
        json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:O}", "schema", MANIFEST_SCHEMA, "algorithm", "ed25519",
                              "signed_at", when, "public_key", pub64 ? pub64 : "", "key_fingerprint", fp, "files", files);
        free(pub64);
        man = json_dumps(m, JSON_INDENT(1) | JSON_SORT_KEYS);
        json_decref(m);
        if (!man) rc = err_set(e, PLUMB_ENOMEM, "out of memory");
    }
    if (!rc) {
        size_t L = strlen(man);
        unsigned char sig[64];
        size_t sl = sizeof sig;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        if (!ctx || EVP_DigestSignInit(ctx, NULL, NULL, NULL, k) != 1 ||
            EVP_DigestSign(ctx, sig, &sl, (const unsigned char *)man, L) != 1 || sl != 64)
            rc = ossl_fail(e, PLUMB_EINTERNAL, "Ed25519 signing");
        EVP_MD_CTX_free(ctx);
        if (!rc && !(sig64 = b64(sig, 64))) rc = err_set(e, PLUMB_ENOMEM, "out of memory");
        char path[PATH_MAX];
        /* the signature first: a crash between the two writes leaves a manifest
         * that does not verify, never a stale signature that seems to */
        if (!rc) {
            snprintf(path, sizeof path, "%s/manifest.sig", dir);
            size_t sn = strlen(sig64);
            sig64[sn] = '\0';
            const void *bufs[2] = {sig64, "\n"};
            size_t lens[2] = {sn, 1};
            rc = file_write_atomic_iov(path, bufs, lens, 2, e);
        }
        if (!rc) {
            snprintf(path, sizeof path, "%s/manifest.json", dir);
            const void *bufs[1] = {man};
            size_t lens[1] = {L};
            rc = file_write_atomic_iov(path, bufs, lens, 1, e);
        }
    }
    if (!rc && nfiles) *nfiles = (int)fl.n;
    free(man);
    free(sig64);
    json_decref(files);
    names_free(&fl);
    EVP_PKEY_free(k);
    return rc;
}

/* ---------------------------------------------------------------- verify */

void sign_check_free(struct sign_check *r)
{
    json_decref(r->problems);
    r->problems = NULL;
}

int sign_check_passed(const struct sign_check *r)
{
    return r->signed_ && r->sig_ok && r->key_matches && r->files_ok;
}

static void problem(struct sign_check *r, const char *fmt, const char *a, const char *b)
{
    char buf[PATH_MAX + 256];
    snprintf(buf, sizeof buf, fmt, a, b ? b : "");
    json_array_append_new(r->problems, json_string(buf));
}

int sign_verify(const char *dir, const char *pub_path, struct sign_check *r, plumb_err *e)
{
    memset(r, 0, sizeof *r);
    r->problems = json_array();
    char mpath[PATH_MAX], spath[PATH_MAX];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    snprintf(spath, sizeof spath, "%s/manifest.sig", dir);
    if (!file_exists(mpath)) return err_set(e, PLUMB_EUSAGE, "%s: not signed (no manifest.json; see 'plumb report sign')", dir);
    r->signed_ = 1;
    char *man = NULL, *sigtxt = NULL;
    size_t mlen, slen;
    if (file_read_input(mpath, RESULTS_READ_CAP, &man, &mlen, e)) return e->code;
    if (!file_exists(spath) || file_read_input(spath, SIGN_KEY_CAP, &sigtxt, &slen, e)) {
        err_clear(e);
        problem(r, "%s: missing or unreadable: the manifest is not signed%s", "manifest.sig", NULL);
        sigtxt = NULL;
    }
    json_error_t je;
    json_t *m = json_loadb(man, mlen, 0, &je);
    if (!json_is_object(m) || strcmp(jsonx_str(m, "schema") ? jsonx_str(m, "schema") : "", MANIFEST_SCHEMA) ||
        !json_is_array(json_object_get(m, "files"))) {
        /* an edited manifest is a failed verification, not bad input: report it */
        char what[256];
        snprintf(what, sizeof what, "manifest.json: not a valid %s manifest any more (%s): edited after signing?",
                 MANIFEST_SCHEMA, m ? "schema or files" : je.text);
        json_array_append_new(r->problems, json_string(what));
        json_decref(m);
        free(man);
        free(sigtxt);
        if (pub_path) {
            r->trusted = 1;
            EVP_PKEY *k;
            if (load_key(pub_path, 0, &k, e)) return e->code;
            unsigned char raw[32];
            if (!raw_public(k, raw, e)) fingerprint(raw, r->fingerprint, sizeof r->fingerprint);
            EVP_PKEY_free(k);
        }
        return PLUMB_OK;
    }
    snprintf(r->signed_at, sizeof r->signed_at, "%s", jsonx_str(m, "signed_at") ? jsonx_str(m, "signed_at") : "");
    /* the key: the caller's (trusted) or the manifest's own */
    EVP_PKEY *k = NULL;
    unsigned char mraw[32];
    const char *m64 = jsonx_str(m, "public_key");
    int mraw_ok = m64 && unb64(m64, mraw, 32) == 32;
    int rc = PLUMB_OK;
    if (pub_path) {
        r->trusted = 1;
        rc = load_key(pub_path, 0, &k, e);
    } else if (mraw_ok) {
        k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, mraw, 32);
        if (!k) rc = ossl_fail(e, PLUMB_EUSAGE, "manifest public_key");
    } else {
        problem(r, "%s: public_key is missing or not 32 base64 bytes%s", "manifest.json", NULL);
    }
    if (!rc && k) {
        unsigned char raw[32];
        if (!(rc = raw_public(k, raw, e))) {
            fingerprint(raw, r->fingerprint, sizeof r->fingerprint);
            r->key_matches = mraw_ok && !memcmp(raw, mraw, 32);
            if (!r->key_matches)
                problem(r, "manifest.json: signed with key %s, not the trusted key %s", jsonx_str(m, "key_fingerprint")
                        ? jsonx_str(m, "key_fingerprint") : "(none)", r->fingerprint);
        }
        unsigned char sig[66];
        int sl = sigtxt ? unb64(sigtxt, sig, 64) : -1;
        if (!rc && sigtxt) {
            if (sl != 64) {
                problem(r, "%s: not a base64 Ed25519 signature (64 bytes)%s", "manifest.sig", NULL);
            } else {
                EVP_MD_CTX *ctx = EVP_MD_CTX_new();
                r->sig_ok = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k) == 1 &&
                            EVP_DigestVerify(ctx, sig, 64, (const unsigned char *)man, mlen) == 1;
                ERR_clear_error();
                EVP_MD_CTX_free(ctx);
                if (!r->sig_ok)
                    problem(r, "manifest.sig: the signature does not verify with key %s: the manifest changed or "
                            "another key signed it", r->fingerprint, NULL);
            }
        }
    }
    EVP_PKEY_free(k);
    free(sigtxt);
    free(man);
    if (rc) {
        json_decref(m);
        return rc;
    }
    /* the files: every listed one as listed, none added */
    r->files_ok = 1;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(m, "files"), i, f)
    {
        const char *p = jsonx_str(f, "path"), *want = jsonx_str(f, "sha256");
        r->nfiles++;
        if (!safe_rel(p) || !want) {
            problem(r, "manifest.json: files[%s] has no safe path or sha256%s", p ? p : "?", NULL);
            r->files_ok = 0;
            continue;
        }
        char path[PATH_MAX + 8], hex[65];
        long long bytes;
        snprintf(path, sizeof path, "%s/%s", dir, p);
        plumb_err fe = {0};
        if (!file_exists(path)) {
            problem(r, "%s: listed in the manifest but missing (removed)%s", p, NULL);
            r->files_ok = 0;
        } else if (file_sha256(path, hex, &bytes, &fe)) {
            problem(r, "%s: cannot be read: %s", p, fe.msg);
            r->files_ok = 0;
        } else if (strcmp(hex, want)) {
            char what[200];
            snprintf(what, sizeof what, "sha256 %.16s... now, %.16s... signed; %lld bytes now", hex, want, bytes);
            problem(r, "%s: changed since signing (%s)", p, what);
            r->files_ok = 0;
        }
    }
    struct names now;
    plumb_err ce = {0};
    if (covered_files(dir, &now, &ce) == PLUMB_OK) {
        for (size_t n = 0; n < now.n; n++) {
            int listed = 0;
            json_array_foreach(json_object_get(m, "files"), i, f) listed |= !strcmp(jsonx_str(f, "path") ? jsonx_str(f, "path") : "", now.v[n]);
            if (!listed) {
                problem(r, "%s: not in the manifest (added after signing)%s", now.v[n], NULL);
                r->files_ok = 0;
            }
        }
        names_free(&now);
    } else {
        problem(r, "the run folder's files cannot be listed: %s%s", ce.msg, NULL);
        r->files_ok = 0;
    }
    json_decref(m);
    return PLUMB_OK;
}

json_t *sign_status_json(const char *dir, const char *pub_path)
{
    char mpath[PATH_MAX];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir ? dir : ".");
    if (!dir || !file_exists(mpath)) return json_pack("{s:s}", "status", "unsigned");
    struct sign_check r;
    plumb_err e = {0};
    if (sign_verify(dir, pub_path, &r, &e)) {
        sign_check_free(&r);
        return json_pack("{s:s, s:s}", "status", "invalid", "message", e.msg);
    }
    int ok = sign_check_passed(&r);
    const char *st = !ok ? "invalid" : r.trusted ? "verified" : "valid";
    char msg[512];
    if (!ok)
        snprintf(msg, sizeof msg, "signature check failed: %s", json_string_value(json_array_get(r.problems, 0)));
    else if (r.trusted)
        snprintf(msg, sizeof msg, "signature verified with the trusted key %.23s...: %d files as signed", r.fingerprint,
                 r.nfiles);
    else
        snprintf(msg, sizeof msg, "signed by key %.23s...: %d files as signed (integrity against the manifest's own "
                 "key; check the key with 'plumb report verify DIR --pub PUB')", r.fingerprint, r.nfiles);
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:O, s:s}", "status", st, "fingerprint", r.fingerprint, "signed_at",
                          r.signed_at, "files", r.nfiles, "problems", r.problems, "message", msg);
    sign_check_free(&r);
    return o;
}
