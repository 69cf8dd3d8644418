// Data parallelism with the optimizer state sharded across the group: ZeRO stage 1 (Rajbhandari
// et al. 2020), sync.shard = "optimizer". An all-reduce is a reduce-scatter followed by an
// all-gather, and the optimizer sits between the two: each rank receives the average of its
// shard's gradients only, steps its shard (so it holds 1/N of the optimizer state), and the
// all-gather hands every rank the whole updated model. Bytes on the wire are the all-reduce's.
//
// Shards follow the gradient buckets (make_buckets: whole tensors, last layers first): each bucket
// is cut into N ranges (shard_range) and rank r holds range r of every bucket, so a bucket's
// reduce-scatter can start as soon as backward has produced it (sync.overlap) and a tensor may be
// cut between two ranks. The optimizer sees this rank's pieces as a store of their own
// (update_store()) and asks for whole-tensor norms through TensorSums. docs/sharding.md has the
// layout and what it costs.
//
// ZeRO stage 2 (sync.shard = "gradients") holds no whole gradient buffer either: backward writes
// each bucket into a staging slot (the store's GradWindow), reduce-scattered into the shard as
// soon as backward reports it final, and the slot is reused by a later bucket. A chain of layers
// needs a slot per bucket its layer writes, and one more while the last is reduced (overlapped);
// a bucket written early and late (a tied embedding) holds one across backward. Slots are made
// and grown at the first step only. Under gradient accumulation every micro-batch is
// reduce-scattered and added into the shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "collectives/subset_communicator.h"
#include "framework/sync/sync_strategy.h"
#include "optimizers/optimizer.h"

namespace laconic {

// Elements [begin, end) of the flat buffers.
struct ShardRange {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
};

// Rank r of n holds [r q, (r + 1) q) with q = size / n; the last rank also holds the rest
// (size % n elements, fewer than n).
ShardRange shard_range(std::size_t size, int rank, int n);

// The store of one rank's shard of `whole`: each view cut to the `ranges` (ascending; a view meets
// at most one: a cut tensor keeps its name, group and kind, shaped as one dimension), with buffers
// of its own, finalized on whole's device. tensor_of[v]: the view of `whole` that view v is (a
// piece of).
ParamStore make_shard_store(const ParamStore& whole, std::span<const ShardRange> ranges,
                            std::vector<std::size_t>& tensor_of);
inline ParamStore make_shard_store(const ParamStore& whole, ShardRange range, std::vector<std::size_t>& tensor_of) {
  return make_shard_store(whole, std::span<const ShardRange>(&range, 1), tensor_of);
}

// Position p of `n`'s shard of a flat store: its range of every bucket, its store (weights and
// gradients of its own), and what the buckets' collectives need. Sized once; nothing allocated
// per step.
struct Shard {
  struct Piece {
    std::size_t begin = 0, size = 0;  // the bucket: elements [begin, begin + size) of the whole
    std::size_t block = 0;            // size / n: the bucket's reduce-scatter blocks
    ShardRange mine;                  // this rank's elements of the bucket
    std::size_t offset = 0;           // where they sit in the shard's buffers
    std::vector<std::size_t> counts;  // the bucket's all-gather counts
  };
  std::vector<Piece> pieces;          // ascending in the whole buffer
  std::vector<std::size_t> tensor_of; // make_shard_store's
  ParamStore store;
  // Sizes position `position`'s shard of `whole` (of n) for buckets of bucket_mb MiB and takes
  // its weights. A rank's position is its rank, or across groups its place in the two levels.
  void cut(const ParamStore& whole, int position, int n, double bucket_mb);
  // The shard's weights = whole's pieces of them.
  void take(const ParamStore& whole);
  // Every rank's shard weights into every rank's whole model (over the n ranks of `comm`).
  void gather(Communicator& comm, ParamStore& whole) const;
};

// A described network's groups (Communicator::groups(): rank -> group) as rank lists, groups in
// the order of their first rank, their leader. Hierarchical and ShardLevels read them so.
struct GroupLayout {
  std::vector<std::vector<int>> members;  // every group's ranks, ascending
  std::size_t mine = 0;                   // this rank's group
  int place = 0;                          // this rank's index in it
  static GroupLayout of(const std::vector<int>& group_of, int rank);
  std::vector<int> leaders() const;       // each group's first rank
  // "" when every group has this rank's group's size, else which group differs.
  std::string uneven() const;
  // The rank at this rank's place in every group (groups of one size).
  std::vector<int> peers() const;
};

// A world-wide shard across the groups of a described network (Communicator::groups(), G groups
// of L ranks each): each bucket is reduce-scattered in two levels, inside each group into L
// parts, then between the ranks holding the same part in the other groups, and gathered back the
// same way, so the slow links carry (G - 1)/G of a part per rank where a ring over all ranks
// crosses them at every hop. Rank l of group g holds position l G + g, so both levels cut
// contiguous ranges. docs/sharding.md.
struct ShardLevels {
  std::vector<int> group, peers;  // this rank's group, and the ranks of its place in every group
  std::unique_ptr<SubsetCommunicator> intra, across;
  int place = 0, groups = 0;      // l and G
  int position() const { return place * groups + static_cast<int>(across->rank()); }
  // Two levels when `comm` spans two groups or more, of one size, two ranks each at least.
  static std::unique_ptr<ShardLevels> of(Communicator& comm);
};

class ShardedDataParallel final : public SyncStrategy, private TensorSums, private GradWindow {
 public:
  // overlap: each bucket's reduce-scatter starts on the communication thread once backward has
  // produced it (grads_ready), as DataParallel's all-reduce does. stage_grads: ZeRO-2 (above).
  explicit ShardedDataParallel(bool overlap = false, double bucket_mb = 25.0, bool stage_grads = false);
  ~ShardedDataParallel() override;
  void grads_ready(std::int64_t step, std::size_t from) override;
  // Reduce-scatters (or waits for) the averaged gradients of every bucket into this rank's shard.
  void after_backward(std::int64_t step) override;
  // All-gathers the stepped shards into every rank's whole model.
  bool after_update(std::int64_t step) override;
  ParamStore& update_store() override { return shard_.store; }
  // The whole model's parameters were changed by someone else (an outer step): the shard takes its
  // range of them again before the next optimizer step.
  void params_changed() { fresh_ = true; }
  TensorSums* tensor_sums() override { return this; }
  // Shard view v is a piece of the whole model's view shard_tensors()[v].
  const std::vector<std::size_t>& shard_tensors() const { return shard_.tensor_of; }
  std::uint64_t buffer_bytes() const override {
    return shard_.store.params().size_bytes() + shard_.store.grads().size_bytes();
  }
  // Staged, every micro-batch's gradients are reduced as backward makes them.
  bool reduces_each_micro_batch() const override { return stage_; }
  double take_backward_blocked_s() override { return std::exchange(blocked_s_, 0.0); }
  std::string describe() const override;
  double comm_seconds() const override { return comm_s_; }

 protected:
  void prepare(std::int64_t first_step) override;

 private:
  // TensorSums: partial sums all-gathered, then added in rank order on every rank (the same bits
  // everywhere; a tensor only one rank holds gets its sum exactly, as unsharded).
  std::size_t tensors() const override { return store().views().size(); }
  std::size_t tensor_of(std::size_t view) const override { return shard_.tensor_of[view]; }
  void sum(std::span<double> values) override;

  // GradWindow (staged): bucket i's gradients in the slot it holds while backward writes them.
  float* at(std::size_t offset, std::size_t n) override;
  std::size_t piece_end(std::size_t offset) const override;
  void zero() override;
  std::uint64_t bytes() const override;
  std::size_t piece_of(std::size_t offset) const;
  int acquire(std::size_t size);       // a free slot of at least `size` (zero.cpp says which)
  static void grow(DeviceArray<float>& a, std::size_t n);

  void reduce_piece(std::size_t i);    // bucket i's reduce-scatter (and its leftover's all-reduce)
  void gather();                       // every shard into every rank's whole model
  void size_levels();                  // across groups: counts and the part's buffer
  int position() const { return levels_ ? levels_->position() : comm().rank(); }
  void launch();                       // the next bucket in backward's order (the last first)
  void wait_launched();
  void release(std::size_t k);         // the k-th launched bucket's slot, its reduction done
  // Whether bucket i was launched this micro-batch (launches go from the last bucket down).
  bool launched(std::size_t i) const { return i + launched_ >= shard_.pieces.size(); }

  bool overlap_ = false;
  double bucket_mb_ = 25.0;
  bool stage_ = false;
  // Staged: each bucket's slot (-1: none); the slots (each as large as the largest bucket it
  // held) with a scratch block each for a later micro-batch's reduce-scatter (under gradient
  // accumulation); the free ones; how many launched buckets gave theirs back.
  std::vector<int> slot_of_;
  std::vector<DeviceArray<float>> slots_, scratch_;
  std::vector<int> free_;
  std::size_t released_ = 0;
  int micro_ = 0;                      // micro-batches reduced into the shard this step
  double blocked_s_ = 0;               // backward's thread in grads_ready() and slot waits
  bool in_ready_ = false;              // inside grads_ready()
  Shard shard_;                        // this rank's pieces: params stepped here, grads reduced here
  std::unique_ptr<ShardLevels> levels_;  // across groups: the two levels (else null)
  DeviceArray<float> part_;            // across groups: a bucket's part between the levels
  std::vector<std::vector<std::size_t>> across_counts_, intra_counts_;  // per bucket, its all-gathers
  std::vector<std::unique_ptr<Work>> work_;  // per bucket (overlap)
  std::size_t launched_ = 0;           // buckets launched this step
  std::vector<double> gathered_;       // sum(): every rank's partial sums
  bool fresh_ = true;                  // the shard's params still to be taken from the whole model
  double comm_s_ = 0;
};

}  // namespace laconic
