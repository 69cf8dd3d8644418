// DES-LOC (Iacob et al. 2025, "Desynced Low Communication Adaptive Optimizers", arXiv
// 2505.22549): local Adam whose parameters and two moments are averaged across the ranks on
// periods of their own. There is no gradient reduction and no outer optimizer: every rank steps
// its own optimizer (AdamW, LAMB or Muon: anything with Adam's "exp_avg" and "exp_avg_sq") on its
// own data, and after step s (c = s + 1 steps done)
//   c % param_period == 0:  theta_r <- mean_r' theta_r'        (K_x)
//   c % m_period == 0:      m_r     <- mean_r' m_r'            (K_u, Adam's first moment)
//   c % v_period == 0:      v_r     <- mean_r' v_r'            (K_v, the second moment, arithmetic mean)
// as the first author's implementation does it (torchft's DesLoc: each state after the local step,
// counters from the first step, no offsets). Equal periods are Local Adam (every state averaged
// every K steps); the paper recommends K_u = 3 K_x and K_v = 6 K_x (the defaults here, K_x = 32),
// a state synced about once per half-life of its decay (ln 0.5 / ln beta). The step count of
// Adam's bias correction is the same on every rank and stays local.
//
// Bytes: each averaging is one dense fp32 all-reduce of n floats, so a ring sends
//   2 (N - 1)/N * 4n * (1/K_x + 1/K_u + 1/K_v)
// bytes per rank per step: 1.5/K_x model all-reduces at the recommended periods, half of Local
// Adam's 3/K_x. A state due at the same step as another travels in its own all-reduce.
// Nothing is kept between steps (the schedule is the step's), so a resumed run is bit for bit the
// uninterrupted one given the optimizer's state (which checkpoints hold). Host buffers only; not
// under `sync.intra` (the moments of a datacenter's other ranks would not follow its leader's).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "framework/sync/sync_strategy.h"

namespace laconic {

struct DeslocOptions {
  std::int64_t param_period = 32;  // K_x
  std::int64_t m_period = 96;      // K_u
  std::int64_t v_period = 192;     // K_v
  bool operator==(const DeslocOptions&) const = default;
};

class Desloc final : public SyncStrategy {
 public:
  explicit Desloc(DeslocOptions opts);
  void after_backward(std::int64_t /*step*/) override {}
  bool after_update(std::int64_t step) override;
  bool reduces_gradients(std::int64_t /*step*/) const override { return false; }
  bool averages_params(std::int64_t step) const override { return due(step, opts_.param_period); }
  bool replicas_agree_after(std::int64_t step) const override { return averages_params(step); }
  // The optimizer's "exp_avg" and "exp_avg_sq" (InputError without them).
  void set_optimizer_state(std::span<const StateTensor> state) override;
  std::string describe() const override;
  ReducerStats reducer_stats() const override { return stats_; }
  double comm_seconds() const override { return comm_s_; }
  static bool due(std::int64_t step, std::int64_t period) { return (step + 1) % period == 0; }

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  void average(std::span<float> x);

  DeslocOptions opts_;
  std::span<float> m_, v_;
  ReducerStats stats_;
  double comm_s_ = 0;
};

}  // namespace laconic
