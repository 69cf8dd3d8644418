// Periodic averaging with an outer optimizer: local SGD and DiLoCo are one algorithm
// (../shared/REFERENCES.md "Local SGD and DiLoCo").
//
// Every rank keeps an anchor theta_global (identical on all ranks) and takes H = period local
// optimizer steps from it without communicating. Then the ranks average the pseudo-gradient
//   Delta = mean_r(theta_global - theta_r)               (through the Reducer, in buckets)
// and take one outer SGD step on the anchor, torch.optim.SGD semantics (optimizers/sgd.h):
//   b = mu * b + Delta;  d = nesterov ? Delta + mu * b : b;  theta_global -= outer_lr * d
// after which every replica restarts from theta_global.
//   local SGD (Lin et al. 2020, PyTorch's PeriodicModelAverager): outer_lr 1, mu 0, so
//     theta_global - (theta_global - mean(theta_r)) = mean(theta_r), the plain parameter average.
//   DiLoCo (Douillard et al. 2023): outer_lr 0.7, mu 0.9, Nesterov.
// Post-local SGD warm-up: steps < warmup_steps are synchronous (gradients all-reduced every step,
// dense fp32) and only keep the anchor current; local steps start after them and the first sync
// is at step warmup_steps + H - 1, after H local steps. (PyTorch's PeriodicModelAverager averages
// when step >= warmup and (step - warmup) % H == 0 with steps from 0: after one local step first.)
//
// Bytes: a sync reduces the whole parameter-sized Delta once, so with the dense fp32 reducer a
// ring all-reduce puts about 2(N-1)/N * 4n bytes per rank on the wire every H steps: exactly 1/H
// of what data parallel sends over the same steps (same buckets, same collectives).
//
// The step the reducer sees is the outer step (syncs done before this one, derived from `step`,
// so a resumed run counts the same): a reducer's own warm-up (PowerSGD's start_iter, top-k's
// warmup_steps) therefore counts syncs, not optimizer steps.
//
// The schedule is a function of the options and the step only, never of what happened before,
// so every rank (a composite's ranks that never ran this strategy too, and a resumed run) agrees
// on which steps communicate. A strategy that takes over at step s in a schedule of strategies
// counts its periods from s when its warmup_steps is s (plus any warm-up of its own): the steps
// before s are run by another strategy, and begin(s) sets the anchor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framework/sync/sync_strategy.h"
#include "optimizers/sgd.h"

namespace laconic {

struct PeriodicOptions {
  std::int64_t period = 8;        // H: optimizer steps between syncs (>= 1)
  std::int64_t warmup_steps = 0;  // steps < this average gradients every step, no parameter sync
  double outer_lr = 1.0;          // outer SGD on theta_global with the averaged pseudo-gradient
  double outer_momentum = 0.0;
  bool nesterov = false;          // needs outer_momentum > 0
  double bucket_mb = 25.0;        // buckets of Delta handed to the reducer (make_buckets)
};

// The two configurations by name, so every caller maps "local_sgd" and "diloco" the same way.
// DiLoCo with outer_lr 1, momentum 0 is local SGD (the same options, the same bits).
inline PeriodicOptions local_sgd_options(std::int64_t period, std::int64_t warmup_steps = 0,
                                         double bucket_mb = 25.0) {
  return {period, warmup_steps, 1.0, 0.0, false, bucket_mb};
}
inline PeriodicOptions diloco_options(std::int64_t period, double outer_lr = 0.7, double outer_momentum = 0.9,
                                      bool nesterov = true, double bucket_mb = 25.0) {
  return {period, 0, outer_lr, outer_momentum, nesterov, bucket_mb};
}

class PeriodicAveraging final : public SyncStrategy {
 public:
  PeriodicAveraging(PeriodicOptions opts, std::unique_ptr<Reducer> reducer);
  // Warm-up steps only: all-reduces the gradients (average, fp32). Local steps: nothing.
  void after_backward(std::int64_t step) override;
  // True on sync steps, which overwrite the parameters with the new anchor.
  bool after_update(std::int64_t step) override;
  bool reduces_gradients(std::int64_t step) const override { return step < opts_.warmup_steps; }
  bool replicas_agree_after(std::int64_t step) const override {
    return reduces_gradients(step) || averages_params(step);
  }
  bool averages_params(std::int64_t step) const override {
    return step >= opts_.warmup_steps && (step + 1 - opts_.warmup_steps) % opts_.period == 0;
  }
  // Taking over at `step` from another strategy (replicas identical): the anchor is the parameters.
  void begin(std::int64_t step) override;
  // Handing over after `step`: syncs once more (an outer step on a shorter period) unless the
  // replicas are identical already (a warm-up step or a sync step), so the next strategy starts
  // from identical replicas.
  void finish(std::int64_t step) override;
  std::string describe() const override;
  ReducerStats reducer_stats() const override { return reducer_->stats(); }
  double comm_seconds() const override { return comm_s_; }
  // "periodic.global" (the anchor), "periodic.outer.momentum" (when momentum > 0), then the
  // reducer's buffers. Valid after start(); a loader writes them after start().
  // (prepare: sets the anchor to the parameters and sizes every buffer (anchor, Delta, outer
  // momentum, the reducer's state): after_backward / after_update allocate nothing.)
  std::vector<StateTensor> state() override;

  const PeriodicOptions& options() const { return opts_; }
  const std::vector<BucketLayout>& buckets() const { return buckets_; }
  // "local SGD" when the outer step is the plain average (outer_lr 1, momentum 0), else "DiLoCo".
  bool is_local_sgd() const { return opts_.outer_lr == 1.0 && opts_.outer_momentum == 0.0; }

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  // Delta = anchor - params, averaged by the reducer (at outer step `outer_step`), the outer step
  // on the anchor, params = anchor.
  void sync(std::int64_t outer_step);
  // theta_global = the replica's parameters.
  void anchor(const ParamStore& store);

  PeriodicOptions opts_;
  std::unique_ptr<Reducer> reducer_;
  Sgd outer_;
  // The outer optimizer's view of the world: same tensors as the model; params() = theta_global,
  // grads() = Delta. One flat buffer each, laid out like the model's.
  ParamStore shadow_;
  std::vector<BucketLayout> buckets_;
  double comm_s_ = 0;
};

}  // namespace laconic
