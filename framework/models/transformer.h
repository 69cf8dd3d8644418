// The sizes BERT (bert.h) and the GPT (gpt.h) share, and their one validation.
#pragma once

namespace laconic {

struct TransformerOptions {
  int vocab = 0;
  int seq_len = 0;  // the longest sequence (size of the position table)
  int dim = 128;
  int layers = 2;
  int heads = 4;
  int ffn = 512;
  float dropout = 0.0f;  // embeddings, attention probabilities, and both residual branches
};

// Throws laconic::Error naming `model` ("bert", "gpt") and the first bad size.
void check_sizes(const TransformerOptions& o, const char* model);

// o itself once checked (for a model's member initialiser).
template <typename Options>
const Options& validated(const Options& o, const char* model) {
  check_sizes(o, model);
  return o;
}

}  // namespace laconic
