// A run whose model, data and optimizer live outside Laconic: laconic.torch's Sync (python/) drives
// it from a PyTorch training loop. The model's parameters and gradients live in one flat
// ParamStore laid out from the caller's tensors (the caller makes its own tensors views of it),
// and each rank is one process of a ProcessWorld (world.h: MPI, gloo, or alone). Everything else
// is the trainer's: the recipe's [sync], [distributed], [network], [checkpoint], [guards] and
// [train] logging settings, the Session (session.h) with its hooks, trace and checkpoints, and
// the run directory's files, so that `trainer simulate` and `trainer compare` read it unchanged.
//
// Per optimizer step the caller runs forward and backward (calling grads_ready() as gradients
// become final, from the end of the store backwards), then reduce(); when it returns true, its
// own optimizer step between optimizer_begin() and updated(); then end_step(), and finish() once
// end_step() says to stop or the steps are done.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "framework/train/lifecycle.h"
#include "framework/train/options.h"
#include "framework/train/session.h"
#include "framework/train/stop.h"
#include "framework/train/world.h"

namespace laconic {

struct ExternalTensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

// The caller's model as Laconic sees it: the flat store, no forward or backward of its own.
class ExternalModel final : public Model {
 public:
  // `flops_per_example`: training FLOPs per example (0: 6 x parameters, a dense model's estimate).
  ExternalModel(const std::vector<ExternalTensor>& tensors, double flops_per_example, std::string kind);
  ParamStore& params() override { return store_; }
  void init(std::uint64_t) override {}  // the caller's values are copied in
  ForwardResult forward(const Batch&, const ForwardOptions&) override;
  void backward() override;
  double flops_per_example() const override { return flops_; }
  std::string describe() const override;

 private:
  ParamStore store_;
  double flops_;
  std::string kind_;
};

struct ExternalOptions {
  TrainOptions train;       // run_dir, log, resume, stop_on_signals, evaluate, hooks
  double flops_per_example = 0;
  std::string kind = "torch model";  // how describe() names the model
  // Where the caller's parameters live (cuda: the store moves there, the run uses the device path:
  // NCCL or staging communicators, the strategies' device kernels), and which GPU.
  Device device = Device::cpu;
  int cuda_index = 0;
  // Where gloo ranks meet (null: LACONIC_STORE): torch's rendezvous store under torchrun.
  std::shared_ptr<KeyStore> store;
};

class ExternalRun {
 public:
  // Checks the recipe against the model and the world, joins the world (the other ranks), writes
  // the run directory's start (rank 0), finds the checkpoint to resume. The store holds zeros:
  // the caller copies its initial values in, then calls start().
  ExternalRun(const Recipe& recipe, const std::vector<ExternalTensor>& tensors, ExternalOptions opts);
  ~ExternalRun();

  // Rank 0's parameters to every rank, the hooks, a resume's state (parameters included).
  // Returns the first step.
  std::int64_t start();
  ParamStore& store() { return model_.params(); }
  int cuda_index() const { return opts_.cuda_index; }  // the store's GPU when it is on cuda
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  DataShard shard() const { return shard_; }
  const RunSpec& spec() const { return spec_; }
  std::string resumed_from() const { return resume_ ? resume_->dir : ""; }

  void begin_step(std::int64_t step);
  void grads_ready(std::size_t from) { session_->ready().grads_ready(from); }
  // This rank's loss: the sum over its examples and how many; `lr`: the caller's optimizer's
  // learning rate for this step (what metrics report).
  bool reduce(double loss_sum, double loss_count, double lr);
  void optimizer_begin();
  void updated();
  // Whether to stop the run after this step (false: go on).
  Stop end_step();
  // After `steps` steps: the last checkpoint, summary.json and the replay (rank 0). Once; then
  // the world is left (MPI finalised), and only store() remains (the caller's tensors view it).
  TrainSummary finish(Stop stop);
  bool finished() const { return finished_; }

 private:
  ExternalOptions opts_;
  ExternalModel model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ProcessWorld> world_;  // before the spec: the backend is the world's
  RunSpec spec_;
  TrainData data_;
  std::optional<RunLifecycle> life_;
  std::optional<CheckpointInfo> resume_;  // as the ranks agreed
  std::optional<Session> session_;
  StepState state_;
  Stopwatch clock_;
  bool in_step_ = false, finished_ = false;
  int rank_ = 0, world_size_ = 1;
  DataShard shard_;
};

}  // namespace laconic
