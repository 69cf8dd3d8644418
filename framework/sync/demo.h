// DeMo, decoupled momentum optimization (Peng, Quesnelle & Kingma 2024, arXiv 2411.19870), as a
// strategy that runs every step, by default as the reference implementation (bloc97/DeMo demo.py,
// which Psyche runs) does it. Each rank keeps its own momentum m (never averaged):
//   m = beta * m + lr_t * g                   (g: this rank's gradient, micro-batches averaged;
//                                              lr_t: the [optimizer]'s learning rate at step t)
//   q = top-k per block of DCT(m)             (per tensor; compression/dct.h's 2-D blocks)
//   m = m - IDCT(q)                           (the transmitted, fast components leave m)
//   Q = IDCT(each coefficient averaged over the ranks that sent it; 0 where none did)
//   g = sign(Q)                               (sign(0) = 0: positions no rank sent stay still)
// and the [optimizer] (plain SGD: theta -= lr * (g + weight_decay * theta)) takes the sign step of
// the paper (the reference's theta *= 1 - lr * wd, then theta -= lr * sign: the same step).
// The blocks: a tensor of shape (r, ...) is the matrix r x numel / r, cut into blocks of
// h x w, h and w the largest divisors of r and of numel / r that are at most `chunk` (a vector of
// n: chunks of the largest divisor of n up to `chunk`); top-k keeps min(topk, h * w) coefficients
// of every block. chunk = 64, topk = 32 are the reference's defaults: 32 of 4096 (0.8%).
// Earlier variants, each an option:
//   fold_lr = false:       m = beta * m + g (the rate applied only by the optimizer; with a
//                          schedule, steps weigh equally in m instead of by their rate)
//   dct = one_d:           1-D chunks of `chunk` over each tensor's flattened elements (the last
//                          shorter), topk of every chunk (4 of 64 is 6.25%)
//   average = ranks:       Q = IDCT(sum over ranks of q / N): a coefficient few ranks sent is
//                          shrunk by their share of N
// q travels as ChunkTopK (compression/sparse.h) per tensor: the coefficients' values in `codec`
// with one scale per block, positions in ceil(log2 block) bits; every rank's encoding has the
// same size, so one all_gather of (N - 1) * payload bytes per rank per step.
// All of it on host buffers (device = cpu).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compression/dct.h"
#include "compression/sparse.h"
#include "core/enum_names.h"
#include "framework/sync/sync_strategy.h"

namespace laconic {

enum class DemoDct { two_d, one_d };
inline constexpr std::array kDemoDctNames{"2d", "1d"};
constexpr std::span<const char* const> names(DemoDct) { return kDemoDctNames; }
inline const char* name_of(DemoDct v) { return enum_name(v); }

enum class DemoAverage { senders, ranks };
inline constexpr std::array kDemoAverageNames{"senders", "ranks"};
constexpr std::span<const char* const> names(DemoAverage) { return kDemoAverageNames; }
inline const char* name_of(DemoAverage v) { return enum_name(v); }

struct DemoOptions {
  std::size_t chunk = 64;  // two_d: block side per dimension (at most); one_d: elements per chunk
  std::size_t topk = 32;   // coefficients sent per block (chunk)
  double beta = 0.999;
  Codec codec = Codec::fp32;
  DemoDct dct = DemoDct::two_d;
  DemoAverage average = DemoAverage::senders;
  bool fold_lr = true;
  // fold_lr: the learning rate the [optimizer] applies at step t (the run's schedule).
  std::function<double(std::int64_t)> lr;
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
  // Tensor t's coefficients from its momentum x, and back.
  void forward(std::size_t t, std::span<const float> x, std::span<float> coef);
  void inverse(std::size_t t, std::span<const float> coef, std::span<float> x);

  DemoOptions opts_;
  ChunkDct dct_;
  std::vector<DctBlocks> blocks_;  // per tensor (two_d)
  TensorTopK wire_;                // per tensor: one rank's encoding of every tensor
  std::vector<float> momentum_, coef_, sent_, spatial_, count_, tmp_;
  std::vector<std::uint8_t> gathered_;
  ChunkTopKScratch scratch_;
  ReducerStats per_step_;  // what every step encodes (fixed by the layout; prepare)
  ReducerStats stats_;
  double comm_s_ = 0;
};

}  // namespace laconic
