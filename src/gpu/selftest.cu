/* Device-side unit test of the warp and block reductions (vendor.h), run by
 * tests/test_gpu.c through the exported plumb_gpu_selftest_reductions. Each
 * lane contributes a value that differs per lane and per warp, so a
 * reduction that covers only part of the warp (the classic CUDA-on-AMD bug:
 * starting the butterfly at offset 16 on a 64-lane wavefront) or mixes
 * warps gives a wrong total. Values are small integers: sums are exact in
 * any order, so the expected results are known exactly on the host. */
#include "gpu/gpu.h"

/* out layout per block: [warp sums (nwarps)], [warp maxes (nwarps)],
 * [block sum], [block max], [lane count seen by warp 0] */
__global__ void k_reduce_selftest(float *out, int stride)
{
    __shared__ float sc[PLUMB_WARP];
    int t = threadIdx.x, lane = t % PLUMB_WARP, w = t / PLUMB_WARP, nw = blockDim.x / PLUMB_WARP;
    float v = (float)(lane + 1) + 1000.0f * (float)w;
    float ws = plumb_warp_sum(v), wm = plumb_warp_max(v);
    float bs = plumb_block_sum(v, sc), bm = plumb_block_max(v, sc);
    float cnt = plumb_warp_sum(1.0f);
    float *o = out + (size_t)blockIdx.x * stride;
    /* every lane holds the result: check that lane PLUMB_WARP-1 agrees with lane 0 */
    float ws_last = plumb_shfl(ws, PLUMB_WARP - 1);
    if (lane == 0) {
        o[w] = ws == ws_last ? ws : -1.0f;
        o[nw + w] = wm;
    }
    if (t == 0) {
        o[2 * nw] = bs;
        o[2 * nw + 1] = bm;
        o[2 * nw + 2] = cnt;
    }
}

/* Runs the kernel for block sizes of 1..(1024/PLUMB_WARP) warps and checks
 * every value. Returns 0 when all match; else fills why. */
extern "C" __attribute__((visibility("default"))) int plumb_gpu_selftest_reductions(int ordinal, int *warp,
                                                                                    char *why, size_t n)
{
    *warp = PLUMB_WARP;
    why[0] = '\0';
    if (cudaSetDevice(ordinal) != cudaSuccess) {
        snprintf(why, n, "cudaSetDevice(%d) failed", ordinal);
        return 1;
    }
    const int max_w = 1024 / PLUMB_WARP, stride = 2 * max_w + 3, blocks = 3;
    float *dout = NULL, host[3 * (2 * (1024 / 32) + 3)];
    cudaError_t rc = cudaMalloc((void **)&dout, sizeof(float) * blocks * stride);
    if (rc != cudaSuccess) {
        snprintf(why, n, "cudaMalloc: %s", cudaGetErrorString(rc));
        return 1;
    }
    int bad = 0;
    for (int nw = 1; nw <= max_w && !bad; nw++) {
        k_reduce_selftest<<<blocks, nw * PLUMB_WARP>>>(dout, stride);
        rc = cudaGetLastError();
        if (rc == cudaSuccess) rc = cudaDeviceSynchronize();
        if (rc == cudaSuccess)
            rc = cudaMemcpy(host, dout, sizeof(float) * blocks * stride, cudaMemcpyDeviceToHost);
        if (rc != cudaSuccess) {
            snprintf(why, n, "%d warps: %s", nw, cudaGetErrorString(rc));
            bad = 1;
            break;
        }
        const double L = PLUMB_WARP, lane_sum = L * (L + 1) / 2;
        double bsum = 0;
        for (int w = 0; w < nw; w++) bsum += lane_sum + 1000.0 * w * L;
        for (int b = 0; b < blocks && !bad; b++) {
            const float *o = host + b * stride;
            for (int w = 0; w < nw && !bad; w++) {
                double want_s = lane_sum + 1000.0 * w * L, want_m = L + 1000.0 * w;
                if (o[w] != want_s || o[nw + w] != want_m) {
                    snprintf(why, n, "block of %d warps, warp %d: sum %g max %g, expected %g and %g", nw, w,
                             o[w], o[nw + w], want_s, want_m);
                    bad = 1;
                }
            }
            if (!bad && (o[2 * nw] != bsum || o[2 * nw + 1] != L + 1000.0 * (nw - 1) || o[2 * nw + 2] != L)) {
                snprintf(why, n, "block of %d warps: block sum %g max %g lanes %g, expected %g, %g, %g", nw,
                         o[2 * nw], o[2 * nw + 1], o[2 * nw + 2], bsum, L + 1000.0 * (nw - 1), L);
                bad = 1;
            }
        }
    }
    (void)cudaFree(dout);
    return bad;
}
