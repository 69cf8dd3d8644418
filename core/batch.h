// One micro-batch as the model sees it. Buffers are reused across steps (resized only when the
// batch grows), so filling a batch allocates nothing in the step loop.
//
// Dense models (the MLP) read `inputs` (size x features floats) and `targets` (size labels).
// Token models (BERT) read `tokens` (size x seq_len ids, after masking) and `targets`
// (size x seq_len labels; -1 = not a prediction position, ignored by the loss).
#pragma once

#include <cstdint>
#include <vector>

namespace laconic {

struct Batch {
  int size = 0;      // examples (sequences) in this batch
  int features = 0;  // dense models: floats per example in `inputs`
  int seq_len = 0;   // token models: tokens per sequence
  std::vector<float> inputs;           // size * features, row-major
  std::vector<std::int32_t> tokens;    // size * seq_len token ids
  std::vector<std::int32_t> targets;   // size (dense) or size * seq_len (tokens) labels; -1 = ignore
};

}  // namespace laconic
