// Block codecs (compression/quantize.h): exact round trips of representable values, the byte
// formula with scales, FP8 E4M3 against its definition, error feedback losing nothing over time,
// and the two-phase reducer: identical buckets on every rank, close to the mean, the bytes on the
// wire.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "compression/quantize.h"

namespace laconic {
namespace {

constexpr Codec kLossy[] = {Codec::bf16, Codec::fp16, Codec::fp8_e4m3, Codec::int8, Codec::int4, Codec::int2};

std::vector<float> wave(std::size_t n, int seed, float amp = 1e-3f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = amp * std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(seed)) *
           (1.0f + 0.5f * std::cos(0.011f * static_cast<float>(i)));
  return v;
}

std::vector<float> round_trip(const std::vector<float>& x, Codec c, std::size_t block) {
  std::vector<std::uint8_t> wire(quantize_bytes(c, block, x.size()), 0xAB);
  quantize_encode(x, {}, c, block, wire);
  std::vector<float> out(x.size());
  quantize_decode(wire, c, block, out);
  return out;
}

TEST(Quantize, ByteFormulaCountsScalesAndPackedCodes) {
  EXPECT_EQ(quantize_bytes(Codec::fp32, 256, 1000), 4000u);
  EXPECT_EQ(quantize_bytes(Codec::bf16, 256, 1000), 4 * 4 + 2000u);
  EXPECT_EQ(quantize_bytes(Codec::int8, 256, 1000), 4 * 4 + 1000u);
  EXPECT_EQ(quantize_bytes(Codec::fp8_e4m3, 100, 1000), 10 * 4 + 1000u);
  EXPECT_EQ(quantize_bytes(Codec::int4, 256, 1001), 4 * 4 + 501u);  // the last nibble pads a byte
  EXPECT_EQ(quantize_bytes(Codec::int2, 32, 1001), 32 * 4 + 251u);
  EXPECT_EQ(quantize_scale_bytes(Codec::int4, 256, 1001), 16u);
  EXPECT_EQ(quantize_scale_bytes(Codec::fp32, 256, 1001), 0u);
}

TEST(Quantize, IntCodesOfAScaleComeBackExactly) {
  // Blocks of q * s with the largest code present, so the scale a / Q is s exactly.
  for (Codec c : {Codec::int8, Codec::int4}) {
    const int Q = c == Codec::int8 ? 127 : 7;
    const std::size_t block = 64;
    std::vector<float> x(3 * block + 17);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t b = i / block;
      const float s = std::ldexp(0.75f, -static_cast<int>(b) - 6);
      const int q = (i % block == 0) ? -Q : static_cast<int>((i * 7 + b) % (2 * Q + 1)) - Q;
      x[i] = static_cast<float>(q) * s;
    }
    EXPECT_EQ(round_trip(x, c, block), x) << name_of(c);
  }
  // int2: the four levels (q - 1.5) s.
  std::vector<float> x(40);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = (static_cast<float>(i % 4) - 1.5f) * 0.125f;
  EXPECT_EQ(round_trip(x, Codec::int2, 16), x);
}

TEST(Quantize, FloatFormatValuesComeBackExactly) {
  // Values each format holds, times a power of two (one per 32-element block): the power-of-two
  // scale keeps them exact.
  std::vector<float> x;
  for (int i = 0; i < 192; ++i) x.push_back(from_fp8_e4m3(static_cast<std::uint8_t>(i % 126)) * 0x1p-12f);
  for (int i = 0; i < 200; ++i) x.push_back(-from_fp8_e4m3(static_cast<std::uint8_t>((i * 5) % 126)) * 0x1p-3f);
  for (Codec c : {Codec::bf16, Codec::fp16, Codec::fp8_e4m3}) EXPECT_EQ(round_trip(x, c, 32), x) << name_of(c);
  std::vector<float> h;  // fp16's 11 bits, at a pseudo-gradient's size (fp16's subnormals without the scale)
  for (int i = 0; i < 100; ++i) h.push_back(static_cast<float>(1024 + 7 * i) * 0x1p-30f);
  EXPECT_EQ(round_trip(h, Codec::fp16, 100), h);
}

TEST(Quantize, Fp8E4M3MatchesItsDefinition) {
  EXPECT_EQ(from_fp8_e4m3(0x7E), 448.0f);
  EXPECT_EQ(from_fp8_e4m3(0x08), 0x1p-6f);   // smallest normal
  EXPECT_EQ(from_fp8_e4m3(0x01), 0x1p-9f);   // smallest subnormal
  EXPECT_EQ(from_fp8_e4m3(0x38), 1.0f);
  EXPECT_EQ(from_fp8_e4m3(0xB8), -1.0f);
  EXPECT_TRUE(std::isnan(from_fp8_e4m3(0x7F)));
  EXPECT_TRUE(std::isnan(from_fp8_e4m3(0xFF)));
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;
    const float v = from_fp8_e4m3(static_cast<std::uint8_t>(code));
    EXPECT_EQ(from_fp8_e4m3(to_fp8_e4m3(v)), v) << code;
  }
  EXPECT_EQ(to_fp8_e4m3(1e6f), 0x7E);        // saturates
  EXPECT_EQ(to_fp8_e4m3(-1e6f), 0xFE);
  EXPECT_EQ(to_fp8_e4m3(1.0625f), 0x38);     // halfway between 1 and 1.125: to even
  EXPECT_EQ(to_fp8_e4m3(1.1875f), 0x3A);     // halfway between 1.125 and 1.25: to even (1.25)
  EXPECT_EQ(to_fp8_e4m3(0x1p-10f), 0x00);    // half the smallest subnormal: to even (0)
  EXPECT_EQ(to_fp8_e4m3(0x1.8p-10f), 0x01);
  EXPECT_TRUE(std::isnan(from_fp8_e4m3(to_fp8_e4m3(std::nanf("")))));
}

TEST(Quantize, LossyCodecsStayWithinHalfAStepOfTheBlock) {
  const std::vector<float> x = wave(1000, 3);
  for (Codec c : kLossy) {
    const std::vector<float> y = round_trip(x, c, 128);
    for (std::size_t b = 0; b < x.size(); b += 128) {
      float a = 0;
      for (std::size_t i = b; i < std::min(b + 128, x.size()); ++i) a = std::max(a, std::fabs(x[i]));
      // int: half a step s / 2 = a / 2Q; int2: a / 3; floats: half an ulp at the block's largest value.
      const float tol = c == Codec::int8 ? a / 254 : c == Codec::int4 ? a / 14 : c == Codec::int2 ? a / 3 + 1e-12f
                        : c == Codec::fp8_e4m3 ? a / 16 : a / 256;
      for (std::size_t i = b; i < std::min(b + 128, x.size()); ++i)
        ASSERT_LE(std::fabs(y[i] - x[i]), tol * 1.0001f) << name_of(c) << " element " << i;
    }
  }
}

TEST(Quantize, ZeroBlocksAndNonFiniteBlocks) {
  std::vector<float> x(64, 0.0f);
  x[40] = std::numeric_limits<float>::infinity();
  for (Codec c : kLossy) {
    const std::vector<float> y = round_trip(x, c, 32);
    for (std::size_t i = 0; i < 32; ++i) ASSERT_EQ(y[i], 0.0f) << name_of(c);
    for (std::size_t i = 32; i < 64; ++i) ASSERT_TRUE(std::isnan(y[i])) << name_of(c);
  }
}

TEST(Quantize, ErrorFeedbackLosesNothingOverTime) {
  // sent_1 + ... + sent_T + residual_T = x_1 + ... + x_T (up to float rounding of the residual).
  const std::size_t n = 700;
  for (Codec c : kLossy) {
    std::vector<float> error(n, 0.0f), sent(n);
    std::vector<double> sum_sent(n, 0.0), sum_x(n, 0.0);
    std::vector<std::uint8_t> wire(quantize_bytes(c, 64, n));
    for (int t = 0; t < 40; ++t) {
      const std::vector<float> x = wave(n, t);
      quantize_encode(x, error, c, 64, wire);
      quantize_decode(wire, c, 64, sent);
      for (std::size_t i = 0; i < n; ++i) {
        sum_sent[i] += sent[i];
        sum_x[i] += x[i];
      }
    }
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(sum_sent[i] + error[i] - sum_x[i]));
    EXPECT_LT(worst, 1e-8) << name_of(c);  // inputs ~1e-3, 40 steps: float rounding only
    // And the residual stays bounded (one step's rounding), it does not grow with T.
    float e = 0;
    for (float v : error) e = std::max(e, std::fabs(v));
    EXPECT_LT(e, 1e-3f) << name_of(c);
  }
}

TEST(QuantizedReducer, EveryRankEndsWithTheSameAverageAndTheWireCarriesTheFormula) {
  const int world = 3;
  const std::size_t n = 1000;
  for (Codec c : {Codec::int8, Codec::int4, Codec::fp8_e4m3, Codec::bf16}) {
    std::vector<std::vector<float>> got(world);
    std::vector<ByteCounters> wire(world);
    run_threads(world, [&](Communicator& comm) {
      QuantizedReducer red(QuantizeOptions{.codec = c, .block = 64, .error_feedback = true});
      const BucketLayout layout = flat_bucket(n);
      red.prepare(std::span(&layout, 1));
      std::vector<float> data = wave(n, comm.rank());
      const ByteCounters before = comm.bytes();
      red.reduce(data, layout, 0, comm);
      wire[static_cast<std::size_t>(comm.rank())] = comm.bytes() - before;
      got[static_cast<std::size_t>(comm.rank())] = data;
      const RankChunks ch(n, world);
      const std::size_t nb = quantize_bytes(c, 64, ch.chunk);
      EXPECT_EQ(red.stats().scale_bytes + red.stats().value_bytes, (world + 1) * nb);
      EXPECT_EQ(red.stats().input_bytes, 4 * n);
    });
    const RankChunks ch(n, world);
    const std::size_t nb = quantize_bytes(c, 64, ch.chunk);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(got[static_cast<std::size_t>(r)], got[0]) << name_of(c);
      // all_to_all: N - 1 blocks out; the all_gather: N - 1 blocks out.
      EXPECT_EQ(wire[static_cast<std::size_t>(r)].sent, 2u * (world - 1) * nb) << name_of(c);
    }
    double err = 0, norm = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double mean = (wave(n, 0)[i] + wave(n, 1)[i] + wave(n, 2)[i]) / 3.0;
      err = std::max(err, std::fabs(got[0][i] - mean));
      norm = std::max(norm, std::fabs(mean));
    }
    // Two roundings (the ranks' inputs, then the mean, whose amplitude is half theirs).
    const double tol = c == Codec::int4 ? 0.3 : c == Codec::fp8_e4m3 ? 0.25 : 0.03;
    EXPECT_LT(err, tol * norm) << name_of(c);
  }
}

// Buckets of different sizes through one reducer: the wire is sized for the largest, each call
// sends only its own bucket's blocks.
TEST(QuantizedReducer, ASmallerBucketAfterALargerOneSendsItsOwnSize) {
  const int world = 3;
  std::vector<std::vector<float>> got(world);
  run_threads(world, [&](Communicator& comm) {
    QuantizedReducer red(QuantizeOptions{.codec = Codec::int8, .block = 32});
    const BucketLayout big = flat_bucket(600, 0), small = flat_bucket(50, 1);
    const BucketLayout both[] = {big, small};
    red.prepare(both);
    std::vector<float> a = wave(600, comm.rank()), b = wave(50, comm.rank() + 5);
    red.reduce(a, big, 0, comm);
    const ByteCounters before = comm.bytes();
    red.reduce(b, small, 0, comm);
    EXPECT_EQ((comm.bytes() - before).sent, 2u * (world - 1) * quantize_bytes(Codec::int8, 32, RankChunks(50, world).chunk));
    got[static_cast<std::size_t>(comm.rank())] = b;
  });
  for (int r = 1; r < world; ++r) EXPECT_EQ(got[r], got[0]);
  for (std::size_t i = 0; i < 50; ++i)
    EXPECT_NEAR(got[0][i], (wave(50, 5)[i] + wave(50, 6)[i] + wave(50, 7)[i]) / 3, 3e-5) << i;
}

}  // namespace
}  // namespace laconic
