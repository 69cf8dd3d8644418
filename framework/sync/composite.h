// Strategies made of strategies: hierarchical composition over the network's groups, and a
// schedule of strategies over the steps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/subset_communicator.h"
#include "framework/sync/sync_strategy.h"
#include "framework/sync/zero.h"

namespace laconic {

// Dense inside a group, `inter` between groups. The ranks of one group (a node or a datacenter:
// comm.groups(), set by the simulated network) average their gradients with a dense fp32
// all-reduce every step, so they hold identical replicas; the group's leader (its first rank)
// then runs `inter` with the other leaders (compressed gradients, local SGD, DiLoCo, ...), and
// broadcasts what changed to its group. So only leaders cross the slow link, each with one
// payload, and the other ranks' traffic stays inside their group.
//
// shards.inner (sync.shard = "optimizer" or "gradients" with a periodic `inter`): inside each
// group the gradients are reduce-scattered and the optimizer steps this rank's shard (ZeRO-1 or
// ZeRO-2 on the group, ShardedDataParallel), and the group all-gathers the model after each step.
// shards.outer ("optimizer" or "outer"), when `inter` is PeriodicAveraging (local SGD, DiLoCo,
// streaming DiLoCo, SparseLoCo): every rank runs it on its shard (ZeRO's, or one of its own taken
// from the whole model before each step) with the ranks holding the same shard in the other
// groups, so theta_global, the outer momentum and error feedback are 1/N per rank and each rank's
// link carries 1/N of an outer sync; an all-gather in the group then spreads the outer step. Any
// other `inter` runs on the leaders' whole parameters. docs/sharding.md.
class PeriodicAveraging;

// What Hierarchical shards (docs/sharding.md).
struct HierarchicalShards {
  bool inner = false;       // the inner optimizer's state, ZeRO inside each group
  bool outer = false;       // a periodic strategy's outer state across each group's ranks
  double bucket_mb = 25.0;  // the shards' buckets (zero.h)
  bool gradients = false;   // with inner: the gradients too, ZeRO-2
  bool overlap = false;     // with inner: reduce-scatter each bucket as backward makes it (sync.overlap)
};

class Hierarchical final : public SyncStrategy {
 public:
  explicit Hierarchical(std::unique_ptr<SyncStrategy> inter, HierarchicalShards shards = {});
  ~Hierarchical() override;
  void after_backward(std::int64_t step) override;
  // ZeRO-2 inside the groups reduces each bucket as backward makes it.
  void grads_ready(std::int64_t step, std::size_t from) override;
  bool reduces_each_micro_batch() const override { return shards_.inner && shards_.gradients; }
  double take_backward_blocked_s() override { return zero_ ? zero_->take_backward_blocked_s() : 0.0; }
  bool after_update(std::int64_t step) override;
  bool reduces_gradients(std::int64_t step) const override { return true; }
  bool averages_params(std::int64_t step) const override { return inter_->averages_params(step); }
  bool replicas_agree_after(std::int64_t step) const override { return inter_->replicas_agree_after(step); }
  std::string describe() const override;
  ReducerStats reducer_stats() const override { return inter_->reducer_stats(); }
  double comm_seconds() const override { return comm_s_; }
  std::vector<StateTensor> state() override { return inter_bound() ? inter_->state() : std::vector<StateTensor>{}; }
  ParamStore& update_store() override { return zero_ ? zero_->update_store() : store(); }
  TensorSums* tensor_sums() override { return zero_ ? zero_->tensor_sums() : nullptr; }
  // ZeRO's shard, or the outer sync's own (its weights and unused gradients), and inter_'s.
  std::uint64_t buffer_bytes() const override {
    return (zero_ ? zero_->buffer_bytes() : outer_shard_.store.params().size_bytes() + outer_shard_.store.grads().size_bytes()) +
           (inter_bound() ? inter_->buffer_bytes() : 0);
  }
  // A periodic `inter` merges the fragments still in flight: then the group's other ranks take
  // the result (the leader's broadcast, or the shards' all-gather).
  void drain() override;
  bool averages_at_drain(std::int64_t last_step) const override { return inter_->averages_at_drain(last_step); }
  // Whether the outer state is sharded (every rank runs `inter` on its shard).
  bool shards_outer() const { return shards_.outer; }

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  std::unique_ptr<SyncStrategy> inter_;
  HierarchicalShards shards_;
  bool inter_bound() const { return across_ != nullptr; }
  // The store the sharded outer sync runs on (ZeRO's shard, or outer_shard_).
  ParamStore& outer_store() { return zero_ ? zero_->update_store() : outer_shard_.store; }
  // The parameters an outer step changed, to the group's other ranks: the leader's broadcast, or
  // the shards' all-gather.
  void spread();
  // Binds inter_ to this rank's shard and its peers (shards_.outer).
  void bind_sharded(std::int64_t first_step);
  bool after_update_sharded(std::int64_t step);

  std::unique_ptr<ShardedDataParallel> zero_;  // shards_.inner: ZeRO inside the group
  Shard outer_shard_;                          // shards_.outer without zero_: the shard inter_ runs on
  std::int64_t last_step_ = -1;                  // of after_update
  GroupLayout groups_;                         // the network's groups, as rank lists
  std::vector<int> group_members_, leaders_, shard_peers_;  // the subsets' member lists (they keep spans)
  // across_: the communicator inter_ runs on: the leaders', or this rank's shard peers'.
  std::unique_ptr<SubsetCommunicator> intra_, across_;
  double comm_s_ = 0;
};

// A schedule: phase i runs strategy i for its steps (e.g. dense all-reduce for 500 steps, then
// PowerSGD). A phase is bound (its state sized) when it takes over: the one running at the first
// step at start, the others at their boundary, where the outgoing strategy finishes (periodic
// ones average the replicas one last time) and the incoming one begins from the current
// parameters. Only the first start broadcasts.
class Phased final : public SyncStrategy {
 public:
  struct Phase {
    std::int64_t first_step = 0;
    std::unique_ptr<SyncStrategy> strategy;
  };
  explicit Phased(std::vector<Phase> phases);  // first_step ascending, the first 0
  void grads_ready(std::int64_t step, std::size_t from) override;
  void after_backward(std::int64_t step) override;
  bool after_update(std::int64_t step) override;
  bool reduces_gradients(std::int64_t step) const override { return at(step).reduces_gradients(step); }
  bool averages_params(std::int64_t step) const override;
  bool replicas_agree_after(std::int64_t step) const override;
  std::string describe() const override;
  ReducerStats reducer_stats() const override;
  double comm_seconds() const override;
  void drain() override;
  bool averages_at_drain(std::int64_t last_step) const override { return at(last_step).averages_at_drain(last_step); }
  void set_optimizer_state(std::span<const StateTensor> state) override {
    for (Phase& p : phases_) p.strategy->set_optimizer_state(state);
  }
  // The state of the phases bound so far ("phase<i>.<name>").
  std::vector<StateTensor> state() override;

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  std::size_t index_at(std::int64_t step) const;
  const SyncStrategy& at(std::int64_t step) const { return *phases_[index_at(step)].strategy; }
  SyncStrategy& at(std::int64_t step) { return *phases_[index_at(step)].strategy; }
  void take_over(std::int64_t step);  // binds the phase running at `step` unless it is

  std::vector<Phase> phases_;
  std::vector<bool> bound_;  // per phase
};

}  // namespace laconic
