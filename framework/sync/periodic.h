// Periodic averaging with an outer optimizer: local SGD, DiLoCo and streaming DiLoCo (with its
// eager form and SPARTA between syncs) are one algorithm, PeriodicAveraging
// (docs/references.md "Local SGD and DiLoCo").
//
// Every rank keeps an anchor theta_global and takes H = period local optimizer steps from it;
// then the ranks average the pseudo-gradient Delta = mean_r(theta_global - theta_r) through the
// Reducer, in buckets, an outer SGD step (optimizers/sgd.h) moves the anchor, and every replica
// restarts from it. Invariants: the anchor is identical on every rank (except under eager, where
// each replica keeps its own); which steps communicate is a function of the options and the step
// only, so every rank, a composite's ranks that never ran this strategy, and a resumed run agree.
// The rule, the warm-up, the bytes and the schedules: docs/outer_loop.md "Local SGD and DiLoCo:
// the outer step", "Schedules" and "Eager DiLoCo".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"
#include "framework/sync/replica_group.h"
#include "framework/sync/sparta.h"
#include "framework/sync/sync_strategy.h"
#include "optimizers/sgd.h"

namespace laconic {

// `steps` local steps synced every `period` steps; steps = 0: to the end (the last segment only).
struct PeriodSegment {
  std::int64_t steps = 0;
  std::int64_t period = 1;
  bool operator==(const PeriodSegment&) const = default;
};

// The outer optimizer on theta_global: torch's SGD (momentum, Nesterov) or Adam (AdamW without
// decay, beta1 = outer_momentum), Douillard et al. 2023's ablation.
enum class OuterOptimizer : std::uint8_t { sgd, adam };
inline constexpr std::array kOuterOptimizerNames{"sgd", "adam"};
constexpr std::span<const char* const> names(OuterOptimizer) { return kOuterOptimizerNames; }

struct PeriodicOptions {
  std::int64_t period = 8;        // H: optimizer steps between syncs (>= 1)
  std::int64_t warmup_steps = 0;  // steps < this average gradients every step, no parameter sync
  double outer_lr = 1.0;          // outer SGD on theta_global with the averaged pseudo-gradient
  double outer_momentum = 0.0;
  bool nesterov = false;          // needs outer_momentum > 0 (SGD only)
  OuterOptimizer outer_optimizer = OuterOptimizer::sgd;
  double outer_beta2 = 0.999;     // adam: the second moment's decay
  double outer_eps = 1e-8;        // adam: added to the second moment's root
  double bucket_mb = 25.0;        // buckets of Delta handed to the reducer (make_buckets)
  int fragments = 1;              // F (streaming DiLoCo), at most the number of tensors
  std::int64_t overlap_steps = 0; // tau: inner steps a fragment's reduction overlaps (< every period)
  double mixing = 0.0;            // alpha in [0, 1): the local parameters' share after the merge
  bool eager = false;             // Kale et al.'s eager outer step; needs overlap_steps = 0
  // The paper's FedPart-style ablation (Douillard et al. 2025, section 3.3): a local step trains
  // only the fragment whose sync comes next (trains()); the others keep their values bit for bit,
  // restored after the optimizer step from a copy taken before it. Needs fragments > 1, no SPARTA.
  bool freeze = false;
  // SPARTA between the outer steps (Exo Labs' SPARTA-DiLoCo, sparta.h): after every local step
  // (warm-up steps excepted; before the step's outer sync) the chosen elements of the parameters
  // are averaged over the ranks. The replicas' mean is unchanged, so the pseudo-gradient is the
  // one without it; SPARTA only pulls the replicas together between syncs. Host buffers.
  std::optional<SpartaOptions> sparta;
  std::vector<PeriodSegment> schedule;  // empty: `period` throughout
  // What describe() calls the algorithm; empty: local SGD (outer_lr 1, no momentum), streaming
  // DiLoCo or DiLoCo, by the options.
  std::string name;
};

// Where fragment f of `store` begins, for f = 0..F (bounds[F] = the number of tensors): contiguous
// runs of whole tensors (each at least one), cut so that the largest fragment, which sets a sync's
// peak bytes, is as small as the tensors allow.
std::vector<std::size_t> fragment_bounds(const ParamStore& store, int fragments);

// The same fragments on a shard of `whole` (zero.h's make_shard_store; tensor_of[v]: the whole
// model's tensor that shard view v is a piece of): fragment f is the shard's pieces of whole
// fragment f, possibly none, so a sharded outer sync moves the parameters the unsharded one does.
std::vector<std::size_t> shard_fragment_bounds(const ParamStore& whole, std::span<const std::size_t> tensor_of,
                                               int fragments);

// The two configurations by name, so every caller maps "local_sgd" and "diloco" the same way.
// DiLoCo with outer_lr 1, momentum 0 is local SGD (the same options, the same bits).
inline PeriodicOptions local_sgd_options(std::int64_t period, std::int64_t warmup_steps = 0,
                                         double bucket_mb = 25.0) {
  PeriodicOptions o;
  o.period = period;
  o.warmup_steps = warmup_steps;
  o.bucket_mb = bucket_mb;
  return o;
}
inline PeriodicOptions diloco_options(std::int64_t period, double outer_lr = 0.7, double outer_momentum = 0.9,
                                      bool nesterov = true, double bucket_mb = 25.0) {
  PeriodicOptions o;
  o.period = period;
  o.outer_lr = outer_lr;
  o.outer_momentum = outer_momentum;
  o.nesterov = nesterov;
  o.bucket_mb = bucket_mb;
  return o;
}

class PeriodicAveraging final : public SyncStrategy {
 public:
  PeriodicAveraging(PeriodicOptions opts, std::unique_ptr<Reducer> reducer);
  ~PeriodicAveraging() override;
  // Warm-up steps only: all-reduces the gradients (average, fp32). Local steps: nothing.
  void after_backward(std::int64_t step) override;
  // Launches the syncs due at `step` and merges those launched at step - tau; true when a merge
  // overwrote (part of) the parameters.
  bool after_update(std::int64_t step) override;
  bool reduces_gradients(std::int64_t step) const override { return step < opts_.warmup_steps; }
  // Only after a warm-up step or a merge of every fragment at once (F = 1 with mixing 0).
  bool replicas_agree_after(std::int64_t step) const override;
  bool averages_params(std::int64_t step) const override;
  // Taking over at `step` from another strategy (replicas identical): the anchor is the parameters.
  void begin(std::int64_t step) override;
  // Handing over after `step`: finishes the fragments in flight, then syncs every fragment not
  // merged at `step` once more (an outer step on a shorter period), all adopting the anchor
  // (no mixing), so the next strategy starts from identical replicas. Nothing after a warm-up
  // step or a full merge.
  void finish(std::int64_t step) override;
  // The run ends: fragments in flight are merged now (their remaining overlap steps cut short),
  // so the bytes their reduction cost reach the final parameters.
  void drain() override;
  // A fragment launched in the last tau steps is merged by drain().
  bool averages_at_drain(std::int64_t last_step) const override;
  std::string describe() const override;
  // What the reducer did up to the last merge (read on the step loop's thread while a fragment
  // may be reducing on the communication thread).
  ReducerStats reducer_stats() const override { return stats_; }
  double comm_seconds() const override { return comm_s_ + (sparta_ ? sparta_->comm_seconds() : 0.0); }
  // Per fragment (F = 1: no ".<f>"): "periodic.global[.<f>]" (the anchor),
  // "periodic.outer.momentum[.<f>]" (when momentum > 0), "periodic.delta[.<f>]" (the averaged
  // pseudo-gradient of a fragment in flight: with tau > 0 only), "periodic.eager.global[.<f>]"
  // and "periodic.eager.local[.<f>]" (eager: G and d_m of the last sync), then the reducer's
  // buffers.
  // Waits for fragments in flight first, so a checkpoint holds their reduced pseudo-gradient and
  // a resumed run merges it at the same step. Valid after start(); a loader writes them after.
  std::vector<StateTensor> state() override;
  // freeze: the frozen fragments' copy, one parameter-sized buffer (not checkpointed: a resumed
  // run copies the fragments again before its first optimizer step).
  std::uint64_t buffer_bytes() const override { return held_.span().size_bytes(); }

  // Elastic training: every sync's pseudo-gradient is also reduced across the replicas of
  // `group` (replica_group.h); null: the strategy's communicator is the whole world. Set before
  // the first step; the group must outlive the strategy's steps. Not with `eager` (the group's
  // quorum shares one anchor, which eager replicas do not have).
  void set_replica_group(ReplicaGroup* group);

  // The store this strategy will be bound to is a shard of `whole` (sharded outer state,
  // composite.h): fragments follow whole's tensors (shard_fragment_bounds). Set before bind();
  // `whole` must outlive the strategy.
  void shard_of(const ParamStore& whole, std::vector<std::size_t> tensor_of);

  const PeriodicOptions& options() const { return opts_; }
  // Every fragment's buckets, ids unique across fragments, `begin` relative to the fragment.
  const std::vector<BucketLayout>& buckets(int fragment = 0) const;
  // "local SGD" when the outer step is the plain average (outer_lr 1, momentum 0), else "DiLoCo"
  // ("streaming DiLoCo" with fragments or overlap).
  bool is_local_sgd() const {
    return opts_.outer_optimizer == OuterOptimizer::sgd && opts_.outer_lr == 1.0 && opts_.outer_momentum == 0.0;
  }
  bool is_streaming() const { return opts_.fragments > 1 || opts_.overlap_steps > 0 || opts_.mixing > 0; }
  bool reduces_async() const { return opts_.overlap_steps > 0 || opts_.eager; }
  // The schedule: how many syncs fragment f has launched up to and including local step count c
  // (c = step + 1 - warmup_steps), and whether it launches one at `step`.
  std::int64_t syncs_through(std::int64_t c, int fragment) const;
  bool launches(std::int64_t step, int fragment) const;
  // Whether `step`'s optimizer update reaches fragment f: always, except local steps under
  // `freeze`, where only the fragments launching at the first launch at or after `step` train.
  bool trains(std::int64_t step, int fragment) const;

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  struct Fragment;
  // Delta_f = anchor_f - params_f, then its reduction (on the communication thread when tau > 0).
  void launch(Fragment& f, std::int64_t step);
  // Waits for the reduction, takes the outer step, mixes (or, `adopt`, copies) the anchor in.
  void merge(Fragment& f, bool adopt);
  // The outer step on the fragment's anchor with shadow.grads(), then the mix (or copy) into the
  // parameters.
  void outer_update(Fragment& f, bool adopt);
  // An eager sync at `step`: G of the previous sync, this one's d_m queued, the outer step now.
  void eager_sync(Fragment& f);
  // Waits for the fragment's reduction, if queued, then takes its seconds and the reducer's
  // statistics.
  void collect(Fragment& f);
  // out = the fragment's anchor - its parameters (out: the fragment's size, on its device).
  void pseudo_gradient(const Fragment& f, std::span<float> out);
  void reduce(Fragment& f);  // the reducer over the fragment's buckets (at outer step f.outer_step)
  void wait_in_flight();
  // theta_global = the replica's parameters.
  void anchor(const ParamStore& store);
  // The first step at or after local step `step` at which some fragment launches a sync.
  std::int64_t next_launch(std::int64_t step) const;
  // freeze, before the optimizer step: copies into held_ the fragments `step` does not train whose
  // copy is stale; after it: copies them back (the cheapest exact hold for any inner optimizer).
  void hold_frozen(std::int64_t step);
  void restore_frozen(std::int64_t step);

  PeriodicOptions opts_;
  std::unique_ptr<Reducer> reducer_;
  ReplicaGroup* replicas_ = nullptr;
  const ParamStore* whole_ = nullptr;      // shard_of(): the model this store is a shard of
  std::vector<std::size_t> shard_tensor_of_;
  std::unique_ptr<Sparta> sparta_;  // opts_.sparta
  std::vector<std::unique_ptr<Fragment>> fragments_;
  DeviceArray<float> held_;  // freeze: frozen fragments' parameters, at their offsets in the store
  ReducerStats stats_;
  double comm_s_ = 0;
};

}  // namespace laconic
