/* Caching allocator shared by every backend.
 *
 * Sizes are rounded (512 B granules below 1 MiB, 2 MiB above) so that freed
 * blocks are reused exactly by later requests of the same class, as
 * training loops allocate the same shapes every step. Freed blocks go to a
 * per-class cache instead of back to the backend; dev_empty_cache returns
 * them (the first OOM recovery tier). Counters follow PyTorch's meaning:
 * allocated = held by callers, reserved = obtained from the backend. */
#include "dev/dev.h"
#include "dev/alloc.h"
#include "core/hostinfo.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct block {
    void *p;
    size_t size; /* rounded */
    struct block *next;
};

struct dev_alloc {
    pthread_mutex_t lock;
    size_t budget;         /* cpu: the most it may reserve (0: no limit) */
    int budget_env;        /* the budget is PLUMB_CPU_MEM_LIMIT_MB's */
    struct block **live;   /* open-addressing hash: pointer -> block */
    size_t live_cap, live_n;
    struct block *cache;   /* free blocks, singly linked */
    struct dev_mem_stats st;
    int inject_failures;
};

static size_t round_size(size_t n)
{
    if (n == 0) n = 1;
    if (n < (1u << 20)) return (n + 511) & ~(size_t)511;
    size_t g = (size_t)2 << 20;
    return (n + g - 1) / g * g;
}

static size_t ptr_hash(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int live_insert(struct dev_alloc *a, struct block *b);

static int live_grow(struct dev_alloc *a)
{
    size_t ncap = a->live_cap ? a->live_cap * 2 : 1024;
    struct block **old = a->live;
    size_t ocap = a->live_cap;
    a->live = calloc(ncap, sizeof *a->live);
    if (!a->live) {
        a->live = old;
        return -1;
    }
    a->live_cap = ncap;
    a->live_n = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i]) live_insert(a, old[i]);
    free(old);
    return 0;
}

static int live_insert(struct dev_alloc *a, struct block *b)
{
    if ((a->live_n + 1) * 2 > a->live_cap && live_grow(a) != 0) return -1;
    size_t i = ptr_hash(b->p, a->live_cap);
    while (a->live[i]) i = (i + 1) & (a->live_cap - 1);
    a->live[i] = b;
    a->live_n++;
    return 0;
}

static struct block *live_remove(struct dev_alloc *a, const void *p)
{
    if (!a->live_cap) return NULL;
    size_t i = ptr_hash(p, a->live_cap);
    while (a->live[i] && a->live[i]->p != p) i = (i + 1) & (a->live_cap - 1);
    struct block *b = a->live[i];
    if (!b) return NULL;
    a->live[i] = NULL;
    a->live_n--;
    /* re-insert the rest of the probe run (backward-shift deletion) */
    for (size_t j = (i + 1) & (a->live_cap - 1); a->live[j]; j = (j + 1) & (a->live_cap - 1)) {
        struct block *m = a->live[j];
        a->live[j] = NULL;
        a->live_n--;
        live_insert(a, m);
    }
    return b;
}

int alloc_create(struct dev *d, plumb_err *e)
{
    struct dev_alloc *a = calloc(1, sizeof *a);
    if (!a) return err_set(e, PLUMB_ENOMEM, "allocator state: out of host memory");
    pthread_mutex_init(&a->lock, NULL);
    /* The cpu's buffers come from the host's memory, where an allocation
     * larger than what is free still succeeds (pages are committed when
     * touched) and the kernel's OOM killer ends the process later: plumb
     * bench resnet's defaults (resnet50, batch 256 at 224x224) were SIGKILLed
     * on a 24 GB host. So the cpu device may reserve at most 90% of the
     * host's MemAvailable when it was opened, and a request past that is
     * PLUMB_ENOMEM, which the trainer reports as a usage error naming
     * --batch. A GPU's allocator says so itself. PLUMB_CPU_MEM_LIMIT_MB (a
     * positive integer) sets the budget instead: a share of a shared host,
     * and the tests' way to reach this path without filling the machine. */
    if (d->be && d->be->name && !strcmp(d->be->name, "cpu")) {
        const char *lim = getenv("PLUMB_CPU_MEM_LIMIT_MB");
        char *end = NULL;
        const long long mb = lim && *lim ? strtoll(lim, &end, 10) : 0;
        if (lim && *lim && (*end || mb < 1)) {
            pthread_mutex_destroy(&a->lock);
            free(a);
            return err_set(e, PLUMB_EUSAGE, "PLUMB_CPU_MEM_LIMIT_MB=%s: expected a positive number of MiB", lim);
        }
        const double avail = hostinfo_mem_available();
        a->budget_env = mb > 0;
        if (mb > 0) a->budget = (size_t)mb << 20;
        else if (avail > 0) a->budget = (size_t)(0.9 * avail);
    }
    d->alloc = a;
    return PLUMB_OK;
}

static void release_cache(struct dev *d, struct dev_alloc *a)
{
    while (a->cache) {
        struct block *b = a->cache;
        a->cache = b->next;
        d->be->raw_free(d, b->p);
        a->st.reserved -= b->size;
        a->st.n_raw_free++;
        free(b);
    }
}

void alloc_destroy(struct dev *d)
{
    struct dev_alloc *a = d->alloc;
    if (!a) return;
    release_cache(d, a);
    for (size_t i = 0; i < a->live_cap; i++) {
        if (!a->live[i]) continue;
        d->be->raw_free(d, a->live[i]->p);
        free(a->live[i]);
    }
    free(a->live);
    pthread_mutex_destroy(&a->lock);
    free(a);
    d->alloc = NULL;
}

/* The backend's allocation, within the cpu's budget: past it is PLUMB_ENOMEM
 * like a failed allocation, so dev_alloc's retry after returning the cache
 * (cached blocks count against the budget too) covers it. a->lock is held. */
static int raw_alloc(struct dev *d, struct dev_alloc *a, size_t sz, void **p, plumb_err *e)
{
    if (a->budget && a->st.reserved + sz > a->budget)
        return err_set(e, PLUMB_ENOMEM,
                       "%s: %.2f GB more would bring this device's buffers to %.2f GB, past the %.2f GB it may take (%s)",
                       d->label, sz / 1e9, (a->st.reserved + sz) / 1e9, a->budget / 1e9,
                       a->budget_env ? "PLUMB_CPU_MEM_LIMIT_MB" : "90% of the host's available memory when it opened");
    return d->be->raw_alloc(d, sz, p, e);
}

int dev_alloc(struct dev *d, size_t bytes, void **p, plumb_err *e)
{
    struct dev_alloc *a = d->alloc;
    size_t sz = round_size(bytes);
    *p = NULL;
    pthread_mutex_lock(&a->lock);
    if (a->inject_failures > 0) {
        a->inject_failures--;
        pthread_mutex_unlock(&a->lock);
        return err_set(e, PLUMB_ENOMEM, "%s: out of memory allocating %zu bytes (injected)",
                       d->label, bytes);
    }
    struct block **pp = &a->cache, *b = NULL;
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->size == sz) {
            b = *pp;
            *pp = b->next;
            a->st.n_cache_hits++;
            break;
        }
    }
    if (!b) {
        b = calloc(1, sizeof *b);
        if (!b) {
            pthread_mutex_unlock(&a->lock);
            return err_set(e, PLUMB_ENOMEM, "allocator bookkeeping: out of host memory");
        }
        int rc = raw_alloc(d, a, sz, &b->p, e);
        if (rc != PLUMB_OK) {
            /* one retry after returning the cache, as the caller would */
            release_cache(d, a);
            rc = raw_alloc(d, a, sz, &b->p, e);
        }
        if (rc != PLUMB_OK) {
            free(b);
            pthread_mutex_unlock(&a->lock);
            return rc;
        }
        b->size = sz;
        a->st.reserved += sz;
        a->st.n_raw_alloc++;
        if (a->st.reserved > a->st.peak_reserved) a->st.peak_reserved = a->st.reserved;
    }
    if (live_insert(a, b) != 0) {
        b->next = a->cache;
        a->cache = b;
        pthread_mutex_unlock(&a->lock);
        return err_set(e, PLUMB_ENOMEM, "allocator bookkeeping: out of host memory");
    }
    a->st.allocated += sz;
    a->st.n_alloc++;
    if (a->st.allocated > a->st.peak_allocated) a->st.peak_allocated = a->st.allocated;
    pthread_mutex_unlock(&a->lock);
    *p = b->p;
    return PLUMB_OK;
}

void dev_free(struct dev *d, void *p)
{
    if (!p) return;
    struct dev_alloc *a = d->alloc;
    pthread_mutex_lock(&a->lock);
    struct block *b = live_remove(a, p);
    if (b) {
        a->st.allocated -= b->size;
        a->st.n_free++;
        b->next = a->cache;
        a->cache = b;
    }
    pthread_mutex_unlock(&a->lock);
}

void dev_empty_cache(struct dev *d)
{
    struct dev_alloc *a = d->alloc;
    pthread_mutex_lock(&a->lock);
    release_cache(d, a);
    pthread_mutex_unlock(&a->lock);
}

void dev_mem_stats(struct dev *d, struct dev_mem_stats *st)
{
    struct dev_alloc *a = d->alloc;
    pthread_mutex_lock(&a->lock);
    *st = a->st;
    pthread_mutex_unlock(&a->lock);
}

void dev_inject_alloc_failures(struct dev *d, int count)
{
    struct dev_alloc *a = d->alloc;
    pthread_mutex_lock(&a->lock);
    a->inject_failures = count;
    pthread_mutex_unlock(&a->lock);
}
