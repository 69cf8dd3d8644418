// Helpers shared by the reducers' CUDA files (nvcc only).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/ops/cuda/cuda_check.h"

namespace laconic::reducers_cuda::detail {

constexpr int kThreads = 256;  // block size of the streaming kernels
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Blocks for a grid-stride loop over `items` work items: one per kThreads items, capped so huge
// inputs are covered by striding (the cap keeps ~8 resident blocks per SM on a 132-SM H200).
inline unsigned grid_for(std::size_t items, std::size_t cap = 2048) {
  const std::size_t blocks = (items + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min(blocks, cap)));
}

inline void check_launch() { LC_CUDA_CHECK(cudaGetLastError()); }

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// |x| as the 31-bit key of its pattern: the order of the keys is the order of the magnitudes,
// with NaN above inf (topk.h's rule).
__device__ __forceinline__ std::uint32_t key_of(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// Sum of a double over a block of kBlock threads in a fixed order (warp shuffles in a fixed
// pattern, then the warps' sums in warp order); every thread gets the result. `scratch` holds
// kBlock / 32 doubles; the trailing barrier lets the caller reuse it at once.
template <int kBlock>
__device__ double block_sum(double v, double* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int off = kWarp / 2; off > 0; off /= 2) v = __dadd_rn(v, __shfl_xor_sync(kFullMask, v, off));
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  constexpr int kWarps = kBlock / kWarp;
  double s = 0.0;
  for (int w = 0; w < kWarps; ++w) s = __dadd_rn(s, scratch[w]);  // same order in every thread
  __syncthreads();
  return s;
}

// 4 bytes at any alignment (the 1-bit wire blocks put a float scale at odd offsets).
__device__ __forceinline__ float load_unaligned_float(const std::uint8_t* p) {
  const std::uint32_t u = std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
                          (std::uint32_t{p[3]} << 24);
  return __uint_as_float(u);
}
__device__ __forceinline__ void store_unaligned_float(std::uint8_t* p, float v) {
  const std::uint32_t u = __float_as_uint(v);
  p[0] = static_cast<std::uint8_t>(u);
  p[1] = static_cast<std::uint8_t>(u >> 8);
  p[2] = static_cast<std::uint8_t>(u >> 16);
  p[3] = static_cast<std::uint8_t>(u >> 24);
}

}  // namespace laconic::reducers_cuda::detail
