// Random-k sparsification with error feedback (Stich et al. 2018, "Sparsified SGD with memory"):
// every rank adds its residual to the gradient, keeps k = ratio * n coordinates chosen at random,
// and puts the rest back in the residual. The coordinates come from a seed shared by all ranks
// (the step and the bucket), so no indices travel: the k values are averaged with one dense
// all-reduce of k floats, where top-k must exchange k (index, value) pairs per rank.
#pragma once

#include <laconic/laconic.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

struct RandomKOptions {
  double ratio = 0.01;  // kept coordinates per bucket
  bool error_feedback = true;
  bool operator==(const RandomKOptions&) const = default;
};

class RandomKReducer final : public laconic::Reducer {
 public:
  explicit RandomKReducer(RandomKOptions o) : o_(o) {}

  void prepare(std::span<const laconic::BucketLayout> buckets) override {
    residual_.resize(buckets.size());
    for (const auto& b : buckets) residual_[b.id].assign(b.size, 0.0f);
    std::size_t largest = 0;
    for (const auto& b : buckets) largest = std::max(largest, b.size);
    taken_.assign(largest, 0);
    picked_.reserve(largest);
    values_.reserve(largest);
  }

  void reduce(std::span<float> data, const laconic::BucketLayout& b, std::int64_t step,
              laconic::Communicator& comm) override {
    const std::size_t n = data.size();
    const auto k = static_cast<std::size_t>(std::clamp<double>(std::round(o_.ratio * n), 1.0, static_cast<double>(n)));
    std::vector<float>& e = residual_[b.id];
    if (o_.error_feedback)
      for (std::size_t i = 0; i < n; ++i) data[i] += e[i];
    // k distinct positions, the same on every rank (Floyd's sampling).
    const std::uint64_t key = laconic::rng::key({static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(b.id), 0x72616e64ULL});
    picked_.clear();
    for (std::size_t j = n - k; j < n; ++j) {
      std::size_t t = laconic::rng::below(key, j, j + 1);
      if (taken_[t]) t = j;
      taken_[t] = 1;
      picked_.push_back(t);
    }
    values_.resize(k);
    for (std::size_t i = 0; i < k; ++i) values_[i] = data[picked_[i]];
    comm.all_reduce(std::span<float>(values_), laconic::ReduceOp::avg);
    if (o_.error_feedback) std::copy(data.begin(), data.end(), e.begin());  // what was not sent stays
    std::fill(data.begin(), data.end(), 0.0f);
    for (std::size_t i = 0; i < k; ++i) {
      data[picked_[i]] = values_[i];
      if (o_.error_feedback) e[picked_[i]] = 0.0f;
      taken_[picked_[i]] = 0;
    }
    account({.calls = 1, .input_bytes = n * sizeof(float), .value_bytes = k * sizeof(float)});
  }

  std::string describe() const override {
    return "random-k " + std::to_string(100 * o_.ratio) + "%" + (o_.error_feedback ? " with error feedback" : "");
  }
  std::vector<laconic::StateTensor> state() override {  // checkpoints carry the residuals
    std::vector<laconic::StateTensor> s;
    for (std::size_t i = 0; i < residual_.size(); ++i)
      s.push_back({"randk.residual" + std::to_string(i), residual_[i], laconic::Device::cpu});
    return s;
  }

 private:
  RandomKOptions o_;
  std::vector<std::vector<float>> residual_;  // per bucket
  std::vector<char> taken_;
  std::vector<std::size_t> picked_;
  std::vector<float> values_;
};

// Registers "random_k" ([sync.random_k] ratio, error_feedback): a reducer, so also the gradient
// strategy of its name and a possible periodic strategy's reducer (sync.diloco.reducer =
// "random_k"). Its traits say nothing more: it runs on host buffers only, so a recipe with
// distributed.device = "cuda" is refused when it parses.
inline void register_random_k() {
  laconic::registry().add_reducer(
      "random_k",
      [](const laconic::Recipe& r, laconic::Device) -> std::unique_ptr<laconic::Reducer> {
        return std::make_unique<RandomKReducer>(r.section<RandomKOptions>("sync.random_k"));
      },
      laconic::Section<RandomKOptions>()
          .add<&RandomKOptions::ratio>("ratio", laconic::Bound{.lo = 0, .hi = 1, .lo_open = true})
          .add<&RandomKOptions::error_feedback>("error_feedback"));
}
