// Chunked top-k with compact indices and quantized values, the wire format of SparseLoCo's
// pseudo-gradients and DeMo's DCT coefficients, and SparseLoCo's reducer.
//
// ChunkTopK: a buffer of n elements is cut into chunks of `chunk` elements (the last may be
// shorter); each chunk keeps its k largest magnitudes (a shorter last chunk min(k, its length)),
// ties to the lower position, listed in ascending position. Encoded layout of n elements:
//   the kept values in chunk order, as the block codec (quantize.h) with block = k: one fp32 scale
//     per chunk (none for fp32), then the codes; every chunk but the last keeps exactly k values,
//     so each scale covers one chunk;
//   then each kept value's position inside its chunk in index_bits = ceil(log2(chunk)) bits,
//     packed back to back least significant bit first (12 bits for chunks of 4096, 6 for 64).
// So a chunk of 4096 floats keeping 64 values as 2-bit codes is 4 + 16 + 96 = 116 bytes instead of
// 16384: 141 times fewer (1.56% density). Fixed k per chunk: every rank's encoding of a bucket has
// the same size, so one all_gather with equal blocks carries them and no counts are sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compression/quantize.h"
#include "compression/reducer.h"

namespace laconic {

struct ChunkTopK {
  std::size_t chunk = 4096;  // >= 1 (a chunk of 1 keeps its element: 0-bit positions)
  std::size_t k = 64;        // 1..chunk
  Codec codec = Codec::int2;

  int index_bits() const;
  std::size_t kept(std::size_t n) const;  // values kept from n elements
  std::size_t value_bytes(std::size_t n) const;  // codes and scales of the kept values
  std::size_t index_bytes(std::size_t n) const;
  std::size_t bytes(std::size_t n) const { return value_bytes(n) + index_bytes(n); }
};

// Scratch for encode / decode of up to n elements: sized once (prepare), reused every call.
struct ChunkTopKScratch {
  std::vector<std::uint32_t> order;  // chunk
  std::vector<float> values;         // kept(n)
  std::vector<std::uint32_t> positions;  // kept(n)
  void size_for(const ChunkTopK& c, std::size_t n);
};

// Encodes the top-k of every chunk of x into out (out.size() >= c.bytes(x.size())). When `sent` is
// not empty (x.size() elements) it receives what the receivers will decode: the decoded kept
// values at their positions, 0 elsewhere (error feedback subtracts it).
void chunk_topk_encode(std::span<const float> x, const ChunkTopK& c, std::span<std::uint8_t> out,
                       std::span<float> sent, ChunkTopKScratch& scratch);
// sum[i] += weight * the decoded value at every kept position of `in` (an encoding of
// sum.size() elements); when `count` is not empty (sum.size() elements), count[i] += 1 there.
void chunk_topk_decode_add(std::span<const std::uint8_t> in, const ChunkTopK& c, float weight,
                           std::span<float> sum, ChunkTopKScratch& scratch, std::span<float> count = {});

// A buffer made of tensors, encoded tensor by tensor: no chunk straddles two tensors, so a small
// tensor beside large ones keeps k values of its own instead of competing with its neighbours'
// magnitudes (Templar's SparseLoCo and the DeMo reference, bloc97/DeMo, chunk inside each
// tensor). Part p is the elements [offset, offset + numel) of the buffer, encoded with its own
// ChunkTopK at byte `at` of one rank's encoding of the whole buffer; bytes() in all.
class TensorTopK {
 public:
  struct Part {
    std::size_t offset = 0;
    std::size_t numel = 0;
    ChunkTopK topk;
    std::size_t at = 0;
  };
  // Appends the next part (offsets ascending, contiguous).
  void add(std::size_t offset, std::size_t numel, const ChunkTopK& topk);
  const std::vector<Part>& parts() const { return parts_; }
  std::size_t size() const { return parts_.empty() ? 0 : parts_.back().offset + parts_.back().numel; }
  std::size_t bytes() const { return bytes_; }
  // What one encoding puts on the wire: values, their scales, positions (one call).
  ReducerStats payload() const;
  // Grows `scratch` for every part.
  void size(ChunkTopKScratch& scratch) const;
  // chunk_topk_encode / chunk_topk_decode_add of every part (x, sent, sum, count: size() elements).
  void encode(std::span<const float> x, std::span<std::uint8_t> out, std::span<float> sent,
              ChunkTopKScratch& scratch) const;
  void decode_add(std::span<const std::uint8_t> in, float weight, std::span<float> sum, ChunkTopKScratch& scratch,
                  std::span<float> count = {}) const;

 private:
  std::vector<Part> parts_;
  std::size_t bytes_ = 0;
};

// SparseLoCo's reducer (Sarfi et al. 2025): per bucket, an error-feedback accumulator e (in place
// of outer momentum) takes the pseudo-gradient, e = beta * e + data; the chunked top-k of e, in
// chunks of each tensor of the bucket (TensorTopK over bucket.tensors), goes on the wire and
// leaves e (e -= what was sent); an all_gather brings every rank's encoding, and each
// rank decodes them in rank order into data = sum_r (1/N) sent_r, the same bits everywhere. The
// outer step (periodic.h, outer_lr, no momentum) then moves theta_global by it.
// Wire per rank and call: (N - 1) * the bucket's TensorTopK bytes (the ring all-gather's blocks).
struct SparseLocoOptions {
  ChunkTopK topk;
  double beta = 0.95;
  bool operator==(const SparseLocoOptions&) const = default;
};

class SparseLocoReducer final : public Reducer {
 public:
  explicit SparseLocoReducer(SparseLocoOptions opts);
  void prepare(std::span<const BucketLayout> buckets) override;
  void reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step, Communicator& comm) override;
  std::string describe() const override;
  // "sparseloco.error.<id>" per bucket id: the accumulator.
  std::vector<StateTensor> state() override;

 private:
  std::vector<float>& error(const BucketLayout& bucket);
  const TensorTopK& wire(const BucketLayout& bucket);
  void size_wire(int world);

  SparseLocoOptions opts_;
  std::vector<std::vector<float>> error_;  // by bucket id
  std::vector<TensorTopK> wire_;           // by bucket id: the per-tensor encoding
  ChunkTopKScratch scratch_;
  std::vector<float> sent_;
  std::vector<std::uint8_t> gathered_;
  int world_ = 0;
  std::size_t wire_bytes_ = 0;  // gathered_ holds world_ blocks of this
};

}  // namespace laconic
