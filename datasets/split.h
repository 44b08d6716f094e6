// Validation split as Keras' fit(validation_split=f) does it: the LAST fraction of the samples,
// in file order and before any shuffling, becomes the validation set. Keras computes
// split_at = int(n * (1 - f)); the same formula is used so sizes match Keras exactly.
#pragma once

#include <utility>

#include "datasets/dataset.h"

namespace trainer {

// Returns {train = samples [0, split_at), validation = samples [split_at, n)}. Both copy their
// samples; names get " (training part)" / " (validation part)" appended. Throws DataError when
// fraction is not in (0, 1) or either side would be empty.
std::pair<Dataset, Dataset> split_validation(const Dataset& data, double fraction);

}  // namespace trainer
