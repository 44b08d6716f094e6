// Owning wrappers of cuDNN descriptors: created (and checked) in layer-kernel constructors,
// destroyed with the kernel; never created during a step.
#pragma once

#include <cudnn.h>

#include "kernels/cuda/cuda_check.h"
#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class CudnnDesc {
 public:
  CudnnDesc() { CUDNN_CHECK(Create(&d_)); }
  ~CudnnDesc() {
    if (d_) Destroy(d_);
  }
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;
  operator T() const { return d_; }

 private:
  T d_ = nullptr;
};

using TensorDesc =
    CudnnDesc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc =
    CudnnDesc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc = CudnnDesc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                           cudnnDestroyConvolutionDescriptor>;

// cuDNN's name for a tensor dtype.
inline cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f16:
      return CUDNN_DATA_HALF;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

// A 4-D tensor descriptor of logical dims (n, c, h, w): plain NCHW, or NHWC storage with nhwc
// (float unless t says otherwise).
inline void set_nchw(cudnnTensorDescriptor_t d, int64_t n, int64_t c, int64_t h, int64_t w,
                     DType t = DType::f32, bool nhwc = false) {
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, cudnn_type(t),
                                         int(n), int(c), int(h), int(w)));
}

}  // namespace trainer::cuda
