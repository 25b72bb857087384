/* PLUMB_GRAPH_DUMP=FILE: each captured graph (a training step, backend.cu's
 * gpu_graph_end) appended to FILE as one line a node, in the order the graph
 * lists them (capture order), before it is instantiated:
 *   K <n> <kernel name> grid=X,Y,Z block=X,Y,Z smem=<bytes>
 *   M <n> memset bytes=<width*height*element> value=<v>
 *   C <n> memcpy
 *   O <n> type=<cudaGraphNodeType>
 * then a "# totals" line. It answers what a CUPTI kernel table cannot: which
 * call puts the step's memsets (or copies) in the graph, by the kernels on
 * either side. A diagnostic only: a failure to write is reported on stderr
 * and never fails the capture.
 *
 * Kernel names come from the driver (cuFuncGetName / cuKernelGetName through
 * cudaGetDriverEntryPointByVersion, no link to libcuda): a library's kernels
 * (cuBLASLt, cuDNN) are registered with their own runtime, so the runtime's
 * cudaFuncGetName cannot name them. Devices capturing on several threads
 * write whole graphs, one at a time (g_dump_lock). */
#include "gpu/gpu.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(PLUMB_HIP)
#include <cuda.h>

static pthread_mutex_t g_dump_lock = PTHREAD_MUTEX_INITIALIZER;

typedef CUresult (*kparams_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*fname_fn)(const char **, CUfunction);
typedef CUresult (*kname_fn)(const char **, CUkernel);

static void *entry(const char *sym, unsigned ver)
{
    void *f = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(sym, &f, ver, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        return NULL;
    return f;
}

static const char *kernel_name(cudaGraphNode_t n, CUDA_KERNEL_NODE_PARAMS *kp)
{
    static kparams_fn get;
    static fname_fn fname;
    static kname_fn kname;
    static int tried;
    if (!tried) {
        tried = 1;
        get = (kparams_fn)entry("cuGraphKernelNodeGetParams", 12000);
        fname = (fname_fn)entry("cuFuncGetName", 12030);
        kname = (kname_fn)entry("cuKernelGetName", 12030);
    }
    memset(kp, 0, sizeof *kp);
    const char *name = NULL;
    if (!get || get((CUgraphNode)n, kp) != CUDA_SUCCESS) return "?";
    if (kp->func && fname && fname(&name, kp->func) == CUDA_SUCCESS && name) return name;
    if (kp->kern && kname && kname(&name, kp->kern) == CUDA_SUCCESS && name) return name;
    return "?";
}

/* one graph appended to path; the caller holds g_dump_lock */
static void dump_locked(struct dev *d, cudaGraph_t g, const char *path)
{
    static int seq;
    size_t n = 0;
    if (cudaGraphGetNodes(g, NULL, &n) != cudaSuccess) {
        (void)cudaGetLastError();
        fprintf(stderr, "%s: PLUMB_GRAPH_DUMP: cudaGraphGetNodes failed\n", d->label);
        return;
    }
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)calloc(n ? n : 1, sizeof *nodes);
    FILE *f = fopen(path, "a");
    if (!nodes || !f) {
        fprintf(stderr, "%s: PLUMB_GRAPH_DUMP: cannot open '%s' or hold %zu nodes\n", d->label, path, n);
        free(nodes);
        if (f) fclose(f);
        return;
    }
    if (cudaGraphGetNodes(g, nodes, &n) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 0;
    }
    fprintf(f, "# graph %d on %s: %zu nodes\n", seq++, d->label, n);
    size_t nk = 0, nm = 0, nc = 0, no = 0, mbytes = 0;
    for (size_t i = 0; i < n; i++) {
        cudaGraphNodeType t;
        if (cudaGraphNodeGetType(nodes[i], &t) != cudaSuccess) {
            (void)cudaGetLastError();
            fprintf(f, "O %zu type=?\n", i);
            no++;
            continue;
        }
        if (t == cudaGraphNodeTypeKernel) {
            CUDA_KERNEL_NODE_PARAMS kp;
            const char *name = kernel_name(nodes[i], &kp);
            fprintf(f, "K %zu %s grid=%u,%u,%u block=%u,%u,%u smem=%u\n", i, name, kp.gridDimX, kp.gridDimY,
                    kp.gridDimZ, kp.blockDimX, kp.blockDimY, kp.blockDimZ, kp.sharedMemBytes);
            nk++;
        } else if (t == cudaGraphNodeTypeMemset) {
            cudaMemsetParams mp;
            memset(&mp, 0, sizeof mp);
            if (cudaGraphMemsetNodeGetParams(nodes[i], &mp) != cudaSuccess) (void)cudaGetLastError();
            const size_t b = mp.width * (mp.height ? mp.height : 1) * mp.elementSize;
            fprintf(f, "M %zu memset bytes=%zu value=%u\n", i, b, mp.value);
            nm++;
            mbytes += b;
        } else if (t == cudaGraphNodeTypeMemcpy) {
            fprintf(f, "C %zu memcpy\n", i);
            nc++;
        } else {
            fprintf(f, "O %zu type=%d\n", i, (int)t);
            no++;
        }
    }
    fprintf(f, "# totals: %zu kernels, %zu memsets (%zu bytes), %zu copies, %zu other\n", nk, nm, mbytes, nc, no);
    if (fclose(f)) fprintf(stderr, "%s: PLUMB_GRAPH_DUMP: writing '%s' failed\n", d->label, path);
    free(nodes);
}

void gpu_graph_dump(struct dev *d, cudaGraph_t g)
{
    const char *path = getenv("PLUMB_GRAPH_DUMP");
    if (!path || !*path) return;
    pthread_mutex_lock(&g_dump_lock);
    dump_locked(d, g, path);
    pthread_mutex_unlock(&g_dump_lock);
}
#else
void gpu_graph_dump(struct dev *d, cudaGraph_t g)
{
    (void)g;
    static int said;
    const char *path = getenv("PLUMB_GRAPH_DUMP");
    if (path && *path && !said++)
        fprintf(stderr, "%s: PLUMB_GRAPH_DUMP: the hip build does not dump graphs; '%s' not written\n", d->label,
                path);
}
#endif
