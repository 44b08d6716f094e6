#include "kernels/cpu/dnnl_context.h"

namespace trainer {

dnnl::memory::desc plain_md(const dnnl::memory::dims& dims) {
  using tag = dnnl::memory::format_tag;
  static const tag tags[] = {tag::undef, tag::a, tag::ab, tag::abc, tag::abcd, tag::abcde};
  if (dims.empty() || dims.size() > 5) throw InternalError("plain_md: unsupported rank");
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tags[dims.size()]);
}

}  // namespace trainer
