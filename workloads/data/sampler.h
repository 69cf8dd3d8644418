// Which examples each rank reads at each step: deterministic, sharded by (rank, world), resumable.
//
// Epoch e is a permutation of [0, n) drawn from rng::key({seed, e, kShuffle}), the same on every
// rank. The permutation is cut into global batches of world_size * micro_batch consecutive
// positions, and rank r takes positions [r * micro_batch, (r + 1) * micro_batch) of each. Hence
//  - the ranks' shards of a step are disjoint and together form the global batch;
//  - the global batches depend only on (seed, n, world_size * micro_batch): one worker with
//    micro_batch K * b reads exactly the union (indeed the rank-order concatenation) of what K
//    workers with micro_batch b read, step for step. The K-workers-equals-one-worker
//    equivalence tests rely on this.
// The last n % (world_size * micro_batch) positions of an epoch are dropped, so every step of
// every rank has a full micro-batch; the next epoch's permutation reshuffles them back in.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace laconic {

struct SamplerOptions {
  std::int64_t dataset_size = 0;
  std::uint64_t seed = 0;
  int world_size = 1;
  int rank = 0;
  int micro_batch = 1;  // examples per rank per step
};

class ShardedSampler {
 public:
  // Where the next step starts: the epoch and the offset into its permutation (a multiple of
  // the global batch when reached by next()). Independent of rank, so any rank's cursor resumes
  // every rank; it is also independent of how the global batch is split across ranks.
  struct Cursor {
    std::int64_t epoch = 0;
    std::int64_t position = 0;
    bool operator==(const Cursor&) const = default;
  };

  // Throws InputError when one global batch would exceed the dataset (no step could be formed).
  explicit ShardedSampler(const SamplerOptions& options);

  // This rank's micro_batch indices for the next step; advances. The span stays valid until the
  // next call to next() or seek().
  std::span<const std::int64_t> next();

  Cursor cursor() const;
  // Continues exactly as an uninterrupted sampler that had reached `c` would.
  void seek(const Cursor& c);

  std::int64_t steps_per_epoch() const { return options_.dataset_size / global_batch(); }
  std::int64_t global_batch() const {
    return static_cast<std::int64_t>(options_.world_size) * options_.micro_batch;
  }
  const SamplerOptions& options() const { return options_; }

 private:
  void shuffle(std::int64_t epoch);  // fills perm_ in place with epoch's permutation

  SamplerOptions options_;
  std::vector<std::int64_t> perm_;  // allocated once: reshuffling allocates nothing
  std::int64_t epoch_ = 0;          // the epoch perm_ holds
  std::int64_t position_ = 0;       // next global batch starts at perm_[position_]
};

}  // namespace laconic
