// 1-bit compression with error feedback: every value travels as its sign, every chunk of values
// as one fp32 scale, and what the compression dropped is kept and added to the next step's input
// (EF-signSGD, Karimireddy et al. 2019; 1-bit Adam, Tang et al. 2021; docs/references.md "1-bit
// with error feedback").
//
// Codec (pure free functions, below): a chunk x of n floats with residual e is sent as
//   acc = x + e;  scale = S(acc);  bits = sign(acc);  e = acc - scale * sign(acc),
// so the receiver's scale * sign(acc) plus the new residual is exactly what was to be sent, and
// nothing is lost over time, only delayed.
//   - sign(a) = -1 for a < 0, else +1: sign(0) = sign(-0) = +1 (and a NaN counts as +1).
//   - Bit order: element i is bit (i % 8) of byte i / 8, least significant bit first; the bit is 1
//     for -1 and 0 for +1. So all-zero bytes decode to +scale, and bits past n are 0.
//   - S = l2: ||acc||_2 / sqrt(n), the root mean square. scale * sign(acc) then has the same norm
//     as acc (1-bit Adam's choice: the update keeps its size).
//     S = mean_abs: mean |acc|, the L1-optimal scale for a sign vector (EF-signSGD's choice).
//     Either is accumulated in double, in 8 lanes (element i in lane i % 8) summed pairwise at the
//     end, whatever the instruction set: the same chunk gives the same scale bits on every machine.
//     n = 0 gives scale 0; a non-finite input gives a non-finite scale, which then reaches every
//     output of its chunk (as a dense all-reduce would spread it).
//
// OneBitReducer: the two-phase compressed all-reduce of 1-bit Adam (DeepSpeed's
// compressed_allreduce), with a scale per destination chunk. A bucket of n elements is padded to
// N chunks of c elements (N = world size, c a multiple of 8; RankChunks), and rank j owns chunk j.
//   Phase 1 (worker): each rank compresses each of its N chunks with its worker residual and its
//     own scale, and an all_to_all brings chunk j of every rank to rank j. DeepSpeed uses one
//     scale for the whole bucket and all-gathers it; a scale per chunk fits each chunk's own
//     magnitude (a bucket spans layers of very different gradient sizes) at the same wire cost:
//     either way 4 bytes of scale go to each of the N - 1 other ranks.
//   Phase 2 (server): rank j averages the N decoded chunks, sum_i (scale_i / N) * sign_i summed in
//     rank order from rank 0's term (dividing the scales, not the sum: no extra pass), adds its
//     server residual, compresses the result again with one scale, and an all_gather hands every
//     rank every server chunk, which it decodes into the bucket.
// Each wire block is [fp32 scale][c / 8 bytes of bits], so each phase is one collective (the
// scales ride with their bits instead of a second, latency-bound collective of N floats).
// Every rank decodes the same gathered bytes, so all ranks end with bit-identical buckets.
// Padding is absent data, not zeros: chunk j holds real(j) <= c elements, the scale is over those
// only, padding bits are 0 and carry no residual. (DeepSpeed compresses the zeros too, so their
// residuals drift away from zero and inflate the scales.)
// World size 1 runs both phases too (the collectives are local copies), so a single-rank run
// has the N-rank semantics: each value reaches the model after two rounds of compression.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compression/reducer.h"

namespace laconic {

struct OneBitOptions {
  // Steps 0 .. warmup_steps - 1 are exact: a dense fp32 all-reduce average, residuals untouched
  // (1-bit Adam's freeze_step: the optimizer's variance settles on uncompressed gradients).
  std::int64_t warmup_steps = 0;
  // Off: residuals stay zero and each step sends only its own input's signs (plain signSGD-style
  // averaging, biased; kept for comparison).
  bool error_feedback = true;
  // l2: ||x||_2 / sqrt(n), keeps the chunk's norm (1-bit Adam). mean_abs: mean |x| (EF-signSGD),
  // the scale that minimises the residual: ||x - C(x)||^2 = ||x||^2 - ||x||_1^2 / n never exceeds
  // ||x||^2 (the contraction EF's convergence proofs assume), which l2 only guarantees on chunks
  // that are not too peaked (||x||_1 >= sqrt(n) ||x||_2 / 2).
  enum class Scale { l2, mean_abs } scale = Scale::l2;
  // Where the reducer's state and reduce()'s data live (reducer.h).
  Device device = Device::cpu;
  bool operator==(const OneBitOptions&) const = default;
};
inline constexpr std::array kOneBitScaleNames{"l2", "mean_abs"};
constexpr std::span<const char* const> names(OneBitOptions::Scale) { return kOneBitScaleNames; }
inline const char* name_of(OneBitOptions::Scale s) { return enum_name(s); }

// Bytes holding the signs of n elements.
constexpr std::size_t onebit_packed_bytes(std::size_t n) { return (n + 7) / 8; }

// A wire block of chunks c: the fp32 scale, then the chunk's chunk / 8 bytes of bits.
constexpr std::size_t onebit_block_bytes(const RankChunks& c) { return sizeof(float) + c.chunk / 8; }

// The scale S(x + error) of the header; error empty means zeros (no error feedback).
float onebit_scale(std::span<const float> x, std::span<const float> error, OneBitOptions::Scale s);

// Compresses acc = x + error: writes sign(acc) into bits (bits.size() >= onebit_packed_bytes(n);
// every bit past element n is set to 0), sets error = acc - scale * sign(acc), returns the scale.
// error empty: no feedback, acc = x. error may not alias x or bits.
float onebit_encode(std::span<const float> x, std::span<float> error, std::span<std::uint8_t> bits,
                    OneBitOptions::Scale s);

// out[i] = scale * sign_i for i < out.size() (bits.size() >= onebit_packed_bytes(out.size())).
// Exact: +-scale, the sign flipped by its bit.
void onebit_decode(std::span<const std::uint8_t> bits, float scale, std::span<float> out);
// sum[i] = sum[i] + scale * sign_i: accumulates a decoded chunk without materialising it.
void onebit_decode_add(std::span<const std::uint8_t> bits, float scale, std::span<float> sum);

class OneBitReducer final : public Reducer {
 public:
  explicit OneBitReducer(OneBitOptions opts = {});
  // Sizes both residuals of every bucket (zeroed). Buffers that depend on the world size (the
  // wire blocks, the owned chunk's average) are sized by the first compressed reduce(), for the
  // largest bucket; nothing is allocated after that. A bucket not passed here gets its residuals
  // on its first reduce().
  void prepare(std::span<const BucketLayout> buckets) override;
  // step < warmup_steps: dense average; otherwise the two phases of the header. Stats count, per
  // compressed call, value_bytes = padded / 8 (phase 1, all N chunks) + chunk / 8 (phase 2) and
  // scale_bytes = 4 (N + 1); the wire carries the N - 1 blocks that leave the rank in each phase.
  void reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step,
              Communicator& comm) override;
  std::string describe() const override;
  // Per bucket id: "onebit.worker_error.<id>" (n elements: this rank's residual of phase 1) and
  // "onebit.server_error.<id>" (n elements: the residual of phase 2 at the positions of the chunk
  // this rank owns, zero elsewhere; summed over ranks it is the bucket's server residual). Sizes
  // do not depend on the world size, so a checkpoint always loads; a resume at another world size
  // keeps the worker residuals' meaning, while the server residuals then sit at stale positions.
  std::vector<StateTensor> state() override;

  const OneBitOptions& options() const { return opts_; }

 private:
  struct Residuals {
    DeviceArray<float> worker, server;  // on opts_.device
  };
  Residuals& residuals(const BucketLayout& bucket);
  void size_wire(std::size_t n, int world);
  // The two phases with the CUDA codec (reduce() has sized everything).
  void reduce_cuda(std::span<float> data, Residuals& res, const RankChunks& c, Communicator& comm);

  OneBitOptions opts_;
  std::vector<Residuals> residuals_;  // by bucket id
  int world_ = 0;                     // the world size the wire buffers are sized for (0: none yet)
  std::size_t wire_n_ = 0;            // ... and the bucket size
  // Phase 1's outgoing blocks, then (in place) the gathered server blocks of phase 2. All on
  // opts_.device.
  DeviceArray<std::uint8_t> blocks_;
  DeviceArray<std::uint8_t> received_;  // phase 1's incoming blocks: the owned chunk from every rank
  DeviceArray<float> average_;          // the owned chunk's average, the server's input
  DeviceArray<double> scale_scratch_;   // cuda: the scale reduction's partial sums
};

}  // namespace laconic
