#include "core/hugemem.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *huge_alloc(size_t n)
{
    if (n < HUGE_PAGE) return malloc(n ? n : 1);
    void *p = NULL;
    /* rounded up to whole huge pages, so the advice covers the tail too */
    size_t len = (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (posix_memalign(&p, HUGE_PAGE, len)) return NULL;
    huge_advise(p, len);
    return p;
}

void huge_advise(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    uintptr_t a = ((uintptr_t)p + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE, b = ((uintptr_t)p + n) / HUGE_PAGE * HUGE_PAGE;
    /* advice only: EINVAL where the kernel has no THP changes nothing */
    if (p && b > a) (void)madvise((void *)a, b - a, MADV_HUGEPAGE);
#else
    (void)p, (void)n;
#endif
}
