/* The cpu op table. Each op's implementation lives in its own cpu_op_*.c
 * file; this table only wires them up. */
#include "dev/cpu.h"
#include "dev/cpu_numerics.h"
#include "dev/train_ops.h"
#include <cblas.h>
#include <stdio.h>

void cpu_blas_describe(char *buf, size_t n)
{
    snprintf(buf, n, "%s", openblas_get_config());
}

const struct dev_ops cpu_ops = {
    .rng_u32 = cpu_rng_u32,
    .rng_uniform = cpu_rng_uniform,
    .rng_normal = cpu_rng_normal,
    .gemm = cpu_gemm,
    .sum = cpu_sum,
    .softmax = cpu_softmax,
    .layernorm = cpu_layernorm,
    .unary = cpu_unary,
    .cast = cpu_cast,
    .train = &cpu_train_ops,
};
