/* The cpu op table. Each op's implementation lives in its own cpu_op_*.c
 * file; this table only wires them up. */
#include "dev/cpu.h"
#include "dev/train_ops.h"
#include <cblas.h>
#include <stdio.h>

void cpu_blas_describe(char *buf, size_t n)
{
    snprintf(buf, n, "%s", openblas_get_config());
}

const struct dev_ops cpu_ops = {
    .rng_u32 = NULL,
    .rng_uniform = NULL,
    .rng_normal = NULL,
    .gemm = NULL,
    .sum = NULL,
    .softmax = NULL,
    .layernorm = NULL,
    .unary = NULL,
    .cast = NULL,
    .train = &cpu_train_ops,
};
