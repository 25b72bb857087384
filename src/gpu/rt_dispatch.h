/* One dispatch on a kernel's run-time rounding type rt (dtype_t's DT_F32,
 * DT_BF16, DT_F16) into a copy of the kernel's body compiled for it: the
 * body is a template on int RT and reads `const int rt = RT >= 0 ? RT :
 * rt_;`, so with RT a constant every from16 / to16 / rounding folds to
 * straight-line code of one format, and RT = -1 (any other value) keeps the
 * run-time behaviour. With rt only known at run time each element went
 * through both 16-bit formats' branches: resnet50's BN apply was 4,349 PTX
 * lines and ran issue-bound at 1.45x a copy of its bytes on an H100
 * (BENCHMARKS.md, 2026-12-05). Usage, with CALL(T) the body's call:
 *   #define CALL(T) body<T>(args, rt)
 *   RT_DISPATCH(rt, CALL);
 * Included by gpu/train_vision_kern.cuh (and so by tests/tools/gpu_emu.cc).
 * The same dispatch over gpt's LayerNorm, classifier-row, GELU, column-sum,
 * residual and cast kernels changed nothing measurable on an H100 (49.02 ms
 * a gpt2-124m step both ways; LayerNorm backward 85 -> 80 us, its dw/db
 * parts 32 -> 40: BENCHMARKS.md, 2026-12-05), so those keep run-time rt:
 * they move four fp32 bytes for each conversion, where BN moves two. */
#ifndef PLUMB_GPU_RT_DISPATCH_H
#define PLUMB_GPU_RT_DISPATCH_H
#include "core/dtype.h"

#define RT_DISPATCH(rtv, call)                 \
    do {                                       \
        if ((rtv) == DT_BF16) call(DT_BF16);   \
        else if ((rtv) == DT_F16) call(DT_F16); \
        else if ((rtv) == DT_F32) call(DT_F32); \
        else call(-1);                         \
    } while (0)

#endif
