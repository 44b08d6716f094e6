// split_validation: two contiguous copies of the sample storage and labels.
#include "datasets/split.h"

#include <cstdio>

#include "lib/core/error.h"

namespace trainer {
namespace {

// Samples [begin, end) of `d`, same shape, dtype and classes.
Dataset slice(const Dataset& d, int64_t begin, int64_t end, const std::string& suffix) {
  Dataset out;
  out.name = d.name + suffix;
  out.sample_shape = d.sample_shape;
  out.dtype = d.dtype;
  out.num_classes = d.num_classes;
  const int64_t k = d.sample_numel();
  if (d.dtype == SampleDtype::u8)
    out.u8.assign(d.u8.begin() + begin * k, d.u8.begin() + end * k);
  else
    out.f32.assign(d.f32.begin() + begin * k, d.f32.begin() + end * k);
  out.class_names = d.class_names;
  out.target_width = d.target_width;
  if (d.target_width > 0)
    out.targets.assign(d.targets.begin() + begin * d.target_width, d.targets.begin() + end * d.target_width);
  else
    out.labels.assign(d.labels.begin() + begin, d.labels.begin() + end);
  return out;
}

std::string format_fraction(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

}  // namespace

std::pair<Dataset, Dataset> split_validation(const Dataset& data, double fraction) {
  if (!(fraction > 0.0 && fraction < 1.0))
    throw DataError("validation split must be a fraction strictly between 0 and 1, got " +
                    format_fraction(fraction));
  const int64_t n = data.size();
  const int64_t split_at = static_cast<int64_t>(static_cast<double>(n) * (1.0 - fraction));
  if (split_at <= 0 || split_at >= n)
    throw DataError("validation split " + format_fraction(fraction) + " of the " + std::to_string(n) +
                    " samples in '" + data.name + "' leaves " +
                    (split_at <= 0 ? "no training samples" : "no validation samples"));
  return {slice(data, 0, split_at, " (training part)"), slice(data, split_at, n, " (validation part)")};
}

}  // namespace trainer
