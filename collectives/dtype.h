// Element types on the wire and the one place that knows how to reduce them.
// bf16 and f16 are stored as their bit patterns; reductions widen to fp32, combine, and round
// back to nearest-even, so a reduced bf16/f16 value is the correctly rounded fp32 result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace laconic {

enum class DType : std::uint8_t { f32, bf16, f16, i32, u8 };
enum class ReduceOp { sum, avg, max };

struct bf16 {
  std::uint16_t bits = 0;
};
struct f16 {
  std::uint16_t bits = 0;
};

std::size_t dtype_size(DType t);
const char* name_of(DType t);
const char* name_of(ReduceOp op);

// Conversions (round to nearest even; NaN stays NaN; f16 overflow gives inf, underflow subnormals).
bf16 to_bf16(float x);
float from_bf16(bf16 x);
f16 to_f16(float x);
float from_f16(f16 x);

// acc[i] = in[i] (op) acc[i] for count elements of type t. The incoming partial is the LEFT
// operand, so a chain of folds computes ((x0 + x1) + x2) + ... in the order the algorithm
// documents. avg folds like sum; the caller divides once with finish_avg().
void reduce_into(void* acc, const void* in, std::size_t count, DType t, ReduceOp op);
// x[i] /= n (integers: truncating division). Done once, by one rank, so every rank gets its bits.
void finish_avg(void* data, std::size_t count, DType t, int n);

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<bf16>() { return DType::bf16; }
template <> constexpr DType dtype_of<f16>() { return DType::f16; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<std::uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<std::byte>() { return DType::u8; }

// A typed view of a buffer: every collective takes these.
struct Buf {
  void* data = nullptr;
  std::size_t count = 0;  // elements
  DType dtype = DType::f32;

  std::size_t bytes() const { return count * dtype_size(dtype); }
  Buf sub(std::size_t offset, std::size_t n) const {
    return {static_cast<std::byte*>(data) + offset * dtype_size(dtype), n, dtype};
  }
};

struct CBuf {
  const void* data = nullptr;
  std::size_t count = 0;
  DType dtype = DType::f32;

  CBuf() = default;
  CBuf(const void* d, std::size_t n, DType t) : data(d), count(n), dtype(t) {}
  CBuf(const Buf& b) : data(b.data), count(b.count), dtype(b.dtype) {}  // NOLINT: a view narrows to const
  std::size_t bytes() const { return count * dtype_size(dtype); }
  CBuf sub(std::size_t offset, std::size_t n) const {
    return {static_cast<const std::byte*>(data) + offset * dtype_size(dtype), n, dtype};
  }
};

template <class T>
Buf buf(std::span<T> s) {
  return {s.data(), s.size(), dtype_of<T>()};
}
template <class T>
CBuf cbuf(std::span<const T> s) {
  return {s.data(), s.size(), dtype_of<T>()};
}

}  // namespace laconic
