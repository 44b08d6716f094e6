// Token streams for language models: a text file read as its UTF-8 bytes (256 byte tokens, for
// character-level models on any text), or a flat binary of uint16 token ids as nanoGPT's
// prepare.py writes them (raw) and llm.c's dev/data scripts write them (a 1,024-byte header of
// int32s: magic 20240520, version 1, token count; then the ids).
//
// Each sample is a window of `context` tokens and its labels the `context` tokens after each
// position (the window shifted by one), so the loss runs over every position. Windows start every
// `stride` tokens (stride < context: overlapping windows); the loader shuffles their order each
// epoch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/dataset.h"

namespace trainer {

struct TokenWindowOptions {
  int64_t context = 256;  // tokens a sample
  int64_t stride = 0;     // tokens between window starts; 0: context (no overlap)
  int64_t limit = 0;      // at most this many windows (0: all)
  int num_classes = 0;    // ids must be below it (the vocabulary); 0: no bound beyond the format's
};

// The ids of a token file: llm.c's header is recognised by its magic; otherwise the file is raw
// little-endian uint16 (an odd size is an error). Throws DataError naming the file and the place.
std::vector<uint16_t> read_token_file(const std::string& path);

// Windows over `tokens` (from `what`, for messages): u8 samples when every id is below 256 and
// `bytes` is set (a text's bytes), else f32 ids. Throws DataError when the stream is shorter
// than one window plus its next token, or an id is not below options.num_classes.
Dataset token_windows(const std::vector<uint16_t>& tokens, const TokenWindowOptions& options,
                      const std::string& what, bool bytes);

// format text: the file's bytes as tokens (gunzipped when compressed).
Dataset read_text_windows(const std::string& path, const TokenWindowOptions& options);
// format tokens: a token file's ids.
Dataset read_token_windows(const std::string& path, const TokenWindowOptions& options);

}  // namespace trainer
