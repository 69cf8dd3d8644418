// Synthetic data shared by the train tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "core/rng.h"
#include "workloads/data/fashion_mnist.h"
#include "workloads/data/mlm.h"
#include "framework/train/faults.h"
#include "framework/train/trainer.h"

namespace laconic::testing {

// Gaussian blobs: class c has mean +-1 on feature c, noise 0.7 elsewhere. Learnable, not trivial.
inline std::shared_ptr<ImageDataset> blobs(int n, int features, int classes, std::uint64_t seed) {
  auto d = std::make_shared<ImageDataset>();
  d->rows = 1;
  d->cols = features;
  d->classes = classes;
  d->images.resize(static_cast<std::size_t>(n) * features);
  d->labels.resize(n);
  const auto k = rng::key({seed, rng::kTest});
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng::below(k, i, classes));
    d->labels[i] = c;
    for (int f = 0; f < features; ++f) {
      const std::uint64_t ctr = 1000003ULL * (i + 1) + f;
      d->images[static_cast<std::size_t>(i) * features + f] = 0.7f * rng::normal(k, ctr) + (f == c ? 1.0f : 0.0f);
    }
  }
  return d;
}

// Masked tokens for BERT: 200 sequences of 16 over a vocabulary of 60 ([CLS] = 2 first).
inline TrainData masked_tokens() {
  auto tokens = std::make_shared<TokenDataset>();
  tokens->seq_len = 16;
  tokens->vocab = 60;
  const auto k = rng::key({5, rng::kTest});
  for (int s = 0; s < 200; ++s)
    for (int t = 0; t < tokens->seq_len; ++t)
      tokens->tokens.push_back(t == 0 ? 2 : 5 + static_cast<std::int32_t>(rng::below(k, s * 16 + t, 55)));
  TrainData data;
  data.train = std::make_shared<MlmSource>(tokens, MlmOptions{});
  data.eval = data.train;
  data.vocab = tokens->vocab;
  data.seq_len = tokens->seq_len;
  return data;
}

// A BERT small enough for a test, on masked_tokens().
inline void use_small_bert(Recipe& r) {
  r.model.name = "bert";
  r.data.name = "text";
  r.model.dim = 32;
  r.model.heads = 4;
  r.model.ffn = 64;
}

// Bit-for-bit equality of two float arrays (NaN payloads and signed zeros included).
inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

// Options that inject the recipe's [fault] (the trainer CLI adds the same hook).
inline TrainOptions injecting(const Recipe& r, TrainOptions opts = {}) {
  opts.hooks.push_back(fault_injector(r.fault));
  return opts;
}

}  // namespace laconic::testing
