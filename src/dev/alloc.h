/* Internal to dev/: allocator lifetime, called by dev_open/dev_close. */
#ifndef PLUMB_ALLOC_H
#define PLUMB_ALLOC_H
#include "dev/dev.h"
int alloc_create(struct dev *d, plumb_err *e);
void alloc_destroy(struct dev *d);
#endif
