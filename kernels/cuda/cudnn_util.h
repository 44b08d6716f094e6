// Owning wrappers of cuDNN descriptors: created (and checked) in layer-kernel constructors,
// destroyed with the kernel; never created during a step.
#pragma once

#include <cudnn.h>

#include "kernels/cuda/cuda_check.h"

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

// A plain NCHW float tensor descriptor.
inline void set_nchw(cudnnTensorDescriptor_t d, int64_t n, int64_t c, int64_t h, int64_t w) {
  CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(n), int(c), int(h), int(w)));
}

}  // namespace trainer::cuda
