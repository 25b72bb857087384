/* PLUMB_HD marks functions usable from host C and from CUDA/HIP device code.
 * Headers that carry it (philox.h, gmath.h, dtype.h) are the single source of
 * golden arithmetic shared by the cpu backend and the GPU kernels. */
#ifndef PLUMB_HD_H
#define PLUMB_HD_H
#if defined(__CUDACC__) || defined(__HIPCC__)
#define PLUMB_HD __host__ __device__ static inline
#else
#define PLUMB_HD static inline
#endif
#endif
