// SPARTA: sparse parameter averaging (Exo Labs, 2025). There is no gradient
// reduction: every rank steps its own optimizer on its own data, and every `period` steps each
// parameter element is chosen with probability `fraction` (the same choice on every rank:
// element i is chosen at step s when bits(key(seed, s), i) < fraction x 2^64, core/rng.h) and the
// chosen elements are replaced by their average over the ranks:
//   theta_r[i] <- mean_r' theta_r'[i]   for the chosen i
// so the replicas' mean is unchanged and the replicas are pulled together a few elements at a
// time. The reference (exo-explore's SPARTA) draws a Bernoulli mask per tensor per step the same
// way; the fractions it studies are 0.0005 to 0.005. Under DiLoCo's outer step (the paper's
// combination): PeriodicOptions::sparta (periodic.h), which runs this class between the syncs.
//
// Bytes: the chosen values only (the indices follow from the seed and the step), about
// fraction x n floats per sync through one all-reduce: with a ring, 2(N-1)/N x 4 x fraction x n
// bytes per rank every `period` steps. fraction = 1, period = 1 averages every parameter after
// every step: with plain SGD, data parallelism up to rounding.
// Nothing is kept between steps (the choice is a function of the seed and the step), so a resumed
// run is bit for bit the uninterrupted one. Host buffers only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/sync/sync_strategy.h"

namespace laconic {

struct SpartaOptions {
  double fraction = 0.005;    // each element's chance to be averaged at a sync, in (0, 1]
  std::int64_t period = 1;    // steps between syncs
  std::uint64_t seed = 0;     // the run's seed: every rank draws the same elements
  bool operator==(const SpartaOptions&) const = default;
};

class Sparta final : public SyncStrategy {
 public:
  explicit Sparta(SpartaOptions opts);
  void after_backward(std::int64_t /*step*/) override {}
  bool after_update(std::int64_t step) override;
  bool reduces_gradients(std::int64_t /*step*/) const override { return false; }
  bool averages_params(std::int64_t step) const override { return syncs(step); }
  bool replicas_agree_after(std::int64_t step) const override { return opts_.fraction >= 1.0 && syncs(step); }
  std::string describe() const override;
  ReducerStats reducer_stats() const override { return stats_; }
  double comm_seconds() const override { return comm_s_; }
  // Whether element i is averaged at `step` (on every rank alike).
  bool chosen(std::int64_t step, std::size_t i) const;
  bool syncs(std::int64_t step) const { return (step + 1) % opts_.period == 0; }

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  SpartaOptions opts_;
  std::uint64_t threshold_ = 0;  // fraction x 2^64 (fraction < 1)
  std::vector<float> values_;    // the chosen values, gathered (sized once: every element)
  std::vector<std::uint32_t> index_;
  ReducerStats stats_;
  double comm_s_ = 0;
};

}  // namespace laconic
