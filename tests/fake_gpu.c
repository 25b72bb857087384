/* A stand-in GPU backend plugin for tests: registered as libplumb-hip.so, it
 * is the cpu backend under another name, except that FAKE_GPU_CORRUPT makes
 * one op go wrong, as a faulty device would:
 *   gemm    - flips the lowest mantissa bit of C element 5
 *   normal  - flips the lowest bit of stream element 7 (global index) of rng_normal
 *   adamw_sparse_fast - fast numerics only: the sparse AdamW update uses 8x
 *             the learning rate (the golden path stays right): ctr-tiny's
 *             fast AUC lands ~0.0036 below the cpu's, outside its seed
 *             spread but above the AUC floor, while golden digests agree
 * FAKE_GPU_COUNT=N makes it report N devices (all the same cpu);
 * FAKE_GPU_PCI="0000:12:00.0,..." gives device i the i-th PCI bus id.
 * tests/t_numerics.sh uses it to prove that golden/rng digests are compared
 * with the cpu's and that a mismatch names the op and the element. The cpu
 * backend's symbols come from the executable (linked with -rdynamic). */
#include "dev/dev.h"
#include "dev/train_ops.h"
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static struct dev_backend fake_be;
static struct dev_ops fake_ops;
static struct train_ops fake_train;

static int corrupt(const char *what)
{
    const char *c = getenv("FAKE_GPU_CORRUPT");
    return c && !strcmp(c, what);
}

static int fake_gemm(struct dev *d, dev_stream *s, const struct gemm_desc *g)
{
    int rc = cpu_backend.ops->gemm(d, s, g);
    if (!rc && corrupt("gemm") && (size_t)g->m * g->n > 5) {
        int i = 5 / g->n, j = 5 % g->n;
        uint32_t u;
        memcpy(&u, &g->c[(size_t)i * g->ldc + j], 4);
        u ^= 1u;
        memcpy(&g->c[(size_t)i * g->ldc + j], &u, 4);
    }
    return rc;
}

static int fake_normal(struct dev *d, dev_stream *s, const struct rng_stream *st, uint64_t first,
                       float *out, size_t n)
{
    int rc = cpu_backend.ops->rng_normal(d, s, st, first, out, n);
    if (!rc && corrupt("normal") && first <= 7 && 7 < first + n) {
        uint32_t u;
        memcpy(&u, &out[7 - first], 4);
        u ^= 1u;
        memcpy(&out[7 - first], &u, 4);
    }
    return rc;
}

static int fake_adamw_sparse(struct dev *d, dev_stream *s, float *table, float *m, float *v, const int64_t *rows,
                             const float *grads, size_t n, int D, float lr, float b1, float b2, float eps, float wd,
                             float bc1, float bc2, plumb_err *e)
{
    if (d->numerics == NUMERICS_FAST && corrupt("adamw_sparse_fast")) lr *= 8.0f;
    return cpu_backend.ops->train->adamw_sparse(d, s, table, m, v, rows, grads, n, D, lr, b1, b2, eps, wd, bc1, bc2,
                                                e);
}

static int fake_device_count(int *count, plumb_err *e)
{
    const char *n = getenv("FAKE_GPU_COUNT");
    if (n && atoi(n) > 0) {
        *count = atoi(n);
        return 0;
    }
    return cpu_backend.device_count(count, e);
}

static int fake_open(struct dev *d, int ordinal, plumb_err *e)
{
    int rc = cpu_backend.open(d, ordinal, e);
    const char *pci = getenv("FAKE_GPU_PCI");
    if (rc || !pci) return rc;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", pci);
    int i = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), i++)
        if (i == ordinal) snprintf(d->info.pci_bus_id, sizeof d->info.pci_bus_id, "%s", t);
    return PLUMB_OK;
}

int plumb_backend_register_v1(int abi, const struct dev_backend **out, plumb_err *e)
{
    (void)e;
    if (abi != PLUMB_BACKEND_ABI) return PLUMB_EUNSUPPORTED;
    fake_be = cpu_backend;
    fake_ops = *cpu_backend.ops;
    fake_ops.gemm = fake_gemm;
    fake_ops.rng_normal = fake_normal;
    fake_train = *cpu_backend.ops->train;
    fake_train.adamw_sparse = fake_adamw_sparse;
    fake_ops.train = &fake_train;
    fake_be.name = "hip";
    fake_be.ops = &fake_ops;
    fake_be.device_count = fake_device_count;
    fake_be.open = fake_open;
    *out = &fake_be;
    return PLUMB_OK;
}
