// The kernel behind finish_avg_cuda.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "collectives/cuda/finish_avg_cuda.h"
#include "core/check.h"
#include "core/cuda/cuda_check.h"

namespace laconic::cuda {
namespace {

// Element-wise ops on raw storage: the 16-bit floats travel as their bit patterns.
struct DivF32 {
  __device__ void operator()(float& x, float d) const { x = x / d; }  // IEEE division (no fast math)
};
struct DivBf16 {
  __device__ void operator()(__nv_bfloat16& x, float d) const { x = __float2bfloat16_rn(__bfloat162float(x) / d); }
};
struct DivF16 {
  __device__ void operator()(__half& x, float d) const { x = __float2half_rn(__half2float(x) / d); }
};
struct DivI32 {
  int n;
  __device__ void operator()(std::int32_t& x, float) const { x /= n; }
};
struct DivU8 {
  int n;
  __device__ void operator()(std::uint8_t& x, float) const { x = static_cast<std::uint8_t>(x / n); }
};

template <class T, class Op>
__global__ void divide_kernel(T* x, std::size_t count, float d, Op op) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    op(x[i], d);
}

template <class T, class Op>
void launch(void* data, std::size_t count, float d, Op op, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  constexpr std::size_t kMaxBlocks = 4096;  // grid-stride beyond this: every SM stays busy
  const std::size_t blocks = std::min(kMaxBlocks, (count + kThreads - 1) / kThreads);
  divide_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<T*>(data), count, d, op);
  LC_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void finish_avg(void* data, std::size_t count, DType t, int n, void* stream) {
  LC_CHECK(n >= 1, "average over ", n, " ranks");
  if (count == 0 || n == 1) return;  // x / 1 == x for every type (and every non-NaN bit pattern)
  const auto s = static_cast<cudaStream_t>(stream);
  const float d = static_cast<float>(n);
  switch (t) {
    case DType::f32: return launch<float>(data, count, d, DivF32{}, s);
    case DType::bf16: return launch<__nv_bfloat16>(data, count, d, DivBf16{}, s);
    case DType::f16: return launch<__half>(data, count, d, DivF16{}, s);
    case DType::i32: return launch<std::int32_t>(data, count, d, DivI32{n}, s);
    case DType::u8: return launch<std::uint8_t>(data, count, d, DivU8{n}, s);
  }
  LC_CHECK(false, "finish_avg: unknown dtype ", static_cast<int>(t));
}

}  // namespace laconic::cuda
