// Token-sequence text files for sequence models (IMDB-style): one sample per line,
//   label tok tok tok ...
// whitespace-separated non-negative integers. Sequences are padded/truncated to one length with
// the semantics of Keras' pad_sequences (value 0, so token id 0 should be reserved for padding).
// Blank lines are skipped; the file may be gzip-compressed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/dataset.h"

namespace trainer {

struct SequenceOptions {
  int64_t maxlen = 0;     // 0 = length of the longest sequence in the file (Keras maxlen=None)
  bool pad_pre = true;    // padding='pre' (Keras default): zeros go before the tokens
  bool trunc_pre = true;  // truncating='pre' (Keras default): drop tokens from the start
  int num_classes = 0;    // labels must be in [0, num_classes); required (>= 1)
};

// f32 dataset, sample_shape (maxlen), holding token ids (exact: ids must be <= 2^24).
// Throws DataError naming file:line (and the token position) for malformed lines.
Dataset read_sequences(const std::string& path, const SequenceOptions& options);

// One sequence padded/truncated to maxlen (>= 0) as Keras pad_sequences does, pad value 0.
// Example, seq {1,2,3}, maxlen 5: pre -> {0,0,1,2,3}, post -> {1,2,3,0,0};
//          maxlen 2: trunc_pre -> {2,3}, trunc post -> {1,2}.
std::vector<float> pad_sequence(const std::vector<int64_t>& seq, int64_t maxlen, bool pad_pre,
                                bool trunc_pre);

}  // namespace trainer
