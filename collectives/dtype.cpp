#include "collectives/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/check.h"

namespace laconic {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::u8: return 1;
  }
  return 0;
}

const char* name_of(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
  }
  return "?";
}

const char* name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
  }
  return "?";
}

bf16 to_bf16(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return {static_cast<std::uint16_t>((u >> 16) | 0x40)};  // keep it a quiet NaN
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even on the 16 dropped bits
  return {static_cast<std::uint16_t>(u >> 16)};
}

float from_bf16(bf16 x) { return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16); }

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
f16 to_f16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
  const std::uint32_t abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return {static_cast<std::uint16_t>(sign | 0x7e00)};  // NaN
  if (abs >= 0x477ff000) return {static_cast<std::uint16_t>(sign | 0x7c00)}; // rounds to >= 65520: inf
  if (abs < 0x38800000) {
    // Subnormal (or zero) in f16: value = m * 2^-24; round abs/2^-24 to nearest even.
    const float a = std::bit_cast<float>(abs);
    const float scaled = a * 16777216.0f;  // exact: power-of-two scaling
    const float r = std::nearbyint(scaled);  // default rounding mode: nearest even
    return {static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(r))};
  }
  // Normal: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  std::uint32_t v = abs - ((127 - 15) << 23);
  v += 0x0fff + ((v >> 13) & 1);
  return {static_cast<std::uint16_t>(sign | (v >> 13))};
}

float from_f16(f16 x) {
  const std::uint32_t sign = static_cast<std::uint32_t>(x.bits & 0x8000) << 16;
  const std::uint32_t exp = (x.bits >> 10) & 0x1f;
  const std::uint32_t man = x.bits & 0x3ff;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = static_cast<float>(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000 | (man << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

namespace {

template <class T, class Op>
void fold(void* acc, const void* in, std::size_t n, Op op) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  for (std::size_t i = 0; i < n; ++i) a[i] = op(b[i], a[i]);
}

// 16-bit floats: widen, combine in fp32, round back.
template <class H, class Op>
void fold16(void* acc, const void* in, std::size_t n, Op op, float (*widen)(H), H (*narrow)(float)) {
  H* a = static_cast<H*>(acc);
  const H* b = static_cast<const H*>(in);
  for (std::size_t i = 0; i < n; ++i) a[i] = narrow(op(widen(b[i]), widen(a[i])));
}

template <class Op>
void fold_any(void* acc, const void* in, std::size_t n, DType t, Op op) {
  switch (t) {
    case DType::f32: return fold<float>(acc, in, n, op);
    case DType::i32: return fold<std::int32_t>(acc, in, n, op);
    case DType::u8: return fold<std::uint8_t>(acc, in, n, [&](std::uint8_t x, std::uint8_t y) {
      return static_cast<std::uint8_t>(op(x, y));  // sum wraps modulo 256, as in MPI
    });
    case DType::bf16: return fold16<bf16>(acc, in, n, op, from_bf16, to_bf16);
    case DType::f16: return fold16<f16>(acc, in, n, op, from_f16, to_f16);
  }
}

// x + y, except that i32 wraps modulo 2^32 like u8 wraps modulo 256: signed overflow would be
// undefined behaviour, and a reduction must not be.
struct Add {
  template <class T>
  T operator()(T x, T y) const { return static_cast<T>(x + y); }
  std::int32_t operator()(std::int32_t x, std::int32_t y) const {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(x) + static_cast<std::uint32_t>(y));
  }
};

}  // namespace

void reduce_into(void* acc, const void* in, std::size_t count, DType t, ReduceOp op) {
  if (op == ReduceOp::max)
    fold_any(acc, in, count, t, [](auto x, auto y) { return std::max(x, y); });
  else
    fold_any(acc, in, count, t, Add{});
}

void finish_avg(void* data, std::size_t count, DType t, int n) {
  LC_CHECK(n >= 1, "average over ", n, " ranks");
  if (n == 1) return;  // x / 1 is x: no pass over the buffer (a world of one, e.g. lt.Sync alone under mpirun)
  switch (t) {
    case DType::f32: {
      float* x = static_cast<float*>(data);
      const float d = static_cast<float>(n);
      for (std::size_t i = 0; i < count; ++i) x[i] /= d;  // correctly rounded sum / N
      return;
    }
    case DType::i32: {
      auto* x = static_cast<std::int32_t*>(data);
      for (std::size_t i = 0; i < count; ++i) x[i] /= n;
      return;
    }
    case DType::u8: {
      auto* x = static_cast<std::uint8_t*>(data);
      for (std::size_t i = 0; i < count; ++i) x[i] = static_cast<std::uint8_t>(x[i] / n);
      return;
    }
    case DType::bf16: {
      auto* x = static_cast<bf16*>(data);
      for (std::size_t i = 0; i < count; ++i) x[i] = to_bf16(from_bf16(x[i]) / static_cast<float>(n));
      return;
    }
    case DType::f16: {
      auto* x = static_cast<f16*>(data);
      for (std::size_t i = 0; i < count; ++i) x[i] = to_f16(from_f16(x[i]) / static_cast<float>(n));
      return;
    }
  }
}

}  // namespace laconic
