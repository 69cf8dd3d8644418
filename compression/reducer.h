// A Reducer averages one flat buffer across the ranks of a communicator, possibly lossily, and
// owns whatever state that needs (error-feedback residuals, PowerSGD's Q, ...). Sync strategies
// call it on gradient buckets or on parameter / pseudo-gradient buffers.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "collectives/communicator.h"

namespace laconic {

struct ReducerStats {
  std::uint64_t calls = 0;
  std::uint64_t input_bytes = 0;    // fp32 bytes handed to reduce()
  std::uint64_t payload_bytes = 0;  // bytes of the encoded representation this rank contributed
};

class Reducer {
 public:
  virtual ~Reducer() = default;
  // In place: on return every rank holds the (approximate) average of all ranks' `data`.
  virtual void reduce(std::span<float> data, Communicator& comm) = 0;
  virtual std::string describe() const = 0;
  const ReducerStats& stats() const { return stats_; }

 protected:
  void account(std::uint64_t input_bytes, std::uint64_t payload_bytes) {
    ++stats_.calls;
    stats_.input_bytes += input_bytes;
    stats_.payload_bytes += payload_bytes;
  }

 private:
  ReducerStats stats_;
};

// Exact averaging with an fp32 all-reduce: the baseline every compressed reducer is measured
// against (compression ratio = input_bytes / payload_bytes = 1).
class DenseReducer final : public Reducer {
 public:
  void reduce(std::span<float> data, Communicator& comm) override;
  std::string describe() const override { return "dense fp32 all-reduce"; }
};

}  // namespace laconic
