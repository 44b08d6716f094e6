// cuBLAS and cuBLASLt opened at their first use instead of at program start (cublas_lazy.cc).
#pragma once
#include <string>

namespace trainer::cuda {

// Opens both libraries now (the backend's warm-up thread calls it while the context is made).
void preload_cublas();
// Why a library could not be opened ("" when both opened or neither was asked for yet).
std::string cublas_load_error();

}  // namespace trainer::cuda
