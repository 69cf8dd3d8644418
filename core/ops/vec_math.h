// Small vectorisable math helpers shared by CPU kernels. Each computes in one fixed order that
// does not depend on where its buffer lies in memory (Eigen's reductions and elementwise
// functions peel scalar iterations up to an aligned address, so their results would depend on
// malloc's placement and differ between runs and processes): bitwise-reproducible runs need
// this. Header-only so that callers' loops inline and vectorise.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

namespace laconic::ops::vec {

// Row reductions in kLanes independent partial sums (lane j takes columns j, j + kLanes, ...),
// combined at the end: the compiler turns the lanes into one vector register, where a single
// running sum is a chain of dependent scalar additions (it may not reorder float additions).
// The result differs from the sequential sum by float rounding only.
constexpr int kLanes = 8;

// Floats (not NaN) map to int32 in the same order: non-negative floats order like their bit
// patterns, negative ones in reverse, so flip all but the sign bit of the negative ones. The map is
// its own inverse. Row max is then an integer max, which vectorises: a float max does not under
// GCC's default -ftrapping-math (a float comparison may raise an exception, so it stays scalar).
inline std::int32_t float_order(std::int32_t bits) { return bits ^ ((bits >> 31) & 0x7fffffff); }

inline float row_max(const float* x, int n) {
  std::int32_t lane[kLanes];
  for (int j = 0; j < kLanes; ++j) lane[j] = std::numeric_limits<std::int32_t>::min();
  const int full = n / kLanes * kLanes;
  for (int c = 0; c < full; c += kLanes)
    for (int j = 0; j < kLanes; ++j)
      lane[j] = std::max(lane[j], float_order(std::bit_cast<std::int32_t>(x[c + j])));
  std::int32_t m = lane[0];
  for (int j = 1; j < kLanes; ++j) m = std::max(m, lane[j]);
  for (int c = full; c < n; ++c) m = std::max(m, float_order(std::bit_cast<std::int32_t>(x[c])));
  return std::bit_cast<float>(float_order(m));
}

inline float row_sum(const float* a, int n) {
  float lane[kLanes] = {};
  const int full = n / kLanes * kLanes;
  for (int c = 0; c < full; c += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += a[c + j];
  float s = 0.0f;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  for (int c = full; c < n; ++c) s += a[c];
  return s;
}

inline float row_dot(const float* a, const float* b, int n) {
  float lane[kLanes] = {};
  const int full = n / kLanes * kLanes;
  for (int c = 0; c < full; c += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += a[c + j] * b[c + j];
  float s = 0.0f;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  for (int c = full; c < n; ++c) s += a[c] * b[c];
  return s;
}

// e^x for x <= 0 (softmax exponents after the row max is subtracted), within 2 ulp of std::exp
// (checked over every 7th float in [-104, 0]), in arithmetic the compiler vectorises: libm's expf
// is scalar and was most of the attention softmax's time. Range reduction x = n ln2 + r,
// |r| <= ln2 / 2, with ln2 split in two (the high part has 9 bits, so n * kLn2Hi is exact: Cody &
// Waite 1980); e^r by its Taylor series to r^7 (truncation error < 1e-8 relative for |r| <= 0.347);
// e^x = 2^n e^r with 2^n built in the exponent bits. Below -87.3 (where e^x is within 3% of
// 2^-126, the smallest normal float) it returns 0.
// No comparison or floor on floats: under GCC's default -ftrapping-math either keeps the loop
// scalar. For x <= 0 the bit patterns order like |x|, so the clamp is an unsigned min, and n is
// rounded by adding 1.5 * 2^23 (which leaves round(t) in the low mantissa bits).
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;              // 355/512
  constexpr float kLn2Lo = -2.12194440054690583e-4f;  // ln 2 - kLn2Hi
  constexpr float kRound = 12582912.0f;               // 1.5 * 2^23
  constexpr std::uint32_t kLowest = 0xc2ae999au;      // the bits of -87.3f
  const std::uint32_t xb = std::bit_cast<std::uint32_t>(x);
  const float xc = std::bit_cast<float>(std::min(xb, kLowest));  // max(x, -87.3) for x <= 0
  const float shifted = xc * kLog2e + kRound;
  const float n = shifted - kRound;  // round(x log2 e), in [-126, 0]
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::uint32_t n_int = std::bit_cast<std::uint32_t>(shifted) - std::bit_cast<std::uint32_t>(kRound);
  const float two_n = std::bit_cast<float>((n_int + 127u) << 23);
  const std::uint32_t keep = xb < kLowest ? 0xffffffffu : 0u;
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(p * two_n) & keep);
}

// y[:n] = softmax(x[:n]) (y may be x), exp(x - max) so nothing overflows; returns that max and
// 1/sum, from which a backward recomputes the probabilities (the fused attention's).
struct SoftmaxStats {
  float max, inv;
};
inline SoftmaxStats softmax_row(float* y, const float* x, int n) {
  const float mx = row_max(x, n);
  for (int c = 0; c < n; ++c) y[c] = exp_nonpositive(x[c] - mx);
  const float inv = 1.0f / row_sum(y, n);
  for (int c = 0; c < n; ++c) y[c] *= inv;
  return {mx, inv};
}

}  // namespace laconic::ops::vec
