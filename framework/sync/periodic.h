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
// Streaming DiLoCo (Douillard et al. 2025) is the same algorithm on fragments: the parameters are
// split into F contiguous fragments of whole tensors (the largest as small as possible,
// fragment_bounds), each with
// its own anchor and outer momentum, and fragment f syncs on its own staggered schedule, when
//   (c - f * H / F) mod H == 0,  c = step + 1 - warmup_steps the local steps done, c >= 1
// (fragment 0 after H steps, fragment f > 0 first after f * H / F), so each sync sends about 1/F
// of the model and the peak bandwidth falls by about F. With overlap_steps = tau > 0 a fragment's
// pseudo-gradient is reduced on the communication thread while tau more inner steps run; after
// step s + tau (s the sync step) the outer step is taken and the fragment mixed back:
//   theta_f = mixing * theta_f,local + (1 - mixing) * theta_f,global
// (mixing = alpha = 0: the replica adopts the new anchor, DiLoCo's rule). F = 1, tau = 0, alpha = 0
// is DiLoCo: the same code path and bits.
//
// Eager updates (Kale et al. 2025, arXiv 2502.12996), `eager`: a sync's all-reduce runs on the
// communication thread through the whole next period, and the outer step does not wait for it.
// At sync t replica m computes its own pseudo-gradient d_m^t = anchor_m - theta_m, queues its
// reduction, and steps with the paper's stand-in for the global mean
//   Delta~_m^t = G^(t-1) + (d_m^t - d_m^(t-1)) / M      (M replicas, G^(t-1) = mean_m d_m^(t-1))
// = its own fresh share d_m^t / M plus the others' shares of the previous sync, where G^(t-1) is
// the reduction launched at the previous sync, waited for only now (G^-1 = d^-1 = 0). The replica
// then restarts from its own anchor: anchors and outer momenta differ between replicas (they see
// different Delta~). One replica (M = 1) is DiLoCo exactly; with outer SGD without momentum the
// anchors telescope to anchor^0 - lr (sum_(s<t) G^s + d_m^t / M). Per fragment with streaming
// DiLoCo (each fragment's reduction overlaps until its own next sync); overlap_steps must be 0.
// The run's end waits for the last reduction (its bytes count) without applying it, so a stopped
// run resumes bit for bit; finish() (handing over to another strategy) averages the replicas'
// parameters once, dense fp32, so the next strategy starts from identical replicas.
//
// A period schedule (PeriodSegment list) replaces the single H: segment j runs `steps` local steps
// with period H_j (a multiple of H_j, so every fragment syncs as often in it; the last may run to
// the end), and each segment restarts the staggered schedule at its first step.
//
// The schedule is a function of the options and the step only, never of what happened before,
// so every rank (a composite's ranks that never ran this strategy too, and a resumed run) agrees
// on which steps communicate. A strategy that takes over at step s in a schedule of strategies
// counts its periods from s when its warmup_steps is s (plus any warm-up of its own): the steps
// before s are run by another strategy, and begin(s) sets the anchor.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

struct PeriodicOptions {
  std::int64_t period = 8;        // H: optimizer steps between syncs (>= 1)
  std::int64_t warmup_steps = 0;  // steps < this average gradients every step, no parameter sync
  double outer_lr = 1.0;          // outer SGD on theta_global with the averaged pseudo-gradient
  double outer_momentum = 0.0;
  bool nesterov = false;          // needs outer_momentum > 0
  double bucket_mb = 25.0;        // buckets of Delta handed to the reducer (make_buckets)
  int fragments = 1;              // F (streaming DiLoCo), at most the number of tensors
  std::int64_t overlap_steps = 0; // tau: inner steps a fragment's reduction overlaps (< every period)
  double mixing = 0.0;            // alpha in [0, 1): the local parameters' share after the merge
  bool eager = false;             // Kale et al.'s eager outer step (above); needs overlap_steps = 0
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

  // Elastic training: every sync's pseudo-gradient is also reduced across the replicas of
  // `group` (replica_group.h); null: the strategy's communicator is the whole world. Set before
  // the first step; the group must outlive the strategy's steps. Not with `eager` (the group's
  // quorum shares one anchor, which eager replicas do not have).
  void set_replica_group(ReplicaGroup* group);

  const PeriodicOptions& options() const { return opts_; }
  // Every fragment's buckets, ids unique across fragments, `begin` relative to the fragment.
  const std::vector<BucketLayout>& buckets(int fragment = 0) const;
  // "local SGD" when the outer step is the plain average (outer_lr 1, momentum 0), else "DiLoCo"
  // ("streaming DiLoCo" with fragments or overlap).
  bool is_local_sgd() const { return opts_.outer_lr == 1.0 && opts_.outer_momentum == 0.0; }
  bool is_streaming() const { return opts_.fragments > 1 || opts_.overlap_steps > 0 || opts_.mixing > 0; }
  bool reduces_async() const { return opts_.overlap_steps > 0 || opts_.eager; }
  // The schedule: how many syncs fragment f has launched up to and including local step count c
  // (c = step + 1 - warmup_steps), and whether it launches one at `step`.
  std::int64_t syncs_through(std::int64_t c, int fragment) const;
  bool launches(std::int64_t step, int fragment) const;

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

  PeriodicOptions opts_;
  std::unique_ptr<Reducer> reducer_;
  ReplicaGroup* replicas_ = nullptr;
  std::unique_ptr<Sparta> sparta_;  // opts_.sparta
  std::vector<std::unique_ptr<Fragment>> fragments_;
  ReducerStats stats_;
  double comm_s_ = 0;
};

}  // namespace laconic
