// A SyncStrategy decides when and what the ranks communicate. The step loop calls it at fixed
// points; a strategy owns its state (reducers, counters) and sees the flat buffers.
//
//   start()          once, before the first step: make every replica start from rank 0's
//                    parameters (broadcast), so different local initialisations cannot matter;
//                    then bind() to the store and communicator of the run. Every later call
//                    works on those (a strategy never sees another store or communicator).
//   grads_ready()    during the last backward of a step: gradients at [from, size) are final
//                    (already averaged over micro-batches), so reducing them may start now.
//                    During every backward for a strategy that reduces_each_micro_batch().
//   step_computed()  forward and backward are done, with how long they took.
//   after_backward() gradients of the step are complete: e.g. finish averaging them.
//   after_update()   the optimizer has stepped: e.g. average parameters every H steps (local SGD);
//                    returns true when it changed the parameters (a wrapper spreading them to
//                    ranks outside the strategy's communicator must then do so).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "compression/reducer.h"
#include "core/params.h"
#include "optimizers/optimizer.h"

namespace laconic {

class SyncStrategy {
 public:
  virtual ~SyncStrategy() = default;
  // Broadcasts rank 0's parameters, then bind(). `first_step`: where the run starts (> 0 when it
  // resumes from a checkpoint, whose state is loaded into state() right after).
  void start(ParamStore& store, Communicator& comm, std::int64_t first_step = 0);
  // Binds to `store` and `comm` and sizes the state, without communicating: for replicas that
  // are identical already (a phase taking over, a group leader's strategy inside hierarchical).
  void bind(ParamStore& store, Communicator& comm, std::int64_t first_step = 0);
  virtual void grads_ready(std::int64_t /*step*/, std::size_t /*from*/) {}
  // Whether grads_ready() hears of every micro-batch's backward, each scaled by 1 / grad_accum
  // and ended with grads_ready(step, 0): a strategy holding no whole gradient buffer (ZeRO-2)
  // reduces each one, as backward makes it.
  virtual bool reduces_each_micro_batch() const { return false; }
  // Seconds grads_ready() held the calling thread (backward's) since the last call: reductions
  // run in line, waits for them. The step loop counts them as communication, not compute.
  virtual double take_backward_blocked_s() { return 0; }
  virtual void after_backward(std::int64_t step) = 0;
  virtual bool after_update(std::int64_t /*step*/) { return false; }
  // Whether after_backward / after_update communicate at `step`: known in advance on every rank,
  // so that a composite strategy can tell ranks outside the inner communicator what to expect.
  virtual bool reduces_gradients(std::int64_t /*step*/) const { return true; }
  virtual bool averages_params(std::int64_t /*step*/) const { return false; }
  // Whether every replica holds the same parameters after `step` (replica checksums compare only
  // then: between periodic strategies' syncs replicas differ on purpose).
  virtual bool replicas_agree_after(std::int64_t /*step*/) const { return true; }
  // A schedule of strategies switches at these: begin() when this strategy takes over at `step`
  // (replicas are identical then), finish() after the last step it ran, `step` (it must leave
  // identical replicas: periodic strategies average one last time).
  virtual void begin(std::int64_t /*step*/) {}
  virtual void finish(std::int64_t /*step*/) {}
  // The run ends: finishes communication still in flight (streaming DiLoCo merges a fragment
  // whose merge was due after the last step), so nothing runs after the step loop and the trace
  // holds every operation it issued.
  virtual void drain() {}
  // Whether drain() after the run's last step `last_step` changes the parameters: known in advance
  // on every rank, as averages_params, so that a composite can spread them to ranks outside.
  virtual bool averages_at_drain(std::int64_t /*last_step*/) const { return false; }
  // The optimizer's state buffers (Optimizer::state(), sized by its prepare()), handed over once
  // after start(), for a strategy that synchronises them (DES-LOC averages Adam's moments). The
  // spans stay valid for the run.
  virtual void set_optimizer_state(std::span<const StateTensor> /*state*/) {}
  // Whether this rank takes step `step` at all: false, the step loop skips its forward, backward
  // and optimizer step (its batch of the data order too) and calls the rest as usual, the
  // strategy's after_update included. Asynchronous replicas slower than the fastest compute on
  // a share of the steps only (async_diloco.h). A strategy that can answer false has the
  // `idles` trait (framework/recipe/components.h).
  virtual bool computes(std::int64_t /*step*/) const { return true; }
  // Whether every rank meets every other at `step` anyway (known in advance on every rank): the
  // trainer's stop agreement, a world all-reduce, runs only at such steps, so it never holds a
  // fast replica back within its round. Asynchronous replicas meet at arrivals only.
  virtual bool ranks_meet(std::int64_t /*step*/) const { return true; }
  // This rank's forward and backward of `step` took `seconds` (measured; about 0 for a step it
  // skipped): asynchronous replicas time their speeds with it.
  virtual void step_computed(std::int64_t /*step*/, double /*seconds*/) {}
  virtual std::string describe() const = 0;
  // What the strategy's reducers were handed and what they put on the wire (compression ratio).
  virtual ReducerStats reducer_stats() const { return {}; }
  // Seconds spent reducing so far, whichever thread ran it (with overlap, part of it is hidden
  // behind backward: the step loop measures what it waited for, the exposed part).
  virtual double comm_seconds() const = 0;
  // Every state buffer (outer momentum, anchors, reducers' residuals), for checkpoints.
  virtual std::vector<StateTensor> state() { return {}; }
  // The store the optimizer steps: the whole model's, or this rank's shard of it (sync.shard,
  // zero.h), whose per-tensor norms then come whole through tensor_sums().
  virtual ParamStore& update_store() { return store(); }
  virtual TensorSums* tensor_sums() { return nullptr; }
  // Bytes of working buffers held beside state() (not checkpointed: rebuilt from the model).
  virtual std::uint64_t buffer_bytes() const { return 0; }

 protected:
  // Sizes the state for store() (called by bind(); no communication through comm()).
  virtual void prepare(std::int64_t /*first_step*/) {}
  ParamStore& store() const { return *store_; }
  Communicator& comm() const { return *comm_; }
  bool bound() const { return store_ != nullptr; }

 private:
  ParamStore* store_ = nullptr;
  Communicator* comm_ = nullptr;
};

struct DataParallelOptions {
  // Gradients are reduced in buckets of whole tensors of about this many MiB (a bucket is closed
  // once it reaches the cap; one larger tensor makes a bucket of its own), last layers first.
  double bucket_mb = 25.0;
  // Start each bucket's reduction on the communication thread as soon as backward has produced
  // it (grads_ready), instead of all of them after backward.
  bool overlap = true;
  // Momentum correction (Lin et al. 2018, DGC): each rank folds its gradient into a local
  // velocity u = momentum * u + g and the reducer averages u, not g; the optimizer then runs
  // without momentum. Exact averaging gives momentum SGD (u is linear in g); under lossy
  // compression with error feedback, the compression error is not amplified by a momentum applied
  // after it. 0 = off (reduce the gradients).
  double momentum = 0.0;
};

// The buckets of `store` for a cap of bucket_mb MiB: whole tensors, filled from the last tensor
// backwards (the order backward produces gradients), bucket 0 holding the last tensors. Each
// tensor is described as the (shape[0], numel / shape[0]) matrix PowerSGD compresses.
std::vector<BucketLayout> make_buckets(const ParamStore& store, double bucket_mb);

// Averages gradients every step through a Reducer (dense fp32 by default): synchronous
// data parallelism. With plain averaging, K ranks on micro-batch b step exactly like one rank on
// the union batch K*b (up to float summation order). Buckets are reduced in the same order on
// every rank (bucket 0 first), overlapped or not, so results do not depend on timing.
class DataParallel final : public SyncStrategy {
 public:
  DataParallel(DataParallelOptions opts, std::unique_ptr<Reducer> reducer);
  ~DataParallel() override;
  void grads_ready(std::int64_t step, std::size_t from) override;
  void after_backward(std::int64_t step) override;
  std::string describe() const override;
  ReducerStats reducer_stats() const override { return reducer_->stats(); }
  double comm_seconds() const override { return comm_s_; }
  std::vector<StateTensor> state() override;
  const std::vector<BucketLayout>& buckets() const { return buckets_; }

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  void launch(std::int64_t step);  // the next bucket
  void reduce_bucket(std::size_t i);
  void wait_launched();

  DataParallelOptions opts_;
  std::unique_ptr<Reducer> reducer_;
  std::vector<BucketLayout> buckets_;
  std::vector<std::unique_ptr<Work>> work_;  // one per bucket, reused every step
  DeviceArray<float> velocity_;              // momentum correction: laid out like the gradients
  std::size_t launched_ = 0;                 // buckets started this step
  // The step the queued reductions belong to (set at its first bucket, read on the communication thread).
  std::int64_t step_ = 0;
  double comm_s_ = 0;  // written by whichever thread reduces; read after the waits
};

}  // namespace laconic
