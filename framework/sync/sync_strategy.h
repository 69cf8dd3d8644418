// A SyncStrategy decides when and what the ranks communicate. The step loop calls it at fixed
// points; a strategy owns its state (reducers, counters) and sees the flat buffers.
//
//   start()          once, before the first step: make every replica start from rank 0's
//                    parameters (broadcast), so different local initialisations cannot matter.
//   after_backward() gradients of the step are complete: e.g. average them (data parallel).
//   after_update()   the optimizer has stepped: e.g. average parameters every H steps (local SGD).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "compression/reducer.h"
#include "framework/core/params.h"

namespace laconic {

class SyncStrategy {
 public:
  virtual ~SyncStrategy() = default;
  virtual void start(ParamStore& store, Communicator& comm);
  virtual void after_backward(ParamStore& store, Communicator& comm, std::int64_t step) = 0;
  virtual void after_update(ParamStore& store, Communicator& comm, std::int64_t step) {}
  virtual std::string describe() const = 0;
  // What the strategy's reducers were handed and what they put on the wire (compression ratio).
  virtual ReducerStats reducer_stats() const { return {}; }
};

struct DataParallelOptions {
  // Gradients are reduced in buckets of whole tensors of about this many MiB (a bucket is closed
  // once it reaches the cap; one larger tensor makes a bucket of its own), last layers first.
  double bucket_mb = 25.0;
};

// The buckets of `store` for a cap of bucket_mb MiB: whole tensors, filled from the last tensor
// backwards (the order backward produces gradients), bucket 0 holding the last tensors. Each
// tensor is described as the (shape[0], numel / shape[0]) matrix PowerSGD compresses.
std::vector<BucketLayout> make_buckets(const ParamStore& store, double bucket_mb);

// Averages gradients every step through a Reducer (dense fp32 by default): synchronous
// data parallelism. With plain averaging, K ranks on micro-batch b step exactly like one rank on
// the union batch K*b (up to float summation order).
class DataParallel final : public SyncStrategy {
 public:
  DataParallel(DataParallelOptions opts, std::unique_ptr<Reducer> reducer);
  void start(ParamStore& store, Communicator& comm) override;
  void after_backward(ParamStore& store, Communicator& comm, std::int64_t step) override;
  std::string describe() const override;
  ReducerStats reducer_stats() const override { return reducer_->stats(); }

 private:
  DataParallelOptions opts_;
  std::unique_ptr<Reducer> reducer_;
  std::vector<BucketLayout> buckets_;
};

}  // namespace laconic
