// The output projection of a language model whose weight is its token embedding (tied, Press &
// Wolf 2017): logits[rows, vocab] = h[rows, dim] E[vocab, dim]^T, with E an nn::Embedding's table
// in the same ParamStore. Backward accumulates dE += dlogits^T h into the table's gradient (beside
// the embedding's own) and returns dh = dlogits E. The GEMMs' operands in `precision`
// (workloads/nn/precision.h).
#pragma once

#include <cstddef>

#include "core/params.h"
#include "workloads/nn/precision.h"

namespace laconic::nn {

class TiedProjection {
 public:
  TiedProjection(ParamStore& store, std::size_t table_view, int vocab, int dim, Precision precision)
      : store_(&store), table_(table_view), vocab_(vocab), dim_(dim), operands_(precision) {}

  // h [rows, dim] -> logits [rows, vocab] (the caller's buffer). h must stay valid until backward().
  void forward(float* logits, const float* h, int rows);
  // dlogits [rows, vocab] -> dh [rows, dim] (owned).
  const float* backward(const float* dlogits);
  // Grows every buffer for up to `rows` rows now.
  void reserve(int rows);

 private:
  ParamStore* store_;
  std::size_t table_;
  int vocab_, dim_;
  GemmOperands<3> operands_;  // slots: h, E, dlogits
  const float* h_ = nullptr;  // as the forward's GEMM read them
  const float* e_ = nullptr;
  int rows_ = 0;
  DeviceArray<float> dh_;
};

}  // namespace laconic::nn
