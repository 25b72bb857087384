/* One CUDA-C source set for two vendors (the llama.cpp ggml-cuda approach):
 * the sources in src/gpu/ are written against the CUDA runtime names, and
 * when hipcc builds them (PLUMB_HIP) this header maps each name we use to its
 * HIP twin. Only names the plugin uses are mapped; add one here when a new
 * call is needed, never #ifdef the call site.
 *
 * Warp size is a compile-time constant per target (PLUMB_WARP): 32 on
 * NVIDIA, 64 on CDNA (gfx90a MI250, gfx942 MI300). HIP's warpSize is not a
 * constant expression, and a CUDA reduction that starts at offset 16 sums
 * only half a wavefront on AMD, so every reduction loops from PLUMB_WARP/2.
 * Lane masks are 64-bit on AMD (plumb_lanemask_t). */
#ifndef PLUMB_GPU_VENDOR_H
#define PLUMB_GPU_VENDOR_H

#if defined(PLUMB_HIP)
#include <hip/hip_runtime.h>

#define PLUMB_VENDOR "hip"
#define PLUMB_WARP 64
typedef unsigned long long plumb_lanemask_t;

#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor hipOccupancyMaxActiveBlocksPerMultiprocessor
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocHost(p, n) hipHostMalloc((p), (n), hipHostMallocDefault)
#define cudaFreeHost hipHostFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyKind hipMemcpyKind
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyHostToHost hipMemcpyHostToHost
#define cudaMemcpyDefault hipMemcpyDefault
#define cudaMemGetInfo hipMemGetInfo
#define cudaStream_t hipStream_t
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy
/* the two runtimes' instantiate signatures differ */
#define plumb_graph_instantiate(x, g) hipGraphInstantiate((x), (g), NULL, NULL, 0)
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamQuery hipStreamQuery
#define cudaErrorNotReady hipErrorNotReady
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventBlockingSync hipEventBlockingSync
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
/* external event nodes (backend.cu's event_mark): HIP 6.1 and later have
 * hipEventRecordWithFlags; Debian's HIP 5 does not, and leaves event_mark out */
#if defined(hipEventRecordExternal)
#define PLUMB_HAVE_EVENT_MARK 1
#define cudaStreamIsCapturing hipStreamIsCapturing
#define cudaStreamCaptureStatus hipStreamCaptureStatus
#define cudaStreamCaptureStatusNone hipStreamCaptureStatusNone
#define cudaStreamCaptureStatusActive hipStreamCaptureStatusActive
#define cudaEventRecordWithFlags hipEventRecordWithFlags
#define cudaEventRecordExternal hipEventRecordExternal
#else
#define PLUMB_HAVE_EVENT_MARK 0
#endif

/* HIP 5.x has no *_sync shuffles; all lanes of the wavefront take part. */
template <typename T> __device__ static inline T plumb_shfl_xor(T v, int lane_mask)
{
    return __shfl_xor(v, lane_mask, PLUMB_WARP);
}
template <typename T> __device__ static inline T plumb_shfl(T v, int src)
{
    return __shfl(v, src, PLUMB_WARP);
}
/* Orders shared-memory accesses among the lanes of one wavefront (what
 * newer HIP's __syncwarp does: wavefront-scope fences around a barrier). */
__device__ static inline void plumb_syncwarp(void)
{
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

#else /* CUDA */
#include <cuda_runtime.h>

#define PLUMB_VENDOR "cuda"
#define PLUMB_WARP 32
/* cudaEventRecordExternal: CUDA 11.1 on */
#define PLUMB_HAVE_EVENT_MARK (CUDART_VERSION >= 11010)
typedef unsigned int plumb_lanemask_t;
#if CUDART_VERSION >= 12000
#define plumb_graph_instantiate(x, g) cudaGraphInstantiate((x), (g), 0)
#else
#define plumb_graph_instantiate(x, g) cudaGraphInstantiate((x), (g), NULL, NULL, 0)
#endif

template <typename T> __device__ static inline T plumb_shfl_xor(T v, int lane_mask)
{
    return __shfl_xor_sync(0xffffffffu, v, lane_mask, PLUMB_WARP);
}
template <typename T> __device__ static inline T plumb_shfl(T v, int src)
{
    return __shfl_sync(0xffffffffu, v, src, PLUMB_WARP);
}
__device__ static inline void plumb_syncwarp(void) { __syncwarp(); }
#endif

/* Warp-wide reductions: every lane ends with the result. The butterfly runs
 * over all PLUMB_WARP lanes, so on AMD it covers the whole 64-lane wavefront.
 * Fast-mode only: golden sums use the fixed pairwise tree of gmath.h. */
__device__ static inline float plumb_warp_sum(float v)
{
#pragma unroll
    for (int off = PLUMB_WARP / 2; off > 0; off >>= 1) v += plumb_shfl_xor(v, off);
    return v;
}
__device__ static inline float plumb_warp_max(float v)
{
#pragma unroll
    for (int off = PLUMB_WARP / 2; off > 0; off >>= 1) v = fmaxf(v, plumb_shfl_xor(v, off));
    return v;
}

/* Block-wide sum/max for blockDim.x a multiple of PLUMB_WARP and at most
 * PLUMB_WARP * PLUMB_WARP threads; `scratch` holds PLUMB_WARP floats of
 * shared memory. Every thread gets the result. */
__device__ static inline float plumb_block_sum(float v, float *scratch)
{
    int lane = threadIdx.x % PLUMB_WARP, wid = threadIdx.x / PLUMB_WARP;
    int nw = blockDim.x / PLUMB_WARP;
    v = plumb_warp_sum(v);
    __syncthreads(); /* scratch may still be read by a previous call */
    if (lane == 0) scratch[wid] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : 0.0f;
    return plumb_warp_sum(v);
}
__device__ static inline float plumb_block_max(float v, float *scratch)
{
    int lane = threadIdx.x % PLUMB_WARP, wid = threadIdx.x / PLUMB_WARP;
    int nw = blockDim.x / PLUMB_WARP;
    v = plumb_warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[wid] = v;
    __syncthreads();
    v = lane < nw ? scratch[lane] : -INFINITY;
    return plumb_warp_max(v);
}

#endif
