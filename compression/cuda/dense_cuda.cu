// The dense reducer's 16-bit wire casts and the small elementwise passes the other reducers use.
// The casts are collectives/dtype.cpp's, in integer arithmetic: bit for bit the CPU's.
#include <cuda_runtime.h>

#include "compression/cuda/common.cuh"
#include "compression/cuda/reducers_cuda.h"

namespace laconic::reducers_cuda {
namespace {

using detail::check_launch;
using detail::grid_for;
using detail::kThreads;

__device__ __forceinline__ std::uint16_t bf16_of(float x) {
  std::uint32_t u = __float_as_uint(x);
  if (isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // stays a quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even on the 16 dropped bits
  return static_cast<std::uint16_t>(u >> 16);
}
__device__ __forceinline__ float float_of_bf16(std::uint16_t h) { return __uint_as_float(std::uint32_t{h} << 16); }

__device__ __forceinline__ std::uint16_t f16_of(float x) {
  const std::uint32_t u = __float_as_uint(x);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // f16 subnormal or zero: round abs / 2^-24 to nearest even
    const float r = rintf(__fmul_rn(__uint_as_float(abs), 16777216.0f));
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(r));
  }
  std::uint32_t v = abs - ((127u - 15u) << 23);
  v += 0x0fffu + ((v >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (v >> 13));
}
__device__ __forceinline__ float float_of_f16(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t man = h & 0x3ffu;
  if (exp == 0) {
    const float v = __fmul_rn(static_cast<float>(man), 1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return __uint_as_float(sign | 0x7f800000u | (man << 13));
  return __uint_as_float(sign | ((exp + 127u - 15u) << 23) | (man << 13));
}

struct ToBf16 {
  __device__ std::uint16_t operator()(float x) const { return bf16_of(x); }
};
struct ToF16 {
  __device__ std::uint16_t operator()(float x) const { return f16_of(x); }
};
struct FromBf16 {
  __device__ float operator()(std::uint16_t h) const { return float_of_bf16(h); }
};
struct FromF16 {
  __device__ float operator()(std::uint16_t h) const { return float_of_f16(h); }
};

// out[i] = f(in[i]); with kVec, 4 elements per step (16-byte float loads or stores, 8-byte
// half loads or stores: both pointers aligned, checked by the caller) and the tail after.
template <bool kVec, typename In, typename Out, typename F>
__global__ void convert_kernel(Out* __restrict__ out, const In* __restrict__ in, std::size_t n, F f) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::size_t done = 0;
  if constexpr (kVec) {
    const std::size_t quads = n / 4;
    for (std::size_t q = i; q < quads; q += stride) {
      if constexpr (sizeof(In) == 4) {  // float -> 16 bit
        const float4 v = reinterpret_cast<const float4*>(in)[q];
        ushort4 h;
        h.x = f(v.x), h.y = f(v.y), h.z = f(v.z), h.w = f(v.w);
        reinterpret_cast<ushort4*>(out)[q] = h;
      } else {  // 16 bit -> float
        const ushort4 h = reinterpret_cast<const ushort4*>(in)[q];
        reinterpret_cast<float4*>(out)[q] = make_float4(f(h.x), f(h.y), f(h.z), f(h.w));
      }
    }
    done = quads * 4;
  }
  for (std::size_t j = done + i; j < n; j += stride) out[j] = f(in[j]);
}

template <typename In, typename Out, typename F>
void convert(Out* out, const In* in, std::size_t n, F f) {
  if (n == 0) return;
  const void* wide = sizeof(In) == 4 ? static_cast<const void*>(in) : static_cast<const void*>(out);
  const void* half = sizeof(In) == 4 ? static_cast<const void*>(out) : static_cast<const void*>(in);
  if (detail::aligned16(wide) && (reinterpret_cast<std::uintptr_t>(half) & 7u) == 0) {
    convert_kernel<true><<<grid_for(n / 4 + 1), kThreads>>>(out, in, n, f);
  } else {
    convert_kernel<false><<<grid_for(n), kThreads>>>(out, in, n, f);
  }
  check_launch();
}

__global__ void add_into_kernel(float* __restrict__ x, const float* __restrict__ e, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = __fadd_rn(x[i], e[i]);
}

__global__ void divide_kernel(float* __restrict__ x, float d, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = __fdiv_rn(x[i], d);
}

__global__ void gather_kernel(float* __restrict__ out, const float* __restrict__ x,
                              const std::uint32_t* __restrict__ index, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t j = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n; j += stride)
    out[j] = x[index[j]];
}

__global__ void scatter_average_kernel(float* __restrict__ x, float* __restrict__ err, const float* __restrict__ avg,
                                       const std::uint32_t* __restrict__ index, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t j = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; j < n; j += stride) {
    const std::uint32_t k = index[j];
    if (err) err[k] = __fsub_rn(x[k], avg[j]);
    x[k] = avg[j];
  }
}

}  // namespace

void to_bf16(std::uint16_t* out, const float* in, std::size_t n) { convert(out, in, n, ToBf16{}); }
void from_bf16(float* out, const std::uint16_t* in, std::size_t n) { convert(out, in, n, FromBf16{}); }
void to_f16(std::uint16_t* out, const float* in, std::size_t n) { convert(out, in, n, ToF16{}); }
void from_f16(float* out, const std::uint16_t* in, std::size_t n) { convert(out, in, n, FromF16{}); }

void add_into(float* x, const float* e, std::size_t n) {
  if (n == 0) return;
  add_into_kernel<<<grid_for(n), kThreads>>>(x, e, n);
  check_launch();
}

void divide(float* x, float d, std::size_t n) {
  if (n == 0) return;
  divide_kernel<<<grid_for(n), kThreads>>>(x, d, n);
  check_launch();
}

void gather(float* out, const float* x, const std::uint32_t* index, std::size_t n) {
  if (n == 0) return;
  gather_kernel<<<grid_for(n), kThreads>>>(out, x, index, n);
  check_launch();
}

void scatter_average(float* x, float* err, const float* avg, const std::uint32_t* index, std::size_t n) {
  if (n == 0) return;
  scatter_average_kernel<<<grid_for(n), kThreads>>>(x, err, avg, index, n);
  check_launch();
}

}  // namespace laconic::reducers_cuda
