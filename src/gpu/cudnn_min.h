/* Our own declarations of the part of cuDNN's legacy C convolution API that
 * conv_lib.cu uses (cudnn_graph.h / cudnn_ops.h / cudnn_cnn.h of cuDNN 9;
 * the same calls and layouts exist since cuDNN 7). The library is
 * dlopen'ed (libcudnn.so.9: the GPU host's PyTorch wheel ships it under
 * nvidia/cudnn/lib), so building the plugin needs no cuDNN headers. Enum
 * values and struct layouts are the ABI: they must match the library's
 * (conv_lib.cu checks them against cudnn.h at compile time where the
 * header is installed). Names carry a cdn_ / CDN_ prefix so that both can
 * be seen in one file. */
#ifndef PLUMB_CUDNN_MIN_H
#define PLUMB_CUDNN_MIN_H
#include <stddef.h>

typedef struct cdn_context *cdn_handle_t;
typedef struct cdn_tensor_s *cdn_tensor_t;
typedef struct cdn_filter_s *cdn_filter_t;
typedef struct cdn_conv_s *cdn_conv_t;

typedef int cdn_status_t; /* cudnnStatus_t */
#define CDN_STATUS_SUCCESS 0

typedef int cdn_dtype_t; /* cudnnDataType_t */
#define CDN_DATA_FLOAT 0
#define CDN_DATA_HALF 2
#define CDN_DATA_BFLOAT16 9

typedef int cdn_format_t;
#define CDN_TENSOR_NCHW 0
#define CDN_TENSOR_NHWC 1

typedef int cdn_mode_t;
#define CDN_CROSS_CORRELATION 1 /* what deep learning calls convolution (no flip) */

typedef int cdn_math_t;
#define CDN_DEFAULT_MATH 0
#define CDN_TENSOR_OP_MATH 1
#define CDN_TENSOR_OP_MATH_ALLOW_CONVERSION 2
#define CDN_FMA_MATH 3 /* FMA kernels only: no TF32 */

typedef int cdn_determinism_t;
#define CDN_NON_DETERMINISTIC 0
#define CDN_DETERMINISTIC 1

/* cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t: the three structs
 * have this one layout (algo is the direction's algorithm enum). */
typedef struct {
    int algo;
    cdn_status_t status;
    float time;
    size_t memory;
    cdn_determinism_t determinism;
    cdn_math_t mathType;
    int reserved[3];
} cdn_perf_t;

struct cudnn_fns {
    size_t (*GetVersion)(void);
    const char *(*GetErrorString)(cdn_status_t);
    cdn_status_t (*Create)(cdn_handle_t *);
    cdn_status_t (*Destroy)(cdn_handle_t);
    cdn_status_t (*SetStream)(cdn_handle_t, void *stream);
    cdn_status_t (*CreateTensorDescriptor)(cdn_tensor_t *);
    cdn_status_t (*SetTensor4dDescriptor)(cdn_tensor_t, cdn_format_t, cdn_dtype_t, int n,
                                           int c, int h, int w);
    cdn_status_t (*DestroyTensorDescriptor)(cdn_tensor_t);
    cdn_status_t (*CreateFilterDescriptor)(cdn_filter_t *);
    /* note the order: data type before format (unlike the tensor's) */
    cdn_status_t (*SetFilter4dDescriptor)(cdn_filter_t, cdn_dtype_t, cdn_format_t, int k,
                                           int c, int h, int w);
    cdn_status_t (*DestroyFilterDescriptor)(cdn_filter_t);
    cdn_status_t (*CreateConvolutionDescriptor)(cdn_conv_t *);
    cdn_status_t (*SetConvolution2dDescriptor)(cdn_conv_t, int pad_h, int pad_w, int u, int v,
                                                int dilation_h, int dilation_w, cdn_mode_t,
                                                cdn_dtype_t compute);
    cdn_status_t (*SetConvolutionMathType)(cdn_conv_t, cdn_math_t);
    cdn_status_t (*DestroyConvolutionDescriptor)(cdn_conv_t);
    cdn_status_t (*FindConvolutionForwardAlgorithmEx)(cdn_handle_t, cdn_tensor_t, const void *x,
                                                       cdn_filter_t, const void *w,
                                                       cdn_conv_t, cdn_tensor_t, void *y,
                                                       int requested, int *returned, cdn_perf_t *,
                                                       void *ws, size_t ws_bytes);
    cdn_status_t (*FindConvolutionBackwardDataAlgorithmEx)(cdn_handle_t, cdn_filter_t, const void *w,
                                                            cdn_tensor_t, const void *dy,
                                                            cdn_conv_t, cdn_tensor_t,
                                                            void *dx, int requested, int *returned,
                                                            cdn_perf_t *, void *ws, size_t ws_bytes);
    cdn_status_t (*FindConvolutionBackwardFilterAlgorithmEx)(cdn_handle_t, cdn_tensor_t, const void *x,
                                                              cdn_tensor_t, const void *dy,
                                                              cdn_conv_t, cdn_filter_t,
                                                              void *dw, int requested, int *returned,
                                                              cdn_perf_t *, void *ws, size_t ws_bytes);
    cdn_status_t (*GetConvolutionForwardWorkspaceSize)(cdn_handle_t, cdn_tensor_t,
                                                        cdn_filter_t, cdn_conv_t,
                                                        cdn_tensor_t, int algo, size_t *);
    cdn_status_t (*GetConvolutionBackwardDataWorkspaceSize)(cdn_handle_t, cdn_filter_t,
                                                             cdn_tensor_t, cdn_conv_t,
                                                             cdn_tensor_t, int algo, size_t *);
    cdn_status_t (*GetConvolutionBackwardFilterWorkspaceSize)(cdn_handle_t, cdn_tensor_t,
                                                               cdn_tensor_t, cdn_conv_t,
                                                               cdn_filter_t, int algo, size_t *);
    cdn_status_t (*ConvolutionForward)(cdn_handle_t, const void *alpha, cdn_tensor_t, const void *x,
                                        cdn_filter_t, const void *w, cdn_conv_t, int algo,
                                        void *ws, size_t ws_bytes, const void *beta, cdn_tensor_t, void *y);
    cdn_status_t (*ConvolutionBackwardData)(cdn_handle_t, const void *alpha, cdn_filter_t, const void *w,
                                             cdn_tensor_t, const void *dy, cdn_conv_t,
                                             int algo, void *ws, size_t ws_bytes, const void *beta,
                                             cdn_tensor_t, void *dx);
    cdn_status_t (*ConvolutionBackwardFilter)(cdn_handle_t, const void *alpha, cdn_tensor_t,
                                               const void *x, cdn_tensor_t, const void *dy,
                                               cdn_conv_t, int algo, void *ws, size_t ws_bytes,
                                               const void *beta, cdn_filter_t, void *dw);
};

#endif
