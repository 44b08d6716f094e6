// Where element (n, c, s) of an (N, C, spatial...) activation lives in a oneDNN layout, s being the
// spatial index in row-major order: plain nchw, channels-last nhwc, or channel blocks (nChw16c,
// nChw8c); an (N, C) tensor has one spatial position, s = 0. For kernels that work per channel
// (dropout2d, synchronized batchnorm) on whatever layout their neighbours chose.
#pragma once

#include <cstdint>

#include "kernels/cpu/dnnl_context.h"
#include "lib/core/error.h"

namespace trainer::cpu {

struct ChannelAddressing {
  int64_t n_stride = 0;         // elements between samples
  int64_t c_stride = 0;         // between channels, or between channel blocks when block > 1
  int64_t block = 1;            // channels per block
  int64_t s_stride = 0;         // between consecutive spatial positions
  int64_t channels_padded = 0;  // channels the layout holds (a multiple of block)
  int64_t at(int64_t n, int64_t c, int64_t s) const {
    return n * n_stride + (c / block) * c_stride + c % block + s * s_stride;
  }
};

// Throws InternalError for a layout that is not of that kind (none of the CPU kernels makes one).
inline ChannelAddressing channel_addressing(const dnnl::memory::desc& md) {
  const auto& d = md.data;
  const auto& b = d.format_desc.blocking;
  if (d.format_kind != dnnl_blocked || d.ndims < 2)
    throw InternalError("channel addressing: an activation layout that is not blocked (N, C, spatial...)");
  ChannelAddressing a;
  if (b.inner_nblks == 1 && b.inner_idxs[0] == 1)
    a.block = b.inner_blks[0];
  else if (b.inner_nblks != 0)
    throw InternalError("channel addressing: an activation layout with blocks other than channel blocks");
  a.n_stride = b.strides[0];
  a.c_stride = b.strides[1];
  a.s_stride = d.ndims > 2 ? b.strides[d.ndims - 1] : 0;
  for (int i = 2; i + 1 < d.ndims; ++i)  // spatial dims row-major with one stride: s * s_stride
    if (b.strides[i] != b.strides[i + 1] * d.padded_dims[i + 1])
      throw InternalError(
          "channel addressing: an activation layout whose spatial dimensions are not row-major");
  a.channels_padded = d.padded_dims[1];
  return a;
}

}  // namespace trainer::cpu
