/* Internal to the cpu backend: the op table and helpers shared by cpu_*.c. */
#ifndef PLUMB_CPU_H
#define PLUMB_CPU_H
#include "dev/dev.h"
extern const struct dev_ops cpu_ops;
/* "OpenBLAS 0.3.21 (config...)" */
void cpu_blas_describe(char *buf, size_t n);
#endif
