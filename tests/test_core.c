/* core/: errors, files, hashing. */
#include "test.h"
#include "core/err.h"
#include "core/file.h"
#include "core/hash.h"
#include "core/jsonx.h"
#include "dev/dev.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TEST(core_err_exit_codes)
{
    plumb_err e = {0};
    CHECK_EQ_INT(err_set(&e, PLUMB_EUSAGE, "--count: '%s' is bad", "x"), PLUMB_EUSAGE);
    CHECK_STREQ(e.msg, "--count: 'x' is bad");
    err_wrap(&e, "parsing %s", "args");
    CHECK_STREQ(e.msg, "parsing args: --count: 'x' is bad");
    CHECK_EQ_INT(err_exit_code(PLUMB_OK), 0);
    CHECK_EQ_INT(err_exit_code(PLUMB_EFAIL), 1);
    CHECK_EQ_INT(err_exit_code(PLUMB_EUSAGE), 2);
    CHECK_EQ_INT(err_exit_code(PLUMB_EIO), 3);
}

TEST(core_sha256_known_answers)
{
    char hex[65];
    /* FIPS 180-2 examples */
    hash_sha256_hex("abc", 3, hex);
    CHECK_STREQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hash_sha256_hex("", 0, hex);
    CHECK_STREQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK_EQ_INT(hash_crc32(0, "123456789", 9), 0xcbf43926u);
}

TEST(core_atomic_write_survives_crash_before_rename)
{
    char path[512];
    plumb_err e = {0};
    REQUIRE(file_join(path, sizeof path, test_tmpdir(), "atomic.txt", &e) == 0);
    REQUIRE(file_write_atomic(path, "old contents", 12, &e) == 0);
    file_test_fail_before_rename = 1;
    int rc = file_write_atomic(path, "NEW CONTENTS THAT ARE LONGER", 28, &e);
    file_test_fail_before_rename = 0;
    CHECK(rc == PLUMB_EIO);
    char *data = NULL;
    size_t len = 0;
    REQUIRE(file_read_all(path, &data, &len, &e) == 0);
    CHECK_EQ_INT(len, 12);
    CHECK_STREQ(data, "old contents");
    free(data);
    REQUIRE(file_write_atomic(path, "new", 3, &e) == 0);
    REQUIRE(file_read_all(path, &data, &len, &e) == 0);
    CHECK_STREQ(data, "new");
    free(data);
}

/* The rename of an atomic write replaces whatever the path names: a FIFO (or, as
 * root, a device such as /dev/null) became a regular file. Refused, the FIFO kept;
 * file_check_output says so before any work. */
TEST(core_atomic_write_refuses_a_fifo)
{
    char path[512];
    plumb_err e = {0};
    REQUIRE(file_join(path, sizeof path, test_tmpdir(), "out.fifo", &e) == 0);
    unlink(path);
    REQUIRE(mkfifo(path, 0644) == 0);
    CHECK(file_write_atomic(path, "x", 1, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "a FIFO, not a regular file") != NULL);
    plumb_err ce = {0};
    CHECK(file_check_output("--out", path, &ce) == PLUMB_EUSAGE);
    CHECK(strstr(ce.msg, "--out") && strstr(ce.msg, "a FIFO"));
    struct stat st;
    CHECK(lstat(path, &st) == 0 && S_ISFIFO(st.st_mode));
    unlink(path);
}

TEST(core_read_missing_file_names_it)
{
    plumb_err e = {0};
    char *data;
    CHECK(file_read_all("/nonexistent/plumb/file", &data, NULL, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "/nonexistent/plumb/file") != NULL);
}

/* A directory where a file is expected (gpt --data text:DIR, --init-from
 * DIR, --thresholds DIR, ...) is the user's input: PLUMB_EUSAGE (exit 2)
 * naming it, not PLUMB_EIO's exit 3 "read DIR: Is a directory". */
TEST(core_read_directory_is_a_usage_error)
{
    plumb_err e = {0};
    char dir[600], *data = NULL;
    snprintf(dir, sizeof dir, "%s/read-a-dir", test_tmpdir());
    REQUIRE(file_mkdirs(dir, &e) == 0);
    CHECK_EQ_INT(file_read_all(dir, &data, NULL, &e), PLUMB_EUSAGE);
    CHECK_MSG(strstr(e.msg, dir) && strstr(e.msg, "is a directory (expected a file)"), "%s", e.msg);
    CHECK(data == NULL);
}

TEST(core_json_roundtrip)
{
    char path[512];
    plumb_err e = {0};
    REQUIRE(file_join(path, sizeof path, test_tmpdir(), "rt.json", &e) == 0);
    json_t *j = json_pack("{s:s, s:f, s:I, s:[i,i], s:s}", "name", "rng \"<x>\"", "pi", 3.141592653589793,
                          "big", (json_int_t)9007199254740993LL, "arr", 1, 2, "utf8", "\xc3\xa9t\xc3\xa9");
    REQUIRE(j);
    REQUIRE(jsonx_write_file(path, j, &e) == 0);
    json_t *k = NULL;
    REQUIRE(jsonx_read_file(path, &k, &e) == 0);
    CHECK(json_equal(j, k));
    CHECK(jsonx_num(k, "pi") == 3.141592653589793);
    json_decref(j);
    json_decref(k);
    /* a bad file names itself and the line */
    REQUIRE(file_write_atomic(path, "{\n \"a\": }\n", 10, &e) == 0);
    CHECK(jsonx_read_file(path, &k, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "rt.json:2") != NULL);
}

TEST(dev_caching_allocator_counters)
{
    struct dev *d;
    plumb_err e = {0};
    REQUIRE(dev_open("cpu", &d, &e) == 0);
    void *a, *b, *c;
    REQUIRE(dev_alloc(d, 1000, &a, &e) == 0);
    REQUIRE(dev_alloc(d, 3 << 20, &b, &e) == 0);
    struct dev_mem_stats st;
    dev_mem_stats(d, &st);
    CHECK_EQ_INT(st.allocated, 1024 + (4 << 20));
    CHECK_EQ_INT(st.reserved, st.allocated);
    dev_free(d, a);
    dev_mem_stats(d, &st);
    CHECK_EQ_INT(st.allocated, 4 << 20);
    CHECK_EQ_INT(st.reserved, 1024 + (4 << 20)); /* cached, not released */
    REQUIRE(dev_alloc(d, 900, &c, &e) == 0);     /* same class: reused */
    CHECK(c == a);
    dev_mem_stats(d, &st);
    CHECK_EQ_INT(st.n_cache_hits, 1);
    CHECK_EQ_INT(st.peak_allocated, 1024 + (4 << 20));
    dev_free(d, b);
    dev_free(d, c);
    dev_empty_cache(d);
    dev_mem_stats(d, &st);
    CHECK_EQ_INT(st.reserved, 0);
    CHECK_EQ_INT(st.allocated, 0);
    dev_inject_alloc_failures(d, 1);
    CHECK(dev_alloc(d, 10, &a, &e) == PLUMB_ENOMEM);
    CHECK(dev_alloc(d, 10, &a, &e) == 0);
    dev_free(d, a);
    dev_close(d);
}

TEST(dev_open_rejects_bad_spec)
{
    struct dev *d;
    plumb_err e = {0};
    CHECK(dev_open("tpu", &d, &e) == PLUMB_EUSAGE);
    CHECK(strstr(e.msg, "tpu") != NULL);
    CHECK(dev_open("cpu:x", &d, &e) == PLUMB_EUSAGE);
}

TEST(dev_cpu_fallback_can_be_turned_off)
{
    /* "cuda:63" cannot be opened on any host we test on (no plugin, no
     * driver, or fewer devices): with fallback on the cpu is opened instead,
     * with it off the device error comes back. */
    struct dev *d = NULL;
    plumb_err e = {0};
    REQUIRE(dev_open_or_cpu("cuda:63", &d, &e) == 0);
    CHECK_STREQ(d->be->name, "cpu");
    dev_close(d);
    dev_set_cpu_fallback(0);
    d = NULL;
    CHECK(dev_open_or_cpu("cuda:63", &d, &e) == PLUMB_EDEVICE);
    CHECK(d == NULL);
    CHECK(strstr(e.msg, "cuda") != NULL);
    dev_set_cpu_fallback(1);
}
