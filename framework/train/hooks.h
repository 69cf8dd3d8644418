// The step loop's helpers. The loop (trainer.cpp) only computes and synchronises; everything else
// a run does around its steps is a StepHook that owns when it is due, what it measures and what it
// keeps in a checkpoint: the non-finite guard, the noise scale, clipping, replica checks, the
// checkpointer, the evaluator and the reporter; tests and fault injection add theirs through
// TrainOptions::hooks (framework/train/faults.h).
//
// Per step, every rank calls, in the hooks' order:
//   before_step   gradients zeroed, nothing computed yet (faults: throw, exit, stall, a NaN)
//   admit         backward done, nothing reduced: false skips the step (all ranks must agree)
//   after_reduce  gradients reduced, before the optimizer (abort on non-finite, noise, clip)
//   after_step    parameters updated and synchronised (checks, checkpoints, evaluation, logs)
//   end_step      after every step, a skipped one too (elastic replicas: a joiner's state, the sync log)
// and once the loop is over and the strategy drained, before the run's last checkpoint, after_loop.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/netsim/sim_communicator.h"
#include "compression/reducer.h"
#include "core/timer.h"
#include "workloads/data/sampler.h"
#include "framework/elastic/elastic.h"
#include "framework/train/checkpoint.h"
#include "framework/train/hook_factory.h"
#include "framework/train/ledger.h"
#include "framework/train/options.h"
#include "framework/train/run_spec.h"
#include "optimizers/optimizer.h"

namespace laconic {

struct TrainSummary;

// One rank's run as its hooks see it (built by the session with named fields; everything outlives
// the hooks). What the run has counted and measured so far is the ledger's.
struct Loop {
  const RunSpec& spec;
  const TrainData& data;
  const TrainOptions& opts;
  Communicator& comm;     // the training's traffic: the simulated network's when there is one
  Communicator& control;  // the control plane (world.h): checks, metrics, checkpoint barriers
  SimCommunicator* sim;   // null without [network]
  Model& model;
  Optimizer& optimizer;
  SyncStrategy& sync;
  ShardedSampler* sampler;      // the data's order (null: the driver reads its own data, laconic.torch)
  const ElasticGroup* elastic;  // elastic training's replica group (null: not elastic)
  RunLedger& ledger;            // the run's counters (resumed runs included) and measured times

  int rank() const { return comm.rank(); }
  bool lead() const { return comm.rank() == 0; }
  ParamStore& store() const { return model.params(); }
  // What the optimizer steps: the whole model, or this rank's shard of it (sync.shard), whose
  // reduced gradients are the only ones it has.
  ParamStore& update_store() const { return sync.update_store(); }
  Device device() const { return spec.device; }
};

// One step as it runs.
struct StepState {
  std::int64_t step = 0;  // 0-based; step + 1 steps are done once it completes
  double lr = 0;
  // This rank's training loss over its micro-batches: the sum of per-example (MLM: per-token)
  // losses and how many were counted, so that means over ranks and steps weigh every example once.
  double loss_sum = 0, loss_count = 0;
  double local_sq = 0;    // |g|^2 of this rank's averaged gradients before reduction (noise scale)
  double grad_norm = std::numeric_limits<double>::quiet_NaN();    // before clipping (when clipping)
  double noise_scale = std::numeric_limits<double>::quiet_NaN();  // B_simple (when estimated)
  // The norm of the reduced gradients, computed once for whichever hooks need it.
  double reduced_norm(const Loop& loop);

 private:
  std::optional<double> reduced_norm_;
};

class StepHook {
 public:
  virtual ~StepHook() = default;
  virtual void before_step(StepState&) {}
  virtual bool admit(StepState&) { return true; }
  virtual void after_reduce(StepState&) {}
  virtual void after_step(StepState&) {}
  virtual void end_step(std::int64_t /*step*/) {}
  // `steps` done; `stopped`: by a signal or the time limit (else the run reached its last step).
  virtual void after_loop(std::int64_t /*steps*/, bool /*stopped*/) {}
  // While this rank writes its shard of the checkpoint of `step` (bytes written so far).
  virtual void on_shard_chunk(std::int64_t /*step*/, std::uint64_t /*written*/) {}
  // This hook's state in the rank's checkpoint shard (entries named after the hook); save's spans
  // must stay valid until the shard is written.
  virtual void save(ShardWriter&) {}
  // Files of its own beside this rank's shard in the checkpoint's staging directory `dir`
  // (committed with the shards: laconic.torch's optimizer state in torch's format).
  virtual void save_files(const std::string& /*dir*/) {}
  virtual void load(const ShardReader&) {}
  virtual void finish(TrainSummary&) {}
};

using Hooks = std::vector<std::unique_ptr<StepHook>>;

// The built-in hooks, in the order the session runs them (each does nothing when its recipe keys
// leave it off); then the evaluator, the reporter, the checkpointer (checkpointer.h), which saves
// and restores every hook, and an elastic replica's hook (elastic_hook.h).
std::unique_ptr<StepHook> make_nonfinite_guard(Loop& loop);
std::unique_ptr<StepHook> make_noise_scale(Loop& loop);
std::unique_ptr<StepHook> make_clipping(Loop& loop);
std::unique_ptr<StepHook> make_on_step(Loop& loop);
std::unique_ptr<StepHook> make_replica_check(Loop& loop);

class Evaluator final : public StepHook {
 public:
  explicit Evaluator(Loop& loop);
  void after_step(StepState& s) override;
  void finish(TrainSummary& s) override;
  // Whether the step that just completed (done = step + 1) is evaluated (rank 0 only runs it).
  bool due(std::int64_t done) const;
  const EvalResult& last() const { return last_; }
  double last_seconds() const { return last_s_; }

 private:
  Loop& loop_;
  std::vector<std::int64_t> order_;  // 0..size-1, allocated once
  Batch batch_;
  EvalResult last_;
  double last_s_ = 0;
};

std::unique_ptr<StepHook> make_reporter(Loop& loop, const Evaluator& eval);

}  // namespace laconic
