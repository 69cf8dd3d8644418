// A run's checkpoints (checkpoint.h is their file layer): when they are written, what one rank's
// shard holds (parameters, the optimizer's and the strategy's state, the data order, the run's
// ledger, every hook's state) and how a resume restores it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/train/checkpoint.h"
#include "framework/train/hooks.h"

namespace laconic {

class Checkpointer {
 public:
  // `hooks`: the session's hooks in their order (it does not hold the checkpointer); the first
  // `before` run before it, so a checkpoint of step N holds their state after step N.
  Checkpointer(Loop& loop, const Hooks& hooks, std::size_t before);

  // After every step: the checkpoint of checkpoint.every's multiples and of the last step.
  void after_step(const StepState& s);
  // Restores this rank's shard of `info` (model, optimizer, strategy, sampler, ledger, every
  // hook); returns the step to continue from.
  std::int64_t resume(const CheckpointInfo& info);
  // Every rank together: the checkpoint of `step` steps done (unless it was just written); its
  // directory.
  std::string write(std::int64_t step);

 private:
  void save_own(ShardWriter& w);
  void load_own(const ShardReader& r, std::int64_t step);
  std::vector<StateTensor> tensors();
  void stage(std::vector<StateTensor>& ts, bool download);

  Loop& loop_;
  const Hooks& hooks_;
  std::size_t before_;
  std::int64_t written_ = -1;  // the step of the last checkpoint written
  std::vector<float> host_stage_;  // host copies of device tensors
  std::int64_t sampler_[2] = {0, 0};
};

}  // namespace laconic
