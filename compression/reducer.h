// A Reducer averages one flat buffer across the ranks of a communicator, possibly lossily, and
// owns whatever state that needs (error-feedback residuals, PowerSGD's Q, ...). Sync strategies
// call it on gradient buckets (data parallel) or on parameter / pseudo-gradient buffers.
//
// Life cycle: prepare(buckets) once, with the layout of every bucket the reducer will see; it
// sizes all state there, so reduce() allocates nothing. Then reduce(data, bucket, step, comm) for
// each bucket, every step, in the same order on every rank. `step` is the optimizer step (from 0);
// reducers with a dense warm-up (PowerSGD's start_iter, 1-bit's warm-up) compare against it,
// so a resumed run behaves like an uninterrupted one without a counter to save.
//
// Each reducer's encode / decode are free functions in its header, pure and tested without
// communication; reduce() composes them with collectives.
//
// Device: a reducer is built for one device (its options' `device`, cpu by default). On cuda all
// its state (residuals, Q, scratch, wire buffers) is device memory, sized in prepare(); reduce()
// takes DEVICE data, runs the CUDA versions of the free functions (compression/cuda/, the same
// results: bitwise where the CPU does integer or bit work, to float rounding elsewhere) and hands
// the communicator device buffers, so the communicator's memory() must be cuda (NCCL or a staging
// wrapper); a mismatch is an error. state() then returns device spans (StateTensor::device).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "core/device.h"
#include "core/state.h"

namespace laconic {

// One tensor inside a bucket, viewed as a rows x cols matrix the way PowerSGD does:
// (shape[0], numel / shape[0]). A 1-D tensor of n elements is n x 1.
struct TensorShape {
  std::size_t offset = 0;  // elements from the start of the bucket
  std::size_t rows = 0;
  std::size_t cols = 1;
  std::size_t numel() const { return rows * cols; }
};

// A contiguous slice [begin, begin + size) of a flat buffer made of whole tensors.
struct BucketLayout {
  int id = 0;              // 0..buckets-1, stable across steps: reducers keep state per id
  std::size_t begin = 0;   // elements into the flat buffer
  std::size_t size = 0;    // elements
  std::vector<TensorShape> tensors;  // in buffer order, covering [0, size) exactly
};

// One bucket of n elements holding a single 1-D tensor: for callers without a tensor layout.
BucketLayout flat_bucket(std::size_t n, int id = 0);

// How the two-phase compressed all-reduces (1-bit, the block codecs) split a bucket of n elements
// over `world` ranks: N chunks of `chunk` elements, the smallest multiple of 8 with N * chunk >= n
// (so padded() - n < 8N, and a chunk's packed codes start on a byte for any code width), chunk j
// starting at j * chunk and owned by rank j. The last chunks may be partly or wholly padding.
struct RankChunks {
  RankChunks(std::size_t n, int world);
  std::size_t n;
  std::size_t world;
  std::size_t chunk;
  std::size_t padded() const { return chunk * world; }
  std::size_t begin(std::size_t j) const { return j * chunk; }
  // Elements of chunk j that lie inside the bucket (chunk for all but the last non-empty ones).
  std::size_t real(std::size_t j) const;
};

// Cumulative counts. The payload is what this rank's encoding contributes to the collectives
// (before any fan-out by the algorithm): dense values, top-k values and indices, packed sign
// bits and their scales, PowerSGD's P and Q. compression ratio = input_bytes / payload_bytes().
// The bytes that actually crossed the wire are the communicator's counters.
struct ReducerStats {
  std::uint64_t calls = 0;
  std::uint64_t input_bytes = 0;  // fp32 bytes handed to reduce()
  std::uint64_t value_bytes = 0;  // encoded values (or packed bits)
  std::uint64_t index_bytes = 0;  // positions of sparse values
  std::uint64_t scale_bytes = 0;  // per-chunk scales
  std::uint64_t meta_bytes = 0;   // counts, headers
  std::uint64_t payload_bytes() const { return value_bytes + index_bytes + scale_bytes + meta_bytes; }
  double compression_ratio() const {
    return payload_bytes() ? static_cast<double>(input_bytes) / static_cast<double>(payload_bytes()) : 1.0;
  }
  ReducerStats& operator+=(const ReducerStats& o);
  ReducerStats& operator-=(const ReducerStats& o);
};

// Every count of ReducerStats, listed once: what += and -= and a checkpoint's entry walk, in this order.
inline constexpr std::array<std::uint64_t ReducerStats::*, 6> kReducerCounts = {
    &ReducerStats::calls,       &ReducerStats::input_bytes, &ReducerStats::value_bytes,
    &ReducerStats::index_bytes, &ReducerStats::scale_bytes, &ReducerStats::meta_bytes};

// Throws unless this build can run a reducer on `device` (cuda needs LACONIC_CUDA).
void check_reducer_device(Device device, const char* reducer);
// Throws unless `comm` takes buffers where the reducer keeps them (comm.memory() == device).
void check_comm_memory(Device device, const Communicator& comm, const char* reducer);

// The CUDA path of `reducer` in a build without CUDA: a device store cannot exist there
// (ParamStore::to throws), so reaching it is a bug; says so.
[[noreturn]] void no_cuda_build(const char* reducer);

class Reducer {
 public:
  virtual ~Reducer() = default;
  // Sizes the state for these buckets (ids 0..n-1 in order). Called once, before reduce().
  virtual void prepare(std::span<const BucketLayout> buckets) { (void)buckets; }
  // In place: on return every rank holds the (approximate) average of all ranks' `data`, which
  // is the slice of bucket `bucket` (data.size() == bucket.size).
  virtual void reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step,
                      Communicator& comm) = 0;
  virtual std::string describe() const = 0;
  // Every state buffer (after prepare()), for checkpoints; names are unique.
  virtual std::vector<StateTensor> state() { return {}; }
  const ReducerStats& stats() const { return stats_; }

 protected:
  void account(const ReducerStats& delta) { stats_ += delta; }
  // The compressing reducers' dense warm-up steps: a plain fp32 average, accounted as one call
  // whose payload is its input.
  void reduce_dense(std::span<float> data, Communicator& comm);

 private:
  ReducerStats stats_;
};

// Exact averaging with a dense all-reduce whose wire format is `wire`: f32 (exact), or bf16 /
// f16 (cast, all-reduce with fp32 arithmetic at every addition, cast back; half the bytes).
class DenseReducer final : public Reducer {
 public:
  explicit DenseReducer(DType wire = DType::f32, Device device = Device::cpu);
  void prepare(std::span<const BucketLayout> buckets) override;
  void reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step,
              Communicator& comm) override;
  std::string describe() const override;

 private:
  DType wire_;
  Device device_;
  DeviceArray<std::uint16_t> half_;  // the 16-bit wire copy (on device_), sized for the largest bucket
};

}  // namespace laconic
