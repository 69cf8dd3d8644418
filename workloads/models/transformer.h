// What BERT (bert.h) and the GPT (gpt.h) share: their sizes and its validation, the blocks'
// construction, the dense layers' initialisation and the dropout masks' keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/params.h"
#include "workloads/nn/linear.h"

namespace laconic {

struct TransformerOptions {
  int vocab = 0;
  int seq_len = 0;  // the longest sequence (size of the position table)
  int dim = 128;
  int layers = 2;
  int heads = 4;
  int ffn = 512;
  float dropout = 0.0f;  // embeddings, attention probabilities, and both residual branches
  nn::Precision precision = nn::Precision::fp32;  // of the GEMMs (workloads/nn/precision.h)
};

// Throws laconic::Error naming `model` ("bert", "gpt") and the first bad size.
void check_sizes(const TransformerOptions& o, const char* model);

// o itself once checked (for a model's member initialiser).
template <typename Options>
const Options& validated(const Options& o, const char* model) {
  check_sizes(o, model);
  return o;
}

// options.layers blocks "layer0", "layer1", ..., each Block(store, name, options, index).
template <typename Block, typename Options>
std::vector<Block> make_blocks(ParamStore& store, const Options& o) {
  std::vector<Block> blocks;
  blocks.reserve(o.layers);
  for (int l = 0; l < o.layers; ++l) blocks.emplace_back(store, "layer" + std::to_string(l), o, l);
  return blocks;
}

// A dense layer's init as BERT and GPT-2 do it: W ~ N(0, stddev^2), b = 0.
void init_dense(ParamStore& store, const nn::Linear& fc, float stddev, std::uint64_t seed);

// Dropout layer ids: 0 for the embeddings, then three per block (attention probabilities,
// attention output, FFN output), so no two dropouts in the model share a mask.
inline std::uint64_t dropout_id(int layer, int which) {
  return 1 + 3 * static_cast<std::uint64_t>(layer) + static_cast<std::uint64_t>(which);
}

}  // namespace laconic
