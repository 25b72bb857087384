/* core/hugemem: the ctr sample pools' memory. huge_alloc gives usable
 * memory of any size (2 MiB aligned from 2 MiB up), and where the kernel's
 * THP mode is "madvise" or "always" the mapping is advised MADV_HUGEPAGE
 * (VmFlags "hg" in /proc/self/smaps), so the kernel may back it with huge
 * pages (AnonHugePages, reported); huge_advise does the same for a block
 * realloc grew. Skipped where THP is "never" or absent. */
#include "test.h"
#include "core/hugemem.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

/* "always", "madvise" or "never" (the bracketed word), "" when unknown */
static void thp_mode(char *out, size_t n)
{
    out[0] = 0;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char line[128];
    if (f && fgets(line, sizeof line, f)) {
        char *a = strchr(line, '['), *b = a ? strchr(a, ']') : NULL;
        if (a && b) snprintf(out, n, "%.*s", (int)(b - a - 1), a + 1);
    }
    if (f) fclose(f);
}

/* The line of /proc/self/smaps starting with key for the mapping holding
 * address p, into out; 0 when the mapping or the line is not there */
static int smaps_line(const void *p, const char *key, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[1024];
    int in = 0, found = 0;
    const uintptr_t a = (uintptr_t)p;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            if (in) break;
            in = a >= lo && a < hi;
        } else if (in && !strncmp(line, key, strlen(key))) {
            snprintf(out, n, "%s", line);
            found = 1;
            break;
        }
    }
    if (f) fclose(f);
    return found;
}

/* kB of huge pages in the mapping holding address p (-1: no such mapping) */
static long huge_kb_at(const void *p)
{
    char line[1024];
    long kb = -1;
    if (smaps_line(p, "AnonHugePages:", line, sizeof line)) (void)sscanf(line, "AnonHugePages: %ld kB", &kb);
    return kb;
}

/* The VmFlags of the mapping holding p contain "hg" (MADV_HUGEPAGE applied):
 * 1, 0, or -1 when the mapping or the line is not found */
static int advised_at(const void *p)
{
    char line[1024];
    if (!smaps_line(p, "VmFlags:", line, sizeof line)) return -1;
    return strstr(line, " hg") != NULL;
}

TEST(hugemem_sizes_usable_and_aligned)
{
    const size_t sizes[] = {0, 1, 4095, 2 * MIB - 1, 2 * MIB, 2 * MIB + 1, 7 * MIB + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char *p = huge_alloc(sizes[i]);
        CHECK_MSG(p != NULL, "huge_alloc(%zu) failed", sizes[i]);
        if (!p) continue;
        if (sizes[i] >= 2 * MIB) CHECK_MSG((uintptr_t)p % (2 * MIB) == 0, "huge_alloc(%zu) = %p: not 2 MiB aligned", sizes[i], (void *)p);
        for (size_t k = 0; k < sizes[i]; k += 4096) p[k] = (unsigned char)k;
        if (sizes[i]) p[sizes[i] - 1] = 7;
        CHECK(sizes[i] == 0 || p[sizes[i] - 1] == 7);
        free(p);
    }
    huge_advise(NULL, 0);     /* nothing to advise: no effect */
    huge_advise(NULL, 4 * MIB);
    char small[64];
    huge_advise(small, sizeof small); /* no whole huge page inside: no effect */
}

/* Free blocks of 2 MiB or more in the kernel's Normal zones (/proc/buddyinfo,
 * 4 KiB pages: order 9 and up), counted in 2 MiB units; -1 unknown */
static long free_2m_blocks(void)
{
    FILE *f = fopen("/proc/buddyinfo", "r");
    char line[512];
    long n = -1;
    while (f && fgets(line, sizeof line, f)) {
        char *z = strstr(line, "zone");
        if (!z || !strstr(z, "Normal")) continue;
        char *q = z + 4;
        while (*q == ' ') q++;
        while (*q && *q != ' ') q++; /* the zone's name */
        long cnt[16];
        int k = 0;
        char *end;
        for (; k < 16; k++, q = end) {
            cnt[k] = strtol(q, &end, 10);
            if (end == q) break;
        }
        if (n < 0) n = 0;
        for (int o = 9; o < k; o++) n += cnt[o] << (o - 9);
    }
    if (f) fclose(f);
    return n;
}

/* Whether the kernel backs an advised mapping with huge pages is its
 * choice, not plumb's: it measured 0 kB in two of four full runs of the
 * suite on the build machine (a VM), with thousands of free 2 MiB blocks in
 * /proc/buddyinfo and no memory cgroup limit, and the bar every time alone.
 * So what is checked is what plumb controls: the mapping carries the advice
 * (VmFlags "hg"; tests/mutants.txt drops the madvise and this fails). The
 * backing is measured over up to three fresh blocks and a shortfall is
 * reported with what the kernel said, not failed. */
static void report_huge(const char *what, long kb, long want_kb, const char *mode)
{
    if (kb >= want_kb) return;
    char thp[64] = "?", line[256];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "THP_enabled:", 12)) snprintf(thp, sizeof thp, "%.*s", (int)strcspn(line + 12, "\n"), line + 12);
    if (f) fclose(f);
    int pol = -1;
    unsigned long mask = 0;
    (void)syscall(SYS_get_mempolicy, &pol, &mask, sizeof mask * 8, NULL, 0);
    fprintf(stderr, "  note: %s, THP %s: %ld kB on huge pages, under the %ld kB bar (free 2 MiB blocks %ld, "
            "THP_enabled%s, mempolicy %d): the kernel's choice, not checked\n",
            what, mode, kb, want_kb, free_2m_blocks(), thp, pol);
}

TEST(hugemem_pages_are_huge_where_thp_allows)
{
    char mode[32];
    thp_mode(mode, sizeof mode);
    if (strcmp(mode, "madvise") && strcmp(mode, "always")) TEST_SKIP("transparent huge pages: '%s'", mode);
    const size_t n = 64 * MIB;
    /* the kernel may fall back to small pages when it cannot find free 2 MiB
     * blocks; half of the block is the bar, over up to three fresh blocks */
    long kb = -1;
    for (int t = 0; t < 3 && kb < (long)(n / 2 / 1024); t++) {
        unsigned char *p = huge_alloc(n);
        REQUIRE(p != NULL);
        memset(p, 1, n);
        CHECK_MSG(advised_at(p) == 1, "huge_alloc(64 MiB): the mapping is not advised MADV_HUGEPAGE");
        kb = huge_kb_at(p);
        free(p);
    }
    report_huge("huge_alloc(64 MiB)", kb, (long)(n / 2 / 1024), mode);
    /* a malloc'd block grown by realloc, advised after each growth */
    long kbv = -1;
    for (int t = 0; t < 3 && kbv < (long)(64 * MIB / 4 / 1024); t++) {
        size_t cap = 4 * MIB;
        unsigned char *v = malloc(cap);
        REQUIRE(v != NULL);
        huge_advise(v, cap);
        memset(v, 2, cap);
        for (int i = 0; i < 4; i++) {
            unsigned char *nv = realloc(v, cap * 2);
            REQUIRE(nv != NULL);
            v = nv;
            huge_advise(v, cap * 2);
            memset(v + cap, 3, cap);
            cap *= 2;
        }
        CHECK_MSG(advised_at(v + cap / 2) == 1, "a realloc'd %zu MiB block: the mapping is not advised", cap / MIB);
        kbv = huge_kb_at(v + cap / 2);
        CHECK(v[0] == 2 && v[cap - 1] == 3);
        free(v);
    }
    report_huge("a realloc'd 64 MiB block", kbv, (long)(64 * MIB / 4 / 1024), mode);
}
