/* Big arrays read at random: memory the kernel may back with 2 MiB pages.
 * A ctr batch gathers B samples of 160 bytes from anywhere in a pool of GBs
 * (models/ctr/data.c), so with 4 KiB pages nearly every sample is a TLB miss
 * and a page walk; a 2 MiB-aligned block advised MADV_HUGEPAGE is backed by
 * transparent huge pages where THP is "madvise" (Debian's and Ubuntu's
 * default) or "always", and stays an ordinary allocation where it is
 * "never". bench/feed_host.c measures the difference. */
#ifndef PLUMB_CORE_HUGEMEM_H
#define PLUMB_CORE_HUGEMEM_H
#include <stddef.h>

/* n bytes (uninitialised), NULL when out of memory; release with free().
 * Below 2 MiB it is a plain malloc. */
void *huge_alloc(size_t n);
/* Advice for a block already allocated (a buffer that realloc grows: glibc
 * moves a big block with mremap, which keeps the advice): the whole 2 MiB
 * pages inside [p, p + n) may be backed by huge pages from now on. */
void huge_advise(void *p, size_t n);

#endif
