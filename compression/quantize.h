// Block codecs for pseudo-gradients (and any other buffer): fp32 as it is, or every block of
// `block` elements as one fp32 scale and a low-precision code per element. The periodic strategies
// (local SGD, DiLoCo, streaming DiLoCo) send their outer gradients through them
// (OpenDiLoCo: fp16; INTELLECT-1: int8; Streaming DiLoCo: 4-bit), while accumulation and the outer
// step stay fp32.
//
// Encoded layout of n elements (quantize_bytes):
//   fp32: the n floats.
//   else: ceil(n / block) fp32 scales, then the n codes of `bits` bits each, packed back to back
//         least significant bit first (element i in bits [i*bits, (i+1)*bits) of the code bytes),
//         the last byte padded with zero bits:  4 * ceil(n / block) + ceil(n * bits / 8) bytes.
// Codes per block, s its scale, a = max |x| over the block:
//   int8, int4: symmetric, zero exact: q = round_half_even(x / s) in [-Q, Q] (Q = 127, 7), two's
//               complement in 8 / 4 bits; s = a / Q; the value is q * s.
//   int2:       four levels, no zero (what survives a top-k is never near zero): the value is
//               (q - 1.5) * s for q in 0..3, s = a / 1.5, q = clamp(floor(x / s) + 2, 0, 3).
//   bf16, fp16, fp8_e4m3: the float format of x / s (round to nearest even), s the smallest power
//               of two with a / s <= the format's largest finite value (bf16: s = 1; fp16 65504;
//               fp8_e4m3, OCP FP8 E4M3 without infinities, 448). A power of two scales exactly, so
//               a value the format holds (times s) comes back bit for bit; fp16's scale also keeps
//               small pseudo-gradients out of its subnormals.
//   a = 0 gives s = 0 and every code 0 (int2: the level +0.5), so the block decodes to 0. A non-finite
//   value in a block gives a non-finite scale and every code 0, so the whole block decodes to NaN
//   (as a dense all-reduce would spread it).
// Error feedback: with a residual e, acc = x + e is encoded and e = acc - decode(code), so what
// was sent plus the residual equals the sum of all inputs: nothing is lost, only delayed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compression/reducer.h"
#include "core/enum_names.h"

namespace laconic {

enum class Codec : std::uint8_t { fp32, bf16, fp16, fp8_e4m3, int8, int4, int2 };
inline constexpr std::array kCodecNames{"fp32", "bf16", "fp16", "fp8_e4m3", "int8", "int4", "int2"};
constexpr std::span<const char* const> names(Codec) { return kCodecNames; }
inline const char* name_of(Codec c) { return enum_name(c); }

// Bits per element of the code (fp32: 32).
int codec_bits(Codec c);
// Bytes of n encoded elements (the layout above).
std::size_t quantize_bytes(Codec c, std::size_t block, std::size_t n);
// Of which scales (0 for fp32).
std::size_t quantize_scale_bytes(Codec c, std::size_t block, std::size_t n);

// Encodes acc = x (+ error, when error is not empty; then error = acc - decoded) into
// out (out.size() >= quantize_bytes(c, block, x.size())). error may not alias x or out.
void quantize_encode(std::span<const float> x, std::span<float> error, Codec c, std::size_t block,
                     std::span<std::uint8_t> out);
// out = the decoded values of in (in encodes out.size() elements).
void quantize_decode(std::span<const std::uint8_t> in, Codec c, std::size_t block, std::span<float> out);
// sum += weight * decoded values, element by element (for averaging what several ranks sent).
void quantize_decode_add(std::span<const std::uint8_t> in, Codec c, std::size_t block, float weight,
                         std::span<float> sum);

// OCP FP8 E4M3 (bias 7, no infinities, largest finite 448, NaN = S.1111.111): round to nearest
// even, saturating at +-448; NaN stays NaN.
std::uint8_t to_fp8_e4m3(float x);
float from_fp8_e4m3(std::uint8_t code);

struct QuantizeOptions {
  Codec codec = Codec::int8;
  std::size_t block = 256;      // elements per scale
  bool error_feedback = false;  // keep what the codes dropped and add it to the next sync's input
  Device device = Device::cpu;  // the reducer runs on host buffers only for now
  bool operator==(const QuantizeOptions&) const = default;
};

// The two-phase compressed all-reduce of the 1-bit reducer (onebit.h) with a block codec: the
// bucket is split into RankChunks; phase 1 encodes chunk j (with this rank's worker residual) and
// an all_to_all brings chunk j of every rank to rank j, which decodes and averages them in fp32 in
// rank order (sum of weight 1/N terms from rank 0's), encodes the average again (with its server
// residual) and an all_gather hands every rank every decoded chunk. Every rank decodes the same
// bytes: all ranks end with bit-identical buckets. Wire per rank and call: (N - 1) blocks of
// quantize_bytes(chunk) in each phase; for int8 with block 256 that is 1/3.94 of a fp32 ring
// all-reduce's 2 (N - 1) / N * 4n bytes at N = 2 (the same ratio at every N, up to padding).
// World size 1 runs both phases too (local copies): a single rank sees the codec's rounding twice,
// as every rank of a larger world does.
class QuantizedReducer final : public Reducer {
 public:
  explicit QuantizedReducer(QuantizeOptions opts);
  void prepare(std::span<const BucketLayout> buckets) override;
  // Stats per call: input 4n; values = codes of the N chunks of phase 1 and the own chunk of
  // phase 2, scales likewise (RankChunks padding included: it is sent).
  void reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step,
              Communicator& comm) override;
  std::string describe() const override;
  // With error feedback, per bucket id: "quantize.worker_error.<id>" and
  // "quantize.server_error.<id>" (n elements each, as the 1-bit reducer's).
  std::vector<StateTensor> state() override;
  const QuantizeOptions& options() const { return opts_; }

 private:
  struct Residuals {
    std::vector<float> worker, server;
  };
  Residuals* residuals(const BucketLayout& bucket);  // null without error feedback
  void size_wire(std::size_t n, int world);

  QuantizeOptions opts_;
  std::vector<Residuals> residuals_;  // by bucket id
  int world_ = 0;                     // the world size the wire is sized for (0: none yet)
  std::size_t wire_n_ = 0;            // ... and the bucket size
  std::vector<std::uint8_t> blocks_, received_;
  std::vector<float> average_;
};

}  // namespace laconic
