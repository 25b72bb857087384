/* The few rocBLAS entry points the hip plugin calls, declared here so the
 * plugin builds without rocBLAS headers and loads the library with dlopen
 * (docs/HACKING.md, "Rules"). Values are from rocBLAS's public rocblas-types.h
 * (stable since rocBLAS 2.x): datatype f16_r=150, f32_r=151, bf16_r=168;
 * operation none=111, transpose=112; gemm algo standard=0; atomics
 * not_allowed=0. */
#ifndef PLUMB_ROCBLAS_MIN_H
#define PLUMB_ROCBLAS_MIN_H
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

typedef struct _rocblas_handle *rocblas_handle;
typedef int rocblas_status;
typedef int rocblas_int;
typedef int rocblas_datatype;
typedef int rocblas_operation;
typedef int rocblas_gemm_algo;
typedef int rocblas_atomics_mode;

#define rocblas_status_success 0
#define rocblas_datatype_f16_r 150
#define rocblas_datatype_f32_r 151
#define rocblas_datatype_bf16_r 168
#define rocblas_operation_none 111
#define rocblas_operation_transpose 112
#define rocblas_gemm_algo_standard 0
#define rocblas_atomics_not_allowed 0

struct rocblas_fns {
    rocblas_status (*create_handle)(rocblas_handle *h);
    rocblas_status (*destroy_handle)(rocblas_handle h);
    rocblas_status (*set_stream)(rocblas_handle h, hipStream_t s);
    rocblas_status (*set_atomics_mode)(rocblas_handle h, rocblas_atomics_mode m);
    rocblas_status (*get_version_string)(char *buf, size_t len);
    rocblas_status (*gemm_ex)(rocblas_handle h, rocblas_operation ta, rocblas_operation tb,
                              rocblas_int m, rocblas_int n, rocblas_int k, const void *alpha,
                              const void *a, rocblas_datatype at, rocblas_int lda, const void *b,
                              rocblas_datatype bt, rocblas_int ldb, const void *beta, const void *c,
                              rocblas_datatype ct, rocblas_int ldc, void *dd, rocblas_datatype dt,
                              rocblas_int ldd, rocblas_datatype compute, rocblas_gemm_algo algo,
                              int32_t solution_index, uint32_t flags);
};

/* Loads rocBLAS (newest soname first). 0 on success; else why says which
 * library or symbol failed and dlerror's text. */
static inline int rocblas_load(struct rocblas_fns *f, char *why, size_t n)
{
    static const char *names[] = {"librocblas.so.4", "librocblas.so.3", "librocblas.so.0",
                                  "librocblas.so"};
    void *h = NULL;
    size_t used = 0;
    why[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++) {
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h && used < n)
            used += (size_t)snprintf(why + used, n - used, "%s%s", used ? "; " : "", dlerror());
    }
    if (!h) return -1;
#define RB_SYM(field, name)                                                             \
    do {                                                                                \
        *(void **)&f->field = dlsym(h, name);                                           \
        if (!f->field) {                                                                \
            snprintf(why, n, "rocBLAS loaded but has no symbol %s", name);              \
            return -1;                                                                  \
        }                                                                               \
    } while (0)
    RB_SYM(create_handle, "rocblas_create_handle");
    RB_SYM(destroy_handle, "rocblas_destroy_handle");
    RB_SYM(set_stream, "rocblas_set_stream");
    RB_SYM(set_atomics_mode, "rocblas_set_atomics_mode");
    RB_SYM(get_version_string, "rocblas_get_version_string");
    RB_SYM(gemm_ex, "rocblas_gemm_ex");
#undef RB_SYM
    return 0;
}
#endif
