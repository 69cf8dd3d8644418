// One rank of a run around steps that its driver computes: the communicators (the simulated
// network's wrapper, the device communicator), the sync strategy, the hooks (checkpoints,
// evaluation, metrics, guards), the event trace and the run's summary. Two drivers use it: the
// trainer's Worker (trainer.cpp) with Laconic's own models, and laconic.torch (external.h) with a
// model whose forward, backward and optimizer run in PyTorch.
//
// A driver calls, per optimizer step:
//   begin_step()   the gradients zeroed, the before_step hooks; then it runs forward and backward,
//                  telling ready() which gradients are final (overlap), and measures the time
//   reduce()       the rest of the gradients handed on, the admit hooks, the strategy's reduction,
//                  the after_reduce hooks; false: the step is skipped (the driver goes to end_step)
//   (the driver's optimizer step, inside the optimizer's trace span, timed)
//   updated()      the strategy's parameter sync, the after_step hooks (checkpoints, logs)
//   end_step()     the end_step hooks, then agree_to_stop()
// and, once: start() before the first step, finish() after the last.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "collectives/communicator.h"
#include "collectives/netsim/sim_communicator.h"
#include "collectives/trace.h"
#include "framework/elastic/elastic.h"
#include "framework/recipe/factory.h"
#include "framework/train/checkpointer.h"
#include "framework/train/elastic_hook.h"
#include "framework/train/hooks.h"
#include "framework/train/options.h"
#include "framework/train/ledger.h"
#include "framework/train/run_spec.h"
#include "framework/train/stop.h"
#include "framework/train/summary.h"

namespace laconic {

// A compute span of the trace (collectives/trace.h), from construction to destruction.
class TraceSpan {
 public:
  TraceSpan(Tracer* t, SpanKind k) : t_(t), k_(k) {
    if (t_) t_->span_begin(k_);
  }
  ~TraceSpan() {
    if (t_) t_->span_end(k_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Tracer* t_;
  SpanKind k_;
};

class GradsReady;

class Session {
 public:
  // `base`, `control`: this rank's communicators (world.h). `resume`: the checkpoint to continue
  // from (null: fresh). `elastic`: the replica group (null: the world is this run's ranks).
  // `model` holds its initial parameters where it trains; `sampler` is the run's data order when
  // the session owns the data (null: the driver's own loader). All outlive the session.
  Session(const RunSpec& spec, const TrainData& data, const TrainOptions& opts, Communicator& base,
          Communicator& control, const CheckpointInfo* resume, ElasticGroup* elastic, Model& model,
          Optimizer& optimizer, ShardedSampler* sampler);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The recipe check between ranks, the trace, the strategy's start (rank 0's parameters to every
  // rank), the hooks, a resume's state. Returns the first step.
  std::int64_t start();

  // `grad_scale`: what the final gradients are multiplied by as they are handed on (1 / the
  // micro-batches summed into them).
  void begin_step(StepState& s, float grad_scale);
  // Whom backward tells about final gradients during the step's last backward.
  GradsReadyListener& ready();
  // Whether ready() hears every micro-batch's backward (ZeRO-2), not the last one's alone: then
  // next_micro_batch() before each backward after the first.
  bool reduces_each_micro_batch() const;
  void next_micro_batch();
  // Whether this rank computes step `step` (the strategy's computes(): false, the driver skips
  // forward, backward and the optimizer, and still calls reduce() and updated()).
  bool computes(std::int64_t step) const;
  // Backward done after `compute_s` seconds of this rank's work. Sets s.local_sq and s.lr.
  bool reduce(StepState& s, double compute_s);
  // The driver's optimizer stepped in `optimizer_s` seconds.
  void updated(StepState& s, double optimizer_s);
  void end_step(std::int64_t step);
  // After each step: whether to stop now, agreed by every rank (a signal any rank caught; the
  // time limit by rank 0's clock, one mean step early), every step or every few while the
  // agreement is costly beside a step (StopAgreement). False: go on.
  Stop agree_to_stop(std::int64_t step);
  // After `steps` steps (`stop`: agree_to_stop's verdict): nothing left in flight, the after_loop
  // hooks, the run's last checkpoint, the trace closed; the summary (rank 0's holds the final
  // parameters).
  TrainSummary finish(std::int64_t steps, Stop stop);

  Tracer* tracer() { return tracer_.get(); }
  Loop& loop() { return loop_; }
  const RunLedger& ledger() const { return ledger_; }
  const DataShard& shard() const { return shard_; }
  Communicator& comm() { return comm_; }
  // The store the optimizer steps (SyncStrategy::update_store: the model's, or this rank's shard).
  ParamStore& update_store() { return sync_->update_store(); }
  Communicator& control() { return control_; }

 private:
  void check_memory();
  double charge_compute(double seconds, bool backward);
  void start_trace();
  void finish_trace(std::int64_t end);
  void make_hooks();
  void add(std::unique_ptr<StepHook> h);
  void after_step_hooks(StepState& s);
  TrainSummary summary();
  void check_same_recipe();
  Communicator& data_comm() { return device_comm_ ? *device_comm_ : comm_; }

  const RunSpec& spec_;
  const Recipe& r_;
  const TrainData& data_;
  const TrainOptions& opts_;
  const CheckpointInfo* resume_;
  Communicator& control_;                 // the control plane (world.h)
  ElasticGroup* elastic_;                 // elastic training (null: not elastic)
  DataShard shard_;                       // which shard of the data this rank reads
  std::unique_ptr<SimCommunicator> sim_;  // wraps the backend's communicator when simulating
  Communicator& comm_;                    // what the step loop talks to: sim_ or the backend's
  std::unique_ptr<Communicator> device_comm_;  // device = cuda: NCCL or staging over comm_
  std::unique_ptr<Tracer> tracer_;        // train.trace (the communicators point at it until the end)
  double modeled_step_s_ = 0;
  double planned_bytes_ = 0;  // trainer plan's bytes for this rank (check_memory)
  double after_reduce_s_ = 0;  // this step's after_reduce hooks
  std::unique_ptr<SyncStrategy> sync_;
  LrSchedule schedule_;
  RunLedger ledger_;
  Loop loop_;
  std::unique_ptr<GradsReady> ready_;  // made once the strategy has started
  Hooks hooks_;                        // in their order, the checkpointer's place aside
  std::optional<Checkpointer> checkpointer_;  // runs after hooks_[0, checkpoint_at_)
  std::size_t checkpoint_at_ = 0;
  std::uint64_t inter_at_start_ = 0;  // inter-tier bytes sent by start()
  std::int64_t next_agreement_ = 0;   // the next step after which the ranks agree on stopping
  double agreement_s_ = 0;            // the fastest agreement so far on this rank (0: none yet)
  double simulated_agreement_s_ = 0;  // with a [network]: an agreement there
  double simulated_step_s_ = 0;       // with modeled compute: the slowest rank's step there (else 0)
};

}  // namespace laconic
