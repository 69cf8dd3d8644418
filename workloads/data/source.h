// What the step loop needs from a dataset, whatever its kind: how many examples there are and
// how to fill a batch with some of them. Image classification and masked language modelling
// are the two kinds; both are sharded and ordered by ShardedSampler over example indices.
#pragma once

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

}  // namespace laconic
