// Element types: bf16/f16 conversions against an independent double-precision reference rounding,
// exhaustive round trips of every 16-bit pattern, and reduce_into / finish_avg for every dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "collectives/dtype.h"
#include "core/check.h"

namespace laconic {
namespace {

// ---- the reference: a 16-bit format described by its field widths, evaluated in double ----

struct Format16 {
  int man_bits;  // explicit mantissa bits: f16 10, bf16 7
  int bias;      // f16 15, bf16 127
  int inf_bits;  // the +inf pattern: f16 0x7c00, bf16 0x7f80

  // The value of a non-negative pattern below inf_bits, straight from the IEEE definition:
  // exponent field 0 = subnormal m * 2^(1 - bias - man_bits), else (1 + m/2^man_bits) * 2^(e - bias).
  // inf_bits itself maps to the value the next pattern would have with an unbounded exponent,
  // so "round to nearest even, overflow to inf" is one nearest-even search over the table.
  double value(int bits) const {
    const int e = bits >> man_bits, m = bits & ((1 << man_bits) - 1);
    if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias - man_bits);
    return std::ldexp(static_cast<double>((1 << man_bits) + m), e - bias - man_bits);
  }
  bool is_nan(std::uint16_t b) const {
    return (b & inf_bits) == inf_bits && (b & ((1 << man_bits) - 1)) != 0;
  }
  std::vector<double> table() const {
    std::vector<double> t(static_cast<std::size_t>(inf_bits) + 1);
    for (int b = 0; b <= inf_bits; ++b) t[static_cast<std::size_t>(b)] = value(b);
    return t;
  }
};

constexpr Format16 kF16{10, 15, 0x7c00};
constexpr Format16 kBF16{7, 127, 0x7f80};

// Round finite x to the format: the nearest table entry, ties to the even pattern. Beyond the
// last finite value, the table's top entry (inf) wins exactly when IEEE says it does.
std::uint16_t reference_round(const std::vector<double>& table, float x) {
  const double a = std::fabs(static_cast<double>(x));
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const int top = static_cast<int>(table.size()) - 1;
  if (a >= table.back()) return static_cast<std::uint16_t>(sign | top);
  const auto hi_it = std::upper_bound(table.begin(), table.end(), a);  // first entry > a
  const int hi = static_cast<int>(hi_it - table.begin()), lo = hi - 1;
  const double mid = (table[static_cast<std::size_t>(lo)] + table[static_cast<std::size_t>(hi)]) / 2;  // exact
  int pick;
  if (a < mid) pick = lo;
  else if (a > mid) pick = hi;
  else pick = (lo % 2 == 0) ? lo : hi;
  return static_cast<std::uint16_t>(sign | pick);
}

// Every float whose bits are a multiple of `stride` (all signs, exponents, NaN/inf included),
// plus, for each neighbouring pair of 16-bit values, both ends, the midpoint and the floats
// adjacent to it: the points where a rounding bug shows.
std::vector<float> probe_points(const std::vector<double>& table, std::uint32_t stride) {
  std::vector<float> xs;
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += stride) xs.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(u)));
  for (std::size_t b = 0; b + 1 < table.size(); ++b) {
    const auto mid = static_cast<float>((table[b] + table[b + 1]) / 2);  // fits in 24 bits
    for (float x : {static_cast<float>(table[b]), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  return xs;
}

// to_X against the reference on the probe points; NaN must stay NaN, +-inf stay +-inf.
template <class H>
void check_rounding(const Format16& fmt, H (*narrow)(float)) {
  const auto table = fmt.table();
  std::size_t checked = 0, wrong = 0;
  for (float x : probe_points(table, 4099)) {
    const std::uint16_t got = narrow(x).bits;
    const bool ok = std::isnan(x) ? fmt.is_nan(got) : got == reference_round(table, x);
    if (!ok && ++wrong <= 10)
      ADD_FAILURE() << "float 0x" << std::hex << std::bit_cast<std::uint32_t>(x) << " (" << x << ") -> 0x" << got
                    << ", reference 0x" << reference_round(table, x);
    ++checked;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_GT(checked, 1'000'000u);
}

// Every one of the 65536 patterns decodes to its IEEE value and encodes back to itself; NaNs
// decode to NaN and encode to a NaN.
template <class H>
void check_round_trips(const Format16& fmt, float (*widen)(H), H (*narrow)(float)) {
  for (int b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float x = widen(H{bits});
    if (fmt.is_nan(bits)) {
      EXPECT_TRUE(std::isnan(x)) << b;
      EXPECT_TRUE(fmt.is_nan(narrow(x).bits)) << b;
      continue;
    }
    const int mag = b & 0x7fff;
    const double want = mag == fmt.inf_bits ? INFINITY : fmt.value(mag);
    ASSERT_EQ(static_cast<double>(x), (b & 0x8000) ? -want : want) << "pattern " << b;
    ASSERT_EQ(narrow(x).bits, bits) << "pattern " << b;
  }
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_EQ(dtype_size(DType::u8), 1u);
  EXPECT_STREQ(name_of(DType::bf16), "bf16");
  EXPECT_STREQ(name_of(ReduceOp::avg), "avg");
}

TEST(DType, F16RoundsToNearestEvenLikeTheReference) { check_rounding<f16>(kF16, to_f16); }

TEST(DType, F16EdgeCases) {
  EXPECT_EQ(to_f16(65504.0f).bits, 0x7bff);                            // largest finite
  EXPECT_EQ(to_f16(std::nextafter(65520.0f, 0.0f)).bits, 0x7bff);     // just below the midpoint
  EXPECT_EQ(to_f16(65520.0f).bits, 0x7c00);                            // midpoint to 65536: even -> inf
  EXPECT_EQ(to_f16(-65520.0f).bits, 0xfc00);
  EXPECT_EQ(to_f16(1e30f).bits, 0x7c00);
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -14)).bits, 0x0400);              // smallest normal
  EXPECT_EQ(to_f16(std::ldexp(1023.0f, -24)).bits, 0x03ff);           // largest subnormal
  EXPECT_EQ(to_f16(std::ldexp(1023.5f, -24)).bits, 0x0400);           // tie, rounds up into normal (even)
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -24)).bits, 0x0001);              // smallest subnormal
  EXPECT_EQ(to_f16(std::ldexp(1.0f, -25)).bits, 0x0000);              // tie between 0 and 1: even
  EXPECT_EQ(to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)).bits, 0x0001);
  EXPECT_EQ(to_f16(std::ldexp(3.0f, -25)).bits, 0x0002);              // 1.5 ulp: tie to even 2
  EXPECT_EQ(to_f16(std::numeric_limits<float>::denorm_min()).bits, 0x0000);
  EXPECT_EQ(to_f16(-0.0f).bits, 0x8000);
  EXPECT_EQ(to_f16(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);       // tie at 1: even
  EXPECT_EQ(to_f16(1.0f + std::ldexp(3.0f, -11)).bits, 0x3c02);       // tie at 1+2^-10: even
  EXPECT_EQ(from_f16(f16{0x7bff}), 65504.0f);
  EXPECT_EQ(from_f16(f16{0x0001}), std::ldexp(1.0f, -24));
  EXPECT_EQ(from_f16(f16{0xfc00}), -INFINITY);
}

TEST(DType, EveryF16PatternRoundTrips) { check_round_trips<f16>(kF16, from_f16, to_f16); }

TEST(DType, BF16RoundsToNearestEvenLikeTheReference) { check_rounding<bf16>(kBF16, to_bf16); }

TEST(DType, BF16EdgeCases) {
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds past the top: inf
  EXPECT_EQ(to_bf16(std::bit_cast<float>(0x7f7f7fffu)).bits, 0x7f7f);  // just below the midpoint
  EXPECT_EQ(to_bf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);        // tie: even
  EXPECT_EQ(to_bf16(1.0f + std::ldexp(3.0f, -8)).bits, 0x3f82);        // tie: even
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::denorm_min()).bits, 0x0000);
  EXPECT_EQ(to_bf16(std::bit_cast<float>(0x00018000u)).bits, 0x0002);  // subnormal tie: even
  EXPECT_EQ(to_bf16(-0.0f).bits, 0x8000);
  // A signalling NaN whose payload sits in the dropped bits must not become inf.
  EXPECT_TRUE(kBF16.is_nan(to_bf16(std::bit_cast<float>(0x7f800001u)).bits));
  EXPECT_TRUE(kBF16.is_nan(to_bf16(std::bit_cast<float>(0xff800001u)).bits));
}

TEST(DType, EveryBF16PatternRoundTrips) { check_round_trips<bf16>(kBF16, from_bf16, to_bf16); }

// ---- reduce_into and finish_avg ----

template <class T>
void reduce(std::vector<T>& acc, const std::vector<T>& in, ReduceOp op) {
  ASSERT_EQ(acc.size(), in.size());
  reduce_into(acc.data(), in.data(), acc.size(), dtype_of<T>(), op);
}

TEST(DType, ReduceIntoF32) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    std::vector<float> acc = {1.5f, -2.0f, 1e30f, 0.1f, -7.0f};
    const std::vector<float> in = {2.25f, -3.0f, 1e30f, 0.2f, 7.0f};
    reduce(acc, in, op);
    if (op == ReduceOp::max) {
      EXPECT_EQ(acc, (std::vector<float>{2.25f, -2.0f, 1e30f, 0.2f, 7.0f}));
    } else {  // avg folds like sum
      EXPECT_EQ(acc, (std::vector<float>{3.75f, -5.0f, 2e30f, 0.1f + 0.2f, 0.0f}));
    }
  }
}

// Both 16-bit formats: widen, combine in fp32, round the fp32 result to nearest even.
template <class H>
void check_reduce16(float (*widen)(H), const Format16& fmt) {
  const auto table = fmt.table();
  std::vector<H> acc, in;
  // Pairs chosen so the fp32 sum needs rounding: ties, carries into the next binade, cancellation.
  const float xs[] = {1.0f, 3.0f, 0.1f, -0.3f, 1000.0f, 1e-3f, 7.5f, -7.5f, 65000.0f, 300.0f};
  for (float a : xs)
    for (float b : xs) {
      acc.push_back(H{reference_round(table, a)});
      in.push_back(H{reference_round(table, b)});
    }
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    std::vector<H> got = acc;
    reduce(got, in, op);
    for (std::size_t i = 0; i < acc.size(); ++i) {
      const float x = widen(in[i]), y = widen(acc[i]);
      const float want = op == ReduceOp::max ? std::max(x, y) : x + y;
      EXPECT_EQ(got[i].bits, reference_round(table, want)) << name_of(op) << " of " << x << " and " << y;
    }
  }
}

TEST(DType, ReduceIntoBF16) { check_reduce16<bf16>(from_bf16, kBF16); }
TEST(DType, ReduceIntoF16) { check_reduce16<f16>(from_f16, kF16); }

TEST(DType, ReduceIntoF16RoundsEachFold) {
  // 2048 + 1 = 2049 is a tie in f16 (spacing 2 above 2048): even -> 2048, every time.
  std::vector<f16> acc = {to_f16(2048.0f)};
  const std::vector<f16> one = {to_f16(1.0f)};
  for (int k = 0; k < 5; ++k) reduce(acc, one, ReduceOp::sum);
  EXPECT_EQ(from_f16(acc[0]), 2048.0f);
  // ...and 65504 + 16 overflows to inf (the fp32 sum 65520 is the f16 midpoint).
  std::vector<f16> big = {to_f16(65504.0f)};
  reduce(big, std::vector<f16>{to_f16(16.0f)}, ReduceOp::sum);
  EXPECT_EQ(big[0].bits, 0x7c00);
}

TEST(DType, ReduceIntoIntegers) {
  const std::int32_t imax = std::numeric_limits<std::int32_t>::max();
  const std::int32_t imin = std::numeric_limits<std::int32_t>::min();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    std::vector<std::int32_t> acc = {5, -5, imax, imin, 0};
    reduce(acc, std::vector<std::int32_t>{-7, -7, 1, -1, 0}, op);
    if (op == ReduceOp::max) EXPECT_EQ(acc, (std::vector<std::int32_t>{5, -5, imax, -1, 0}));
    else EXPECT_EQ(acc, (std::vector<std::int32_t>{-2, -12, imin, imax, 0}));  // wraps modulo 2^32

    std::vector<std::uint8_t> a8 = {200, 3, 255, 0};
    reduce(a8, std::vector<std::uint8_t>{100, 4, 1, 0}, op);
    if (op == ReduceOp::max) EXPECT_EQ(a8, (std::vector<std::uint8_t>{200, 4, 255, 0}));
    else EXPECT_EQ(a8, (std::vector<std::uint8_t>{44, 7, 0, 0}));  // wraps modulo 256
  }
}

TEST(DType, IncomingPartialIsTheLeftOperand) {
  // max(x, y) is std::max: it returns its left operand unless left < right. +0 and -0 compare
  // equal, so the sign of the result names the operand that won: it must be `in`.
  const float zeros[] = {-0.0f, 0.0f};
  for (float a : zeros)
    for (float b : zeros) {
      std::vector<float> acc = {a};
      reduce(acc, std::vector<float>{b}, ReduceOp::max);
      EXPECT_EQ(std::signbit(acc[0]), std::signbit(b)) << "acc " << a << " in " << b;
      std::vector<bf16> acc_b = {to_bf16(a)};
      reduce(acc_b, std::vector<bf16>{to_bf16(b)}, ReduceOp::max);
      EXPECT_EQ(acc_b[0].bits, to_bf16(b).bits);
      std::vector<f16> acc_h = {to_f16(a)};
      reduce(acc_h, std::vector<f16>{to_f16(b)}, ReduceOp::max);
      EXPECT_EQ(acc_h[0].bits, to_f16(b).bits);
    }
  // A NaN on the left survives std::max; on the right it is dropped.
  std::vector<float> acc = {1.0f, NAN};
  reduce(acc, std::vector<float>{NAN, 1.0f}, ReduceOp::max);
  EXPECT_TRUE(std::isnan(acc[0]));
  EXPECT_EQ(acc[1], 1.0f);
}

TEST(DType, FinishAvg) {
  std::vector<float> f = {3.0f, 1.0f, -9.0f, 0.0f};
  finish_avg(f.data(), f.size(), DType::f32, 3);
  EXPECT_EQ(f, (std::vector<float>{1.0f, 1.0f / 3.0f, -3.0f, 0.0f}));

  std::vector<std::int32_t> i = {7, -7, 6, 2};
  finish_avg(i.data(), i.size(), DType::i32, 2);
  EXPECT_EQ(i, (std::vector<std::int32_t>{3, -3, 3, 1}));  // truncating

  std::vector<std::uint8_t> u = {255, 3, 8};
  finish_avg(u.data(), u.size(), DType::u8, 4);
  EXPECT_EQ(u, (std::vector<std::uint8_t>{63, 0, 2}));

  // 16-bit: the fp32 quotient, rounded once to nearest even.
  const auto tb = kBF16.table();
  const auto th = kF16.table();
  for (float x : {1.0f, 10.0f, 100.0f, -7.0f, 65504.0f}) {
    for (int n : {1, 3, 7}) {
      std::vector<bf16> b = {to_bf16(x)};
      finish_avg(b.data(), 1, DType::bf16, n);
      EXPECT_EQ(b[0].bits, reference_round(tb, from_bf16(to_bf16(x)) / static_cast<float>(n))) << x << "/" << n;
      std::vector<f16> h = {to_f16(x)};
      finish_avg(h.data(), 1, DType::f16, n);
      EXPECT_EQ(h[0].bits, reference_round(th, from_f16(to_f16(x)) / static_cast<float>(n))) << x << "/" << n;
    }
  }
  EXPECT_THROW(finish_avg(f.data(), f.size(), DType::f32, 0), Error);
}

// The average of one contribution is that contribution, bit for bit, as our algorithms return
// at n = 1 before any pass: no division (which would quiet a signaling NaN's pattern), and no
// pass over the buffer, which over MPI alone (lt.Sync in one process) cost a whole gradient
// read and write per step.
TEST(DType, FinishAvgOverOneRankIsTheIdentity) {
  const std::vector<std::uint32_t> bits = {0x7fa00001u /* signaling NaN */, 0x80000000u /* -0 */, 0x3f800000u,
                                           0x00000001u /* subnormal */};
  std::vector<float> f(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) f[i] = std::bit_cast<float>(bits[i]);
  finish_avg(f.data(), f.size(), DType::f32, 1);
  for (std::size_t i = 0; i < bits.size(); ++i) EXPECT_EQ(std::bit_cast<std::uint32_t>(f[i]), bits[i]) << i;
}

}  // namespace
}  // namespace laconic
