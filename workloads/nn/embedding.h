// Token embedding: a lookup table [vocab, dim], initialised N(0, 0.02^2) (BERT / GPT-2 practice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/params.h"

namespace laconic::nn {

struct EmbeddingOptions {
  int vocab = 0;
  int dim = 0;
  float init_std = 0.02f;
};

class Embedding {
 public:
  // Declares "<name>.weight" [vocab, dim] (decay, as PyTorch/BERT treat embedding tables).
  Embedding(ParamStore& store, const std::string& name, const EmbeddingOptions& opts);
  void init(std::uint64_t seed);

  // ids: [n], each in [0, vocab), on the store's device -> y: [n, dim] (owned). ids must stay
  // valid until backward(). On cpu forward() checks the ids; device kernels cannot throw, so on
  // cuda the caller checks them on the host (check_ids) before uploading.
  const float* forward(const std::int32_t* ids, int n);
  // Throws laconic::Error naming the first id outside [0, vocab). ids: [n], host memory.
  void check_ids(const std::int32_t* ids, int n) const;
  // dtable[ids[i], :] += dy[i, :]. There is no input gradient (ids are discrete).
  void backward(const float* dy);

  std::size_t table_view() const { return table_; }

 private:
  ParamStore* store_;
  EmbeddingOptions opts_;
  std::size_t table_ = 0;
  const std::int32_t* ids_ = nullptr;
  int n_ = 0;
  DeviceArray<float> y_;
};

}  // namespace laconic::nn
