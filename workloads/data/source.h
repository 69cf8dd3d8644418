// What the step loop needs from a dataset, whatever its kind: how many examples there are and
// how to fill a batch with some of them. Image classification and masked language modelling
// are the two kinds; both are sharded and ordered by ShardedSampler over example indices.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/batch.h"
#include "workloads/data/fashion_mnist.h"
#include "workloads/data/mlm.h"

namespace laconic {

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual std::int64_t size() const = 0;
  // Fills `out` with the examples at `indices`. `key` seeds per-batch randomness (MLM masking:
  // the trainer passes rng::key({seed, rank, step, kData}); evaluation a fixed key per batch).
  virtual void fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t key) const = 0;
};

class ImageSource final : public DataSource {
 public:
  explicit ImageSource(std::shared_ptr<const ImageDataset> d) : d_(std::move(d)) {}
  std::int64_t size() const override { return d_->size(); }
  void fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t key) const override;
  const ImageDataset& dataset() const { return *d_; }

 private:
  std::shared_ptr<const ImageDataset> d_;
};

class MlmSource final : public DataSource {
 public:
  MlmSource(std::shared_ptr<const TokenDataset> d, MlmOptions opts) : d_(std::move(d)), opts_(opts) {}
  std::int64_t size() const override { return d_->size(); }
  void fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t key) const override;
  const TokenDataset& dataset() const { return *d_; }

 private:
  std::shared_ptr<const TokenDataset> d_;
  MlmOptions opts_;
};

// Which held-out examples a run evaluates on (data.eval_split): all of them, or one of two halves,
// so that tuning chooses on `validation` and the comparison reports `test`, which no choice saw.
// The halves are contiguous blocks (the first half validation), so documents held out whole stay
// mostly on one side; test gets the middle example of an odd count.
enum class EvalSplit { all, validation, test };
inline constexpr std::array kEvalSplitNames{"all", "validation", "test"};
constexpr std::span<const char* const> names(EvalSplit) { return kEvalSplitNames; }

// The examples [begin, end) of another source, renumbered from 0.
class RangeSource final : public DataSource {
 public:
  RangeSource(std::shared_ptr<const DataSource> inner, std::int64_t begin, std::int64_t end);
  std::int64_t size() const override { return end_ - begin_; }
  void fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t key) const override;

 private:
  std::shared_ptr<const DataSource> inner_;
  std::int64_t begin_, end_;
};

// `eval` itself for EvalSplit::all, else its half (null stays null).
std::shared_ptr<const DataSource> eval_split(std::shared_ptr<const DataSource> eval, EvalSplit split);

}  // namespace laconic
