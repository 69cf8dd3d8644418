// NoLoCo: no all-reduce (Kolehmainen et al., Gensyn 2025, arXiv 2506.10911; the rule of the
// authors' code, github jkolehm/noloco src/noloco/sparse_optimizer_c.py, SparseOptimizerC).
//
// Every rank r holds its parameters theta_r, an anchor phi_r (its parameters at its last outer
// step; all equal at start) and an outer momentum delta_r (0 at start), and steps its own inner
// optimizer on its own data: no gradient reduction. Every `period` steps the ranks are paired by
// a random permutation pi of the ranks, a function of (seed, sync index) only (core/rng.h), the
// same on every rank without a message: pairs (pi[0], pi[1]), (pi[2], pi[3]), ...; with an odd
// number of ranks the last of pi sits out (its group is itself alone). Each pair swaps
// (phi, theta - phi) in one sendrecv and both compute the group means
//   Phi = (phi_a + phi_b) / 2,   D = ((theta_a - phi_a) + (theta_b - phi_b)) / 2
// (the same bits on both: float addition commutes), then the outer heavy-ball step
//   delta_r <- momentum * delta_r + outer_lr * D + pull * (Phi - phi_r)
//   phi_r   <- phi_r + delta_r;   theta_r <- phi_r
// (a sitting-out rank: Phi = phi_r, D = theta_r - phi_r, a DiLoCo step on its own). The pull
// term draws each anchor toward its partner's; the authors' code ties pull to outer_lr (both
// its `outer_lr`), so pull defaults to outer_lr's default. Replicas never agree exactly (each
// pair averages differently); the spread stays bounded by the pull.
//
// Bytes: per rank per sync, 2 x 4n sent and 2 x 4n received (n parameters), point to point with
// one peer; no collective. A sitting-out rank sends nothing.
//
// The schedule: a sync after `step` when (step + 1 - first_step) % period == 0 (first_step: where
// this strategy's phase begins, 0 alone), sync index (step + 1 - first_step) / period - 1. The
// state (anchor, momentum) travels in state(), the pairing is derived from the seed and the sync
// index, so a resumed run is bit for bit the uninterrupted one. No synchronous warm-up (the
// authors' code has none; its learning-rate warm-up is the schedule's). Host buffers only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/sync/sync_strategy.h"

namespace laconic {

struct NoLocoOptions {
  std::int64_t period = 50;     // H: inner steps between outer steps
  double outer_lr = 0.7;        // alpha: the step along the pair's mean pseudo-gradient
  double momentum = 0.5;        // beta: heavy-ball outer momentum, in [0, 1)
  double pull = 0.7;            // gamma: the pull toward the pair's mean anchor (the authors tie it to outer_lr)
  std::uint64_t seed = 0;       // the run's seed: every rank draws the same pairing
  std::int64_t first_step = 0;  // where this strategy's periods start (its phase's first step)
  bool operator==(const NoLocoOptions&) const = default;
};

class NoLoco final : public SyncStrategy {
 public:
  explicit NoLoco(NoLocoOptions opts);
  void after_backward(std::int64_t /*step*/) override {}
  bool after_update(std::int64_t step) override;
  bool reduces_gradients(std::int64_t /*step*/) const override { return false; }
  bool averages_params(std::int64_t step) const override { return syncs(step); }
  bool replicas_agree_after(std::int64_t /*step*/) const override { return false; }
  // Taking over from another strategy at `step` (replicas identical): the anchor is the
  // parameters, the momentum 0.
  void begin(std::int64_t step) override;
  // Handing over after `step`: one dense average of the parameters, so the next strategy starts
  // from identical replicas.
  void finish(std::int64_t step) override;
  std::string describe() const override;
  ReducerStats reducer_stats() const override { return stats_; }
  double comm_seconds() const override { return comm_s_; }
  // "noloco.anchor" (phi_r) and "noloco.momentum" (delta_r).
  std::vector<StateTensor> state() override;

  bool syncs(std::int64_t step) const {
    return step >= opts_.first_step && (step + 1 - opts_.first_step) % opts_.period == 0;
  }
  // The permutation of sync `index` over `world` ranks (written to `perm`, size world): pairs
  // (perm[0], perm[1]), (perm[2], perm[3]), ...; world odd: perm[world - 1] sits out.
  static void pairing(std::uint64_t seed, std::int64_t index, int world, std::vector<int>& perm);
  // `rank`'s partner at sync `index` (itself when it sits out).
  static int peer(std::uint64_t seed, std::int64_t index, int world, int rank, std::vector<int>& perm);

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  NoLocoOptions opts_;
  std::vector<float> anchor_, momentum_;
  std::vector<float> send_, recv_;  // [phi | theta - phi], 2n each
  std::vector<int> perm_;
  ReducerStats stats_;
  double comm_s_ = 0;
};

}  // namespace laconic
