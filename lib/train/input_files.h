// Before any data is read or any model is built: every data file the config names exists and is a
// regular file. Reading Fashion-MNIST takes seconds; a misspelt path should fail at once.
#pragma once

#include "lib/config/config.h"

namespace trainer {

// Opens (and closes) every file of data.train (when need_train, or when the validation split
// comes from it) and data.validation. Throws DataError naming the first that is missing,
// unreadable or not a regular file, in the words the readers use.
void check_input_files(const Config& cfg, bool need_train);

}  // namespace trainer
