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
#include <stdint.h>

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


/* ---- the backend (graph) API: cudnn_graph.h of cuDNN 9 (cudnn_backend.h of
 * cuDNN 8.x, the same values); gpu/attn_cudnn.cu builds the fused attention
 * graphs with it. Attribute and descriptor-type values are the ABI. */
typedef void *cdn_bdesc_t; /* cudnnBackendDescriptor_t */
/* descriptor types (cudnnBackendDescriptorType_t) */
#define CDN_BK_POINTWISE 0
#define CDN_BK_ENGINE 2
#define CDN_BK_ENGINECFG 3
#define CDN_BK_ENGINEHEUR 4
#define CDN_BK_EXECUTION_PLAN 5
#define CDN_BK_OP_POINTWISE 13
#define CDN_BK_OPERATIONGRAPH 15
#define CDN_BK_VARIANT_PACK 16
#define CDN_BK_TENSOR 17
#define CDN_BK_MATMUL 18
#define CDN_BK_OP_MATMUL 19
#define CDN_BK_REDUCTION 21
#define CDN_BK_OP_REDUCTION 22
#define CDN_BK_OP_RESHAPE 31
/* attribute value types (cudnnBackendAttributeType_t) */
#define CDN_TYPE_HANDLE 0
#define CDN_TYPE_DATA_TYPE 1
#define CDN_TYPE_BOOLEAN 2
#define CDN_TYPE_INT64 3
#define CDN_TYPE_VOID_PTR 6
#define CDN_TYPE_HEUR_MODE 8
#define CDN_TYPE_NUMERICAL_NOTE 11
#define CDN_TYPE_POINTWISE_MODE 14
#define CDN_TYPE_BACKEND_DESCRIPTOR 15
#define CDN_TYPE_REDUCTION_OPERATOR_TYPE 18
/* attribute names (cudnnBackendAttributeName_t) */
#define CDN_A_POINTWISE_MODE 0
#define CDN_A_POINTWISE_MATH_PREC 1
#define CDN_A_POINTWISE_AXIS 9
#define CDN_A_ENGINEHEUR_MODE 200
#define CDN_A_ENGINEHEUR_OPERATION_GRAPH 201
#define CDN_A_ENGINEHEUR_RESULTS 202
#define CDN_A_ENGINECFG_ENGINE 300
#define CDN_A_EXECUTION_PLAN_HANDLE 400
#define CDN_A_EXECUTION_PLAN_ENGINE_CONFIG 401
#define CDN_A_EXECUTION_PLAN_WORKSPACE_SIZE 402
#define CDN_A_OP_POINTWISE_PW_DESCRIPTOR 750
#define CDN_A_OP_POINTWISE_XDESC 751
#define CDN_A_OP_POINTWISE_BDESC 752
#define CDN_A_OP_POINTWISE_YDESC 753
#define CDN_A_OP_POINTWISE_TDESC 758
#define CDN_A_OPERATIONGRAPH_HANDLE 800
#define CDN_A_OPERATIONGRAPH_OPS 801
#define CDN_A_TENSOR_BYTE_ALIGNMENT 900
#define CDN_A_TENSOR_DATA_TYPE 901
#define CDN_A_TENSOR_DIMENSIONS 902
#define CDN_A_TENSOR_STRIDES 903
#define CDN_A_TENSOR_UNIQUE_ID 906
#define CDN_A_TENSOR_IS_VIRTUAL 907
#define CDN_A_TENSOR_IS_BY_VALUE 908
#define CDN_A_VARIANT_PACK_UNIQUE_IDS 1000
#define CDN_A_VARIANT_PACK_DATA_POINTERS 1001
#define CDN_A_VARIANT_PACK_WORKSPACE 1003
#define CDN_A_ENGINE_GLOBAL_INDEX 1301
#define CDN_A_ENGINE_NUMERICAL_NOTE 1303
#define CDN_A_MATMUL_COMP_TYPE 1500
#define CDN_A_OP_MATMUL_ADESC 1520
#define CDN_A_OP_MATMUL_BDESC 1521
#define CDN_A_OP_MATMUL_CDESC 1522
#define CDN_A_OP_MATMUL_DESC 1523
#define CDN_A_REDUCTION_OPERATOR 1600
#define CDN_A_REDUCTION_COMP_TYPE 1601
#define CDN_A_OP_REDUCTION_XDESC 1610
#define CDN_A_OP_REDUCTION_YDESC 1611
#define CDN_A_OP_REDUCTION_DESC 1612
#define CDN_A_OP_RESHAPE_XDESC 2200
#define CDN_A_OP_RESHAPE_YDESC 2201
/* values */
#define CDN_DATA_INT32 4
#define CDN_DATA_BOOLEAN 11
#define CDN_PW_ADD 0
#define CDN_PW_MUL 1
#define CDN_PW_DIV 6
#define CDN_PW_SUB 9
#define CDN_PW_EXP 13
#define CDN_PW_LOG 15
#define CDN_PW_IDENTITY 21
#define CDN_PW_CMP_GE 303
#define CDN_PW_GEN_INDEX 501
#define CDN_PW_BINARY_SELECT 601
#define CDN_REDUCE_ADD 0
#define CDN_REDUCE_MAX 3
#define CDN_HEUR_MODE_INSTANT 0
#define CDN_HEUR_MODE_A 3
#define CDN_NOTE_NONDETERMINISTIC 4

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
    /* the backend API: NULL where the library lacks it (gpu/attn_cudnn.cu
     * then says so); GetLastErrorString is cuDNN 9's and may be NULL alone */
    cdn_status_t (*BackendCreateDescriptor)(int type, cdn_bdesc_t *);
    cdn_status_t (*BackendDestroyDescriptor)(cdn_bdesc_t);
    cdn_status_t (*BackendFinalize)(cdn_bdesc_t);
    cdn_status_t (*BackendSetAttribute)(cdn_bdesc_t, int name, int type, int64_t count, const void *values);
    cdn_status_t (*BackendGetAttribute)(cdn_bdesc_t, int name, int type, int64_t requested, int64_t *count,
                                        void *values);
    cdn_status_t (*BackendExecute)(cdn_handle_t, cdn_bdesc_t plan, cdn_bdesc_t variant_pack);
    void (*GetLastErrorString)(char *msg, size_t max);
};

#endif
