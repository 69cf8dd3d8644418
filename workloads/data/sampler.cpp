#include "workloads/data/sampler.h"

#include <numeric>
#include <utility>

#include "core/check.h"
#include "core/rng.h"

namespace laconic {

ShardedSampler::ShardedSampler(const SamplerOptions& options) : options_(options) {
  LC_CHECK(options.dataset_size > 0, "dataset_size=", options.dataset_size);
  LC_CHECK(options.world_size >= 1, "world_size=", options.world_size);
  LC_CHECK(options.rank >= 0 && options.rank < options.world_size, "rank=", options.rank,
           " world_size=", options.world_size);
  LC_CHECK(options.micro_batch >= 1, "micro_batch=", options.micro_batch);
  if (global_batch() > options.dataset_size)
    LC_INPUT_ERROR("the global batch (world_size ", options.world_size, " x micro_batch ", options.micro_batch,
                   " = ", global_batch(), ") exceeds the dataset's ", options.dataset_size,
                   " examples; lower [train] micro_batch or [distributed] world_size");
  perm_.resize(static_cast<std::size_t>(options.dataset_size));
  shuffle(0);
}

// Fisher-Yates (Knuth, TAOCP vol. 2, 3.4.2, algorithm P), drawing the swap partner for position i
// from counter i, so the permutation is a pure function of (seed, epoch, n).
void ShardedSampler::shuffle(std::int64_t epoch) {
  std::iota(perm_.begin(), perm_.end(), std::int64_t{0});
  const std::uint64_t key = rng::key({options_.seed, static_cast<std::uint64_t>(epoch), rng::kShuffle});
  for (std::size_t i = perm_.size() - 1; i > 0; --i) {
    const auto j = static_cast<std::size_t>(rng::below(key, i, i + 1));
    std::swap(perm_[i], perm_[j]);
  }
  epoch_ = epoch;
}

std::span<const std::int64_t> ShardedSampler::next() {
  // Roll over lazily, here rather than after the last step, so the span handed out by the
  // previous call stayed valid until now.
  if (position_ + global_batch() > options_.dataset_size) {
    shuffle(epoch_ + 1);
    position_ = 0;
  }
  const std::int64_t begin = position_ + static_cast<std::int64_t>(options_.rank) * options_.micro_batch;
  position_ += global_batch();
  return {perm_.data() + begin, static_cast<std::size_t>(options_.micro_batch)};
}

ShardedSampler::Cursor ShardedSampler::cursor() const {
  // Normalised: the end of an epoch is reported as the start of the next one.
  if (position_ + global_batch() > options_.dataset_size) return {epoch_ + 1, 0};
  return {epoch_, position_};
}

void ShardedSampler::seek(const Cursor& c) {
  LC_CHECK(c.epoch >= 0 && c.position >= 0 && c.position <= options_.dataset_size, "epoch=", c.epoch,
           " position=", c.position, " dataset_size=", options_.dataset_size);
  if (c.epoch != epoch_) shuffle(c.epoch);
  position_ = c.position;
}

}  // namespace laconic
