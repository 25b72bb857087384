/* Our own declarations of the part of MIOpen's C API (miopen/miopen.h,
 * MIOpen 2.x) that conv_lib.cu uses on HIP. libMIOpen.so.1 is dlopen'ed,
 * so building the hip plugin needs no MIOpen headers; enum values and the
 * perf struct's layout are the ABI. NHWC is expressed through strides
 * (dims stay N, C, H, W). */
#ifndef PLUMB_MIOPEN_MIN_H
#define PLUMB_MIOPEN_MIN_H
#include <stddef.h>

typedef struct mio_handle_s *mio_handle_t;
typedef struct mio_tensor_s *mio_tensor_t;
typedef struct mio_conv_s *mio_conv_t;

typedef int mio_status_t; /* miopenStatusSuccess = 0 */
#define MIO_STATUS_SUCCESS 0

typedef int mio_dtype_t;
#define MIO_HALF 0
#define MIO_FLOAT 1
#define MIO_BFLOAT16 5

typedef int mio_mode_t;
#define MIO_CONVOLUTION 0 /* cross-correlation, as in deep learning */

typedef int mio_attrib_t;
#define MIO_CONVOLUTION_ATTRIB_FP16_ALT_IMPL 0
#define MIO_CONVOLUTION_ATTRIB_DETERMINISTIC 1

/* miopenConvAlgoPerf_t: a union of the three directions' algorithm enums,
 * then time and memory */
typedef struct {
    int algo;
    float time;
    size_t memory;
} mio_perf_t;

struct miopen_fns {
    mio_status_t (*GetVersion)(size_t *major, size_t *minor, size_t *patch);
    const char *(*GetErrorString)(mio_status_t);
    mio_status_t (*Create)(mio_handle_t *);
    mio_status_t (*Destroy)(mio_handle_t);
    mio_status_t (*SetStream)(mio_handle_t, void *stream);
    mio_status_t (*CreateTensorDescriptor)(mio_tensor_t *);
    mio_status_t (*SetTensorDescriptor)(mio_tensor_t, mio_dtype_t, int nbDims, const int *dims,
                                          const int *strides);
    mio_status_t (*DestroyTensorDescriptor)(mio_tensor_t);
    mio_status_t (*CreateConvolutionDescriptor)(mio_conv_t *);
    mio_status_t (*InitConvolutionDescriptor)(mio_conv_t, mio_mode_t, int pad_h,
                                                int pad_w, int stride_h, int stride_w, int dilation_h, int dilation_w);
    mio_status_t (*SetConvolutionAttribute)(mio_conv_t, mio_attrib_t, int value);
    mio_status_t (*DestroyConvolutionDescriptor)(mio_conv_t);
    mio_status_t (*ConvolutionForwardGetWorkSpaceSize)(mio_handle_t, mio_tensor_t w,
                                                         mio_tensor_t x, mio_conv_t,
                                                         mio_tensor_t y, size_t *);
    mio_status_t (*ConvolutionBackwardDataGetWorkSpaceSize)(mio_handle_t, mio_tensor_t dy,
                                                              mio_tensor_t w,
                                                              mio_conv_t,
                                                              mio_tensor_t dx, size_t *);
    mio_status_t (*ConvolutionBackwardWeightsGetWorkSpaceSize)(mio_handle_t, mio_tensor_t dy,
                                                                 mio_tensor_t x,
                                                                 mio_conv_t,
                                                                 mio_tensor_t dw, size_t *);
    mio_status_t (*FindConvolutionForwardAlgorithm)(mio_handle_t, mio_tensor_t, const void *x,
                                                      mio_tensor_t, const void *w,
                                                      mio_conv_t, mio_tensor_t,
                                                      void *y, int requested, int *returned, mio_perf_t *,
                                                      void *ws, size_t ws_bytes, int exhaustive /* bool */);
    mio_status_t (*FindConvolutionBackwardDataAlgorithm)(mio_handle_t, mio_tensor_t, const void *dy,
                                                           mio_tensor_t, const void *w,
                                                           mio_conv_t, mio_tensor_t,
                                                           void *dx, int requested, int *returned,
                                                           mio_perf_t *, void *ws, size_t ws_bytes,
                                                           int exhaustive);
    mio_status_t (*FindConvolutionBackwardWeightsAlgorithm)(mio_handle_t, mio_tensor_t,
                                                              const void *dy, mio_tensor_t, const void *x,
                                                              mio_conv_t, mio_tensor_t,
                                                              void *dw, int requested, int *returned,
                                                              mio_perf_t *, void *ws, size_t ws_bytes,
                                                              int exhaustive);
    mio_status_t (*ConvolutionForward)(mio_handle_t, const void *alpha, mio_tensor_t, const void *x,
                                         mio_tensor_t, const void *w, mio_conv_t,
                                         int algo, const void *beta, mio_tensor_t, void *y, void *ws,
                                         size_t ws_bytes);
    mio_status_t (*ConvolutionBackwardData)(mio_handle_t, const void *alpha, mio_tensor_t,
                                              const void *dy, mio_tensor_t, const void *w,
                                              mio_conv_t, int algo, const void *beta,
                                              mio_tensor_t, void *dx, void *ws, size_t ws_bytes);
    mio_status_t (*ConvolutionBackwardWeights)(mio_handle_t, const void *alpha, mio_tensor_t,
                                                 const void *dy, mio_tensor_t, const void *x,
                                                 mio_conv_t, int algo, const void *beta,
                                                 mio_tensor_t, void *dw, void *ws, size_t ws_bytes);
};

#endif
