// DeMo, decoupled momentum optimization (Peng, Quesnelle & Kingma 2024, arXiv 2411.19870), as a
// strategy that runs every step. Each rank keeps its own momentum m (never averaged):
//   m = beta * m + g                          (g: this rank's gradient, micro-batches averaged)
//   q = top-k per chunk of DCT-II(m)          (per tensor, chunks of `chunk`; compression/dct.h)
//   m = m - IDCT(q)                           (the transmitted, fast components leave m)
//   Q = IDCT(mean over ranks of q)            (all_gather of every rank's q, decoded in rank order)
//   g = sign(Q)                               (sign(0) = 0: positions no rank sent stay still)
// and the [optimizer] (plain SGD: theta -= lr * (g + weight_decay * theta)) takes the sign step of
// the paper. q travels as ChunkTopK (compression/sparse.h): the coefficients' values in `codec`
// with one scale per chunk, positions in ceil(log2 chunk) bits; every rank's encoding has the
// same size, so one all_gather of (N - 1) * payload bytes per rank per step.
// All of it on host buffers (device = cpu).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compression/dct.h"
#include "compression/sparse.h"
#include "framework/sync/sync_strategy.h"

namespace laconic {

struct DemoOptions {
  std::size_t chunk = 64;
  std::size_t topk = 4;  // coefficients sent per chunk
  double beta = 0.999;
  Codec codec = Codec::fp32;
};

class Demo final : public SyncStrategy {
 public:
  explicit Demo(DemoOptions opts);
  void after_backward(std::int64_t step) override;
  std::string describe() const override;
  ReducerStats reducer_stats() const override { return stats_; }
  double comm_seconds() const override { return comm_s_; }
  // "demo.momentum": this rank's momentum (ranks differ).
  std::vector<StateTensor> state() override;

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  DemoOptions opts_;
  ChunkTopK wire_;
  ChunkDct dct_;
  std::vector<std::size_t> offsets_;  // per tensor: where its encoding starts in a rank's block
  std::size_t block_bytes_ = 0;       // one rank's encoding of every tensor
  std::vector<float> momentum_, coef_, sent_, spatial_;
  std::vector<std::uint8_t> gathered_;
  ChunkTopKScratch scratch_;
  ReducerStats per_step_;  // what every step encodes (fixed by the layout; prepare)
  ReducerStats stats_;
  double comm_s_ = 0;
};

}  // namespace laconic
