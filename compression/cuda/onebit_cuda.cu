// 1-bit codec on the device (compression/onebit.h is the specification).
//   encode: (1) per-block partial sums of acc^2 or |acc| in double, acc = x + error in float as
//           on the CPU; (2) one block adds the partials in index order and writes the scale;
//           (3) pack: one thread per output byte (8 elements), sign bits and error = acc -
//           (+-scale), reading the scale from where (2) wrote it (so no host round trip).
//   Passes (2) and (3) re-read acc = x + error instead of storing it: a stored acc would be one
//   more stream of writes. Bytes moved with error feedback: 8n (sum) + 12n + n/8 (pack).
//   decode: one thread per byte, 8 outputs.
// Bits and residual arithmetic are the CPU's exactly (sign(0) = sign(NaN) = +1, element i in bit
// i % 8 of byte i / 8); the sum runs in another order than the CPU's 8 lanes, so the scale matches
// it to float rounding (double partials: in practice the same float).
#include <cuda_runtime.h>

#include "compression/cuda/common.cuh"
#include "compression/cuda/reducers_cuda.h"

namespace laconic::reducers_cuda {
namespace {

using detail::check_launch;
using detail::kThreads;

// Partial sums: at most this many blocks, a number that depends on n only (determinism).
constexpr std::size_t kMaxPartials = 1024;
constexpr std::size_t kPerThread = 8;  // elements per thread before the grid starts striding

unsigned partial_blocks(std::size_t n) {
  const std::size_t per_block = kThreads * kPerThread;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min(kMaxPartials, (n + per_block - 1) / per_block)));
}

__device__ __forceinline__ float flip(float s, bool negative) {
  return __uint_as_float(__float_as_uint(s) ^ (std::uint32_t{negative} << 31));
}

template <bool kMeanAbs>
__device__ __forceinline__ double term(float a) {
  const double d = static_cast<double>(a);
  return kMeanAbs ? fabs(d) : __dmul_rn(d, d);
}

// partial[block] = sum of term(x + e) over this block's grid-stride share. With kVec (x and e
// 16-byte aligned) four elements per load.
template <bool kMeanAbs, bool kVec>
__global__ void scale_partial_kernel(double* __restrict__ partial, const float* __restrict__ x,
                                     const float* __restrict__ e, std::size_t n) {
  __shared__ double scratch[kThreads / detail::kWarp];
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t t = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  double s = 0.0;
  std::size_t done = 0;
  if constexpr (kVec) {
    const std::size_t quads = n / 4;
    for (std::size_t q = t; q < quads; q += stride) {
      float4 v = reinterpret_cast<const float4*>(x)[q];
      if (e) {
        const float4 w = reinterpret_cast<const float4*>(e)[q];
        v.x = __fadd_rn(v.x, w.x), v.y = __fadd_rn(v.y, w.y), v.z = __fadd_rn(v.z, w.z), v.w = __fadd_rn(v.w, w.w);
      }
      s = __dadd_rn(s, __dadd_rn(__dadd_rn(term<kMeanAbs>(v.x), term<kMeanAbs>(v.y)),
                                 __dadd_rn(term<kMeanAbs>(v.z), term<kMeanAbs>(v.w))));
    }
    done = quads * 4;
  }
  for (std::size_t i = done + t; i < n; i += stride) {
    const float a = e ? __fadd_rn(x[i], e[i]) : x[i];
    s = __dadd_rn(s, term<kMeanAbs>(a));
  }
  s = detail::block_sum<kThreads>(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// One block: the partials in index order, then the scale (onebit_scale's formula).
__global__ void scale_final_kernel(std::uint8_t* __restrict__ scale_out, const double* __restrict__ partial,
                                   unsigned blocks, std::size_t n, bool mean_abs) {
  __shared__ double scratch[kThreads / detail::kWarp];
  double s = 0.0;
  for (unsigned b = threadIdx.x; b < blocks; b += blockDim.x) s = __dadd_rn(s, partial[b]);
  s = detail::block_sum<kThreads>(s, scratch);
  if (threadIdx.x != 0) return;
  float scale = 0.0f;
  if (n > 0) {
    const double mean = __ddiv_rn(s, static_cast<double>(n));
    scale = static_cast<float>(mean_abs ? mean : __dsqrt_rn(mean));
  }
  detail::store_unaligned_float(scale_out, scale);
}

// Byte t of bits: the signs of elements 8t .. 8t + 7 (those < n; 0 bits past n and past the
// last element up to bits_bytes), error updated for them. With kVec (x and e 16-byte aligned),
// whole bytes load and store as two float4.
template <bool kVec>
__global__ void pack_kernel(std::uint8_t* __restrict__ bits, std::size_t bits_bytes, float* __restrict__ e,
                            const float* __restrict__ x, std::size_t n, const std::uint8_t* __restrict__ scale_at) {
  const float s = detail::load_unaligned_float(scale_at);
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t t = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; t < bits_bytes; t += stride) {
    const std::size_t i = 8 * t;
    std::uint32_t byte = 0;
    if (kVec && i + 8 <= n) {
      const float4* x4 = reinterpret_cast<const float4*>(x + i);
      alignas(16) float a[8];
      *reinterpret_cast<float4*>(a) = x4[0];
      *reinterpret_cast<float4*>(a + 4) = x4[1];
      if (e) {
        const float4* e4 = reinterpret_cast<const float4*>(e + i);
        alignas(16) float r[8];
        *reinterpret_cast<float4*>(r) = e4[0];
        *reinterpret_cast<float4*>(r + 4) = e4[1];
#pragma unroll
        for (int k = 0; k < 8; ++k) a[k] = __fadd_rn(a[k], r[k]);
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const bool neg = a[k] < 0.0f;
        byte |= std::uint32_t{neg} << k;
        if (e) a[k] = __fsub_rn(a[k], flip(s, neg));
      }
      if (e) {
        float4* o4 = reinterpret_cast<float4*>(e + i);
        o4[0] = *reinterpret_cast<const float4*>(a);
        o4[1] = *reinterpret_cast<const float4*>(a + 4);
      }
    } else if (i < n) {
      const std::size_t m = n - i < 8 ? n - i : 8;
      for (std::size_t k = 0; k < m; ++k) {
        const float a = e ? __fadd_rn(x[i + k], e[i + k]) : x[i + k];
        const bool neg = a < 0.0f;
        byte |= std::uint32_t{neg} << k;
        if (e) e[i + k] = __fsub_rn(a, flip(s, neg));
      }
    }
    bits[t] = static_cast<std::uint8_t>(byte);
  }
}

// out[i] (+)= (scale / divisor) * sign_i, byte t covering elements 8t .. 8t + 7.
template <bool kAdd, bool kVec>
__global__ void unpack_kernel(float* __restrict__ out, std::size_t n, const std::uint8_t* __restrict__ bits,
                              const std::uint8_t* __restrict__ scale_at, float divisor) {
  float s = detail::load_unaligned_float(scale_at);
  if (divisor != 1.0f) s = __fdiv_rn(s, divisor);
  const std::size_t bytes = (n + 7) / 8;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t t = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; t < bytes; t += stride) {
    const std::uint32_t b = bits[t];
    const std::size_t i = 8 * t;
    if (kVec && i + 8 <= n) {
      alignas(16) float v[8];
      float4* o4 = reinterpret_cast<float4*>(out + i);
      if (kAdd) {
        *reinterpret_cast<float4*>(v) = o4[0];
        *reinterpret_cast<float4*>(v + 4) = o4[1];
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float d = flip(s, (b >> k) & 1u);
        v[k] = kAdd ? __fadd_rn(v[k], d) : d;
      }
      o4[0] = *reinterpret_cast<const float4*>(v);
      o4[1] = *reinterpret_cast<const float4*>(v + 4);
    } else {
      const std::size_t m = n - i < 8 ? n - i : 8;
      for (std::size_t k = 0; k < m; ++k) {
        const float d = flip(s, (b >> k) & 1u);
        out[i + k] = kAdd ? __fadd_rn(out[i + k], d) : d;
      }
    }
  }
}

}  // namespace

std::size_t onebit_scratch_doubles() { return kMaxPartials; }

void onebit_encode(std::uint8_t* scale_out, std::uint8_t* bits, std::size_t bits_bytes, float* error,
                   const float* x, std::size_t n, bool mean_abs, double* scratch) {
  LC_CHECK(bits_bytes >= (n + 7) / 8, n, " signs need ", (n + 7) / 8, " bytes, got ", bits_bytes);
  const unsigned blocks = partial_blocks(n);
  const bool vec = detail::aligned16(x) && (error == nullptr || detail::aligned16(error));
  if (mean_abs) {
    if (vec) scale_partial_kernel<true, true><<<blocks, kThreads>>>(scratch, x, error, n);
    else scale_partial_kernel<true, false><<<blocks, kThreads>>>(scratch, x, error, n);
  } else {
    if (vec) scale_partial_kernel<false, true><<<blocks, kThreads>>>(scratch, x, error, n);
    else scale_partial_kernel<false, false><<<blocks, kThreads>>>(scratch, x, error, n);
  }
  check_launch();
  scale_final_kernel<<<1, kThreads>>>(scale_out, scratch, blocks, n, mean_abs);
  check_launch();
  if (bits_bytes == 0) return;
  const unsigned grid = detail::grid_for(bits_bytes);
  if (vec) pack_kernel<true><<<grid, kThreads>>>(bits, bits_bytes, error, x, n, scale_out);
  else pack_kernel<false><<<grid, kThreads>>>(bits, bits_bytes, error, x, n, scale_out);
  check_launch();
}

void onebit_decode(float* out, std::size_t n, const std::uint8_t* bits, const std::uint8_t* scale, float divisor,
                   bool add) {
  if (n == 0) return;
  const unsigned grid = detail::grid_for((n + 7) / 8);
  const bool vec = detail::aligned16(out);
  if (add) {
    if (vec) unpack_kernel<true, true><<<grid, kThreads>>>(out, n, bits, scale, divisor);
    else unpack_kernel<true, false><<<grid, kThreads>>>(out, n, bits, scale, divisor);
  } else {
    if (vec) unpack_kernel<false, true><<<grid, kThreads>>>(out, n, bits, scale, divisor);
    else unpack_kernel<false, false><<<grid, kThreads>>>(out, n, bits, scale, divisor);
  }
  check_launch();
}

}  // namespace laconic::reducers_cuda
