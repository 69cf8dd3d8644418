// The kernels of optimizers/cuda/fused.h.
//
// One generic kernel, chunk_kernel, walks the chunk table of a FusedLayout: block b updates
// chunk b (at most kChunk = 4096 elements of one tensor inside one 4096-aligned window). Its 256
// threads each take up to 4 float4 lanes of the window (loads of every stream first, then the
// arithmetic, then the stores: 4 x 16 bytes in flight per stream and thread), and the at most 6
// elements before the first and after the last 16-byte boundary of the chunk one each. What the
// elements undergo is the Op: the per-element formula of one optimizer pass, which can also add
// to two double sums that the block reduces and writes to partials[chunk] (trust ratios).
// trust_kernel then sums each tensor's partials (one block per tensor, fixed order) and turns
// them into that tensor's step scale.
//
// Arithmetic: every float operation is an explicit round-to-nearest intrinsic (__fmul_rn,
// __fadd_rn, __fdiv_rn, __fsqrt_rn). nvcc contracts a * b + c into one fma by default, which
// rounds once instead of twice; the CPU reference is compiled with -ffp-contract=off, so the
// intrinsics (never contracted) are what make the kernels round exactly as it does.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/check.h"
#include "core/cuda/cuda_check.h"
#include "core/device.h"
#include "optimizers/cuda/fused.h"

namespace laconic::optim_cuda {
namespace {

using fused::Chunk;
using fused::kChunk;
using fused::Segment;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLanes = static_cast<int>(kChunk / 4 / kThreads);  // float4 lanes per thread and chunk
static_assert(kChunk % (4 * kThreads) == 0, "a chunk window is a whole number of block passes");

// Blocks of the global sum of squares: fixed (given n), so its summation order is too.
constexpr int kNormBlocks = 1024;

__device__ __forceinline__ float& at(float4& v, int c) { return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w; }

// x^2 added to acc in double (the square of a float is exact in double, as in norms.h).
__device__ __forceinline__ void add_sq(double& acc, float x) {
  const double d = x;
  acc = __dadd_rn(acc, __dmul_rn(d, d));
}

// Sums a[0] and a[1] over the block in a fixed tree order (shuffles inside each warp, then warp
// 0 over the warps' sums): deterministic. The totals are valid in thread 0. Every thread of the
// block must call it (it synchronises).
__device__ void block_sum2(double (&a)[2]) {
  __shared__ double warp_sums[kWarps][2];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int k = 0; k < 2; ++k)
#pragma unroll
    for (int off = 16; off > 0; off /= 2) a[k] = __dadd_rn(a[k], __shfl_down_sync(0xffffffffu, a[k], off));
  if (lane == 0) {
    warp_sums[warp][0] = a[0];
    warp_sums[warp][1] = a[1];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      a[k] = lane < kWarps ? warp_sums[lane][k] : 0.0;
#pragma unroll
      for (int off = 16; off > 0; off /= 2) a[k] = __dadd_rn(a[k], __shfl_down_sync(0xffffffffu, a[k], off));
    }
  }
}

// What an Op knows about the tensor of the chunk it works on.
struct TensorInfo {
  bool decay;   // ParamGroup::decay
  float scale;  // the tensor's step scale from trust_kernel (passes that have one)
};

// NIO streams read and written in place, NIN streams only read. (Arrays of at least one element:
// C++ has no empty ones; the unused slot stays nullptr.)
template <int N>
constexpr int kSlots = N > 0 ? N : 1;
template <int NIO, int NIN>
struct Streams {
  float* io[kSlots<NIO>];
  const float* in[kSlots<NIN>];
};

// Op: static constexpr bool kReduce (adds to acc, block sums go to partials[chunk]),
// kDecayOnly (chunks of no_decay tensors are skipped whole); and
// __device__ void operator()(float* x, const float* y, const TensorInfo&, double* acc) const
// for one element: x[NIO] in/out, y[NIN] in.
template <int NIO, int NIN, class Op>
__global__ void __launch_bounds__(kThreads)
    chunk_kernel(Streams<NIO, NIN> s, double* __restrict__ partials, const Chunk* __restrict__ chunks,
                 const float* __restrict__ scales, Op op) {
  const Chunk ch = chunks[blockIdx.x];
  const TensorInfo t{ch.decay != 0, scales ? scales[ch.tensor] : 0.0f};
  if (Op::kDecayOnly && !t.decay) return;  // the whole block; these partials are never read
  double acc[2] = {0.0, 0.0};

  // [a, e): the float4-aligned body of [begin, end) (empty when a >= e: then all is scalar).
  const std::size_t begin = ch.begin, end = begin + ch.numel;
  const std::size_t a = (begin + 3) / 4 * 4, e = end / 4 * 4;
  const bool vec = a < e;
  const unsigned head = vec ? static_cast<unsigned>(a - begin) : ch.numel;
  const unsigned scalars = vec ? head + static_cast<unsigned>(end - e) : ch.numel;  // <= 6
  if (threadIdx.x < scalars) {
    const std::size_t i = threadIdx.x < head ? begin + threadIdx.x : e + (threadIdx.x - head);
    float x[kSlots<NIO>], y[kSlots<NIN>];
#pragma unroll
    for (int j = 0; j < NIO; ++j) x[j] = s.io[j][i];
#pragma unroll
    for (int j = 0; j < NIN; ++j) y[j] = s.in[j][i];
    op(x, y, t, acc);
#pragma unroll
    for (int j = 0; j < NIO; ++j) s.io[j][i] = x[j];
  }
  if (vec) {
    const std::size_t l0 = a / 4, l1 = e / 4;  // float4 lanes of the body
    float4 xv[kLanes][kSlots<NIO>], yv[kLanes][kSlots<NIN>];
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      const std::size_t l = l0 + threadIdx.x + static_cast<std::size_t>(k) * kThreads;
      if (l < l1) {
#pragma unroll
        for (int j = 0; j < NIO; ++j) xv[k][j] = reinterpret_cast<const float4*>(s.io[j])[l];
#pragma unroll
        for (int j = 0; j < NIN; ++j) yv[k][j] = reinterpret_cast<const float4*>(s.in[j])[l];
      }
    }
#pragma unroll
    for (int k = 0; k < kLanes; ++k) {
      const std::size_t l = l0 + threadIdx.x + static_cast<std::size_t>(k) * kThreads;
      if (l < l1) {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          float x[kSlots<NIO>], y[kSlots<NIN>];
#pragma unroll
          for (int j = 0; j < NIO; ++j) x[j] = at(xv[k][j], c);
#pragma unroll
          for (int j = 0; j < NIN; ++j) y[j] = at(yv[k][j], c);
          op(x, y, t, acc);
#pragma unroll
          for (int j = 0; j < NIO; ++j) at(xv[k][j], c) = x[j];
        }
#pragma unroll
        for (int j = 0; j < NIO; ++j) reinterpret_cast<float4*>(s.io[j])[l] = xv[k][j];
      }
    }
  }
  if constexpr (Op::kReduce) {
    block_sum2(acc);
    if (threadIdx.x == 0) {
      partials[2 * static_cast<std::size_t>(blockIdx.x)] = acc[0];
      partials[2 * static_cast<std::size_t>(blockIdx.x) + 1] = acc[1];
    }
  }
}

// One block per tensor: sums the tensor's chunk partials (fixed order) and writes its step scale,
// trust(sum0, sum1) for decay tensors and float(lr) for the others (lr * trust 1, as the CPU).
template <class Trust>
__global__ void __launch_bounds__(kThreads)
    trust_kernel(float* __restrict__ scales, const double* __restrict__ partials,
                 const Segment* __restrict__ segments, Trust trust) {
  const Segment seg = segments[blockIdx.x];
  double acc[2] = {0.0, 0.0};
  if (seg.decay)
    for (std::uint32_t k = threadIdx.x; k < seg.num_chunks; k += kThreads) {
      const double* p = partials + 2 * (static_cast<std::size_t>(seg.first_chunk) + k);
      acc[0] = __dadd_rn(acc[0], p[0]);
      acc[1] = __dadd_rn(acc[1], p[1]);
    }
  block_sum2(acc);
  if (threadIdx.x == 0) scales[blockIdx.x] = seg.decay ? trust(acc[0], acc[1]) : static_cast<float>(trust.lr);
}

// ---- SGD (sgd.cpp) ----
template <bool kMomentum>
struct SgdOp {
  static constexpr bool kReduce = false, kDecayOnly = false;
  SgdCoefs c;
  // x = {w, b} (b only with momentum), y = {grad}
  __device__ void operator()(float* x, const float* y, const TensorInfo& t, double*) const {
    float& w = x[0];
    const float wd = t.decay ? c.wd : 0.0f;
    float g = __fadd_rn(y[0], __fmul_rn(wd, w));
    if constexpr (kMomentum) {
      float& b = x[1];
      b = __fadd_rn(__fmul_rn(c.mu, b), g);
      g = c.nesterov ? __fadd_rn(g, __fmul_rn(c.mu, b)) : b;
    }
    w = __fsub_rn(w, __fmul_rn(c.lr, g));
  }
};

// ---- AdamW (adamw.cpp) ----
struct AdamWOp {
  static constexpr bool kReduce = false, kDecayOnly = false;
  AdamWCoefs c;
  // x = {w, m, v}, y = {g}
  __device__ void operator()(float* x, const float* y, const TensorInfo& t, double*) const {
    float &w = x[0], &m = x[1], &v = x[2];
    const float g = y[0];
    if (t.decay) w = __fmul_rn(w, c.decay);
    m = __fadd_rn(__fmul_rn(m, c.b1), __fmul_rn(c.one_minus_b1, g));
    v = __fadd_rn(__fmul_rn(v, c.b2), __fmul_rn(__fmul_rn(c.one_minus_b2, g), g));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), c.bc2_sqrt), c.eps);
    w = __fadd_rn(w, __fmul_rn(-c.step_size, __fdiv_rn(m, denom)));
  }
};

// ---- LARS (lars.cpp) ----
// Pass 1 (decay tensors): ||w||^2 and ||g||^2 per chunk. y = {w, g}.
struct LarsNormOp {
  static constexpr bool kReduce = true, kDecayOnly = true;
  __device__ void operator()(float*, const float* y, const TensorInfo&, double* acc) const {
    add_sq(acc[0], y[0]);
    add_sq(acc[1], y[1]);
  }
};
// trust = eta ||w|| / (||g|| + wd ||w|| + eps), 1 when either norm is 0; scale = float(lr * trust).
struct LarsTrust {
  double lr, eta, wd, eps;
  __device__ float operator()(double w_sq, double g_sq) const {
    const double w_norm = __dsqrt_rn(w_sq), g_norm = __dsqrt_rn(g_sq);
    double trust = 1.0;
    if (w_norm != 0.0 && g_norm != 0.0)
      trust = __ddiv_rn(__dmul_rn(eta, w_norm), __dadd_rn(__dadd_rn(g_norm, __dmul_rn(wd, w_norm)), eps));
    return static_cast<float>(__dmul_rn(lr, trust));
  }
};
// Pass 2: m = mu m + scale (g + wd w); w -= m. x = {w, m}, y = {g}.
struct LarsUpdateOp {
  static constexpr bool kReduce = false, kDecayOnly = false;
  float mu, wd;
  __device__ void operator()(float* x, const float* y, const TensorInfo& t, double*) const {
    float &w = x[0], &m = x[1];
    const float d = t.decay ? wd : 0.0f;
    m = __fadd_rn(__fmul_rn(mu, m), __fmul_rn(t.scale, __fadd_rn(y[0], __fmul_rn(d, w))));
    w = __fsub_rn(w, m);
  }
};

// ---- LAMB (lamb.cpp) ----
// u = m_hat / (sqrt(v_hat) + eps) + wd w, exactly lamb.cpp's lamb_update().
__device__ __forceinline__ float lamb_update(float m, float v, float w, float wd, const LambCoefs& c) {
  return __fadd_rn(__fdiv_rn(__fmul_rn(m, c.inv_bc1), __fadd_rn(__fsqrt_rn(__fmul_rn(v, c.inv_bc2)), c.eps)),
                   __fmul_rn(wd, w));
}
// Pass 1: moments; for adapted decay tensors ||u||^2 and ||w||^2 per chunk (left 0 otherwise:
// trust 1). x = {m, v}, y = {g, w}.
struct LambMomentsOp {
  static constexpr bool kReduce = true, kDecayOnly = false;
  LambCoefs c;
  __device__ void operator()(float* x, const float* y, const TensorInfo& t, double* acc) const {
    float &m = x[0], &v = x[1];
    const float g = y[0], w = y[1];
    m = __fadd_rn(__fmul_rn(m, c.b1), __fmul_rn(c.one_minus_b1, g));
    v = __fadd_rn(__fmul_rn(v, c.b2), __fmul_rn(__fmul_rn(c.one_minus_b2, g), g));
    if (t.decay && c.adapt) {
      add_sq(acc[0], lamb_update(m, v, w, c.wd, c));
      add_sq(acc[1], w);
    }
  }
};
// trust = ||w|| / ||u|| (1 when either is 0), clamped where a bound is set; scale = float(lr * trust).
struct LambTrust {
  double lr, clamp_min, clamp_max;
  __device__ float operator()(double u_sq, double w_sq) const {
    double trust = 1.0;
    if (w_sq > 0.0 && u_sq > 0.0) {
      trust = __ddiv_rn(__dsqrt_rn(w_sq), __dsqrt_rn(u_sq));
      if (clamp_min > 0.0) trust = trust < clamp_min ? clamp_min : trust;  // std::max(trust, clamp_min)
      if (clamp_max > 0.0) trust = clamp_max < trust ? clamp_max : trust;  // std::min(trust, clamp_max)
    }
    return static_cast<float>(__dmul_rn(lr, trust));
  }
};
// Pass 2: w -= scale u. x = {w}, y = {m, v}.
struct LambApplyOp {
  static constexpr bool kReduce = false, kDecayOnly = false;
  LambCoefs c;
  __device__ void operator()(float* x, const float* y, const TensorInfo& t, double*) const {
    float& w = x[0];
    w = __fsub_rn(w, __fmul_rn(t.scale, lamb_update(y[0], y[1], w, t.decay ? c.wd : 0.0f, c)));
  }
};

// ---- whole-buffer norm and scaling (clip.cpp) ----
// Elements of x before its first 16-byte boundary, at most n (x is float-aligned).
__device__ __forceinline__ std::size_t head_of(const float* x, std::size_t n) {
  const std::size_t h = (4 - (reinterpret_cast<std::uintptr_t>(x) / sizeof(float)) % 4) % 4;
  return h < n ? h : n;
}

// partials[blockIdx.x] = the block's sum of x^2: the unaligned head and tail go to thread 0, the
// float4 body is strided over the grid.
__global__ void __launch_bounds__(kThreads) sum_squares_kernel(double* __restrict__ partials, const float* __restrict__ x,
                                                               std::size_t n) {
  const std::size_t head = head_of(x, n), lanes = (n - head) / 4, tail = head + 4 * lanes;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  double acc[2] = {0.0, 0.0};
  if (tid == 0) {
    for (std::size_t i = 0; i < head; ++i) add_sq(acc[0], x[i]);
    for (std::size_t i = tail; i < n; ++i) add_sq(acc[0], x[i]);
  }
  const float4* body = reinterpret_cast<const float4*>(x + head);
#pragma unroll 4
  for (std::size_t l = tid; l < lanes; l += stride) {
    const float4 v = body[l];
    add_sq(acc[0], v.x);
    add_sq(acc[0], v.y);
    add_sq(acc[0], v.z);
    add_sq(acc[0], v.w);
  }
  block_sum2(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc[0];
}

// *total = sum of partials[0, count), one block, fixed order.
__global__ void __launch_bounds__(kThreads) sum_partials_kernel(double* __restrict__ total,
                                                                const double* __restrict__ partials, int count) {
  double acc[2] = {0.0, 0.0};
  for (int k = static_cast<int>(threadIdx.x); k < count; k += kThreads) acc[0] = __dadd_rn(acc[0], partials[k]);
  block_sum2(acc);
  if (threadIdx.x == 0) *total = acc[0];
}

__global__ void __launch_bounds__(kThreads) scale_kernel(float* __restrict__ x, float c, std::size_t n) {
  const std::size_t head = head_of(x, n), lanes = (n - head) / 4, tail = head + 4 * lanes;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kThreads;
  if (tid == 0) {
    for (std::size_t i = 0; i < head; ++i) x[i] = __fmul_rn(x[i], c);
    for (std::size_t i = tail; i < n; ++i) x[i] = __fmul_rn(x[i], c);
  }
  float4* body = reinterpret_cast<float4*>(x + head);
  for (std::size_t l = tid; l < lanes; l += stride) {
    float4 v = body[l];
    v.x = __fmul_rn(v.x, c);
    v.y = __fmul_rn(v.y, c);
    v.z = __fmul_rn(v.z, c);
    v.w = __fmul_rn(v.w, c);
    body[l] = v;
  }
}

// ---- Muon (muon.cpp): per hidden matrix, elementwise with an optional transpose ----
__global__ void __launch_bounds__(kThreads)
    muon_momentum_kernel(float* __restrict__ m, float* __restrict__ x, const float* __restrict__ g, int rows, int cols,
                         float mu, float one_minus_mu, bool nesterov, bool transpose) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * kThreads) {
    const float b = __fadd_rn(__fmul_rn(mu, m[i]), __fmul_rn(one_minus_mu, g[i]));
    m[i] = b;
    const float u = nesterov ? __fadd_rn(__fmul_rn(one_minus_mu, g[i]), __fmul_rn(mu, b)) : b;
    const std::size_t r = i / static_cast<std::size_t>(cols), c = i % static_cast<std::size_t>(cols);
    x[transpose ? c * static_cast<std::size_t>(rows) + r : i] = u;
  }
}

__global__ void __launch_bounds__(kThreads)
    muon_apply_kernel(float* __restrict__ w, const float* __restrict__ o, int rows, int cols, float decay, float step,
                      bool transpose) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * kThreads) {
    const std::size_t r = i / static_cast<std::size_t>(cols), c = i % static_cast<std::size_t>(cols);
    const float oi = o[transpose ? c * static_cast<std::size_t>(rows) + r : i];
    w[i] = __fsub_rn(__fmul_rn(w[i], decay), __fmul_rn(step, oi));
  }
}

// ---- launching ----
void check_launch() { LC_CUDA_CHECK(cudaGetLastError()); }

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// chunk_kernel over every chunk of `layout` (one block each).
template <int NIO, int NIN, class Op>
void run_chunks(const Streams<NIO, NIN>& s, double* partials, const FusedLayout& layout, const float* scales,
                const Op& op) {
  if (layout.num_chunks() == 0) return;
  // Chunk boundaries are 16-byte aligned relative to the buffer start; the buffers must be too.
  for (int j = 0; j < NIO; ++j) LC_CHECK(aligned16(s.io[j]), "fused optimizer buffer not 16-byte aligned");
  for (int j = 0; j < NIN; ++j) LC_CHECK(aligned16(s.in[j]), "fused optimizer buffer not 16-byte aligned");
  chunk_kernel<NIO, NIN, Op><<<static_cast<unsigned>(layout.num_chunks()), kThreads>>>(
      s, partials, layout.chunks(), scales, op);
  check_launch();
}

template <class Trust>
void run_trust(FusedLayout& layout, const Trust& trust) {
  if (layout.num_tensors() == 0) return;
  trust_kernel<<<static_cast<unsigned>(layout.num_tensors()), kThreads>>>(layout.scales(), layout.partials(),
                                                                          layout.segments(), trust);
  check_launch();
}

unsigned grid_for(std::size_t n, std::size_t per_block, std::size_t max_blocks) {
  const std::size_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > max_blocks ? max_blocks : blocks);
}

}  // namespace

void sgd_step(float* w, float* b, const float* g, const FusedLayout& layout, const SgdCoefs& c) {
  if (b)
    run_chunks(Streams<2, 1>{{w, b}, {g}}, nullptr, layout, nullptr, SgdOp<true>{c});
  else
    run_chunks(Streams<1, 1>{{w}, {g}}, nullptr, layout, nullptr, SgdOp<false>{c});
}

void adamw_step(float* w, float* m, float* v, const float* g, const FusedLayout& layout, const AdamWCoefs& c) {
  run_chunks(Streams<3, 1>{{w, m, v}, {g}}, nullptr, layout, nullptr, AdamWOp{c});
}

void lars_step(float* w, float* m, const float* g, FusedLayout& layout, const LarsCoefs& c) {
  if (layout.num_chunks() == 0) return;
  run_chunks(Streams<0, 2>{{nullptr}, {w, g}}, layout.partials(), layout, nullptr, LarsNormOp{});
  run_trust(layout, LarsTrust{c.lr, c.eta, c.wd_d, c.eps});
  run_chunks(Streams<2, 1>{{w, m}, {g}}, nullptr, layout, layout.scales(), LarsUpdateOp{c.mu, c.wd});
}

void lamb_step(float* w, float* m, float* v, const float* g, FusedLayout& layout, const LambCoefs& c) {
  if (layout.num_chunks() == 0) return;
  run_chunks(Streams<2, 2>{{m, v}, {g, w}}, layout.partials(), layout, nullptr, LambMomentsOp{c});
  run_trust(layout, LambTrust{c.lr, c.clamp_min, c.clamp_max});
  run_chunks(Streams<1, 2>{{w}, {m, v}}, nullptr, layout, layout.scales(), LambApplyOp{c});
}

double sum_squares(const float* x, std::size_t n) {
  if (n == 0) return 0.0;
  // [kNormBlocks partial sums, the total]: allocated on a thread's first call, reused after.
  thread_local DeviceArray<double> scratch;
  if (scratch.empty()) scratch = DeviceArray<double>(Device::cuda, kNormBlocks + 1);
  // At least 16 elements per thread; the grid depends on n only, and with it the order of the sum.
  const unsigned blocks = grid_for(n, 16 * kThreads, kNormBlocks);
  sum_squares_kernel<<<blocks, kThreads>>>(scratch.data(), x, n);
  check_launch();
  sum_partials_kernel<<<1, kThreads>>>(scratch.data() + kNormBlocks, scratch.data(), static_cast<int>(blocks));
  check_launch();
  double total = 0.0;
  LC_CUDA_CHECK(cudaMemcpy(&total, scratch.data() + kNormBlocks, sizeof total, cudaMemcpyDeviceToHost));
  return total;
}

void scale(float* x, float c, std::size_t n) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n, 4 * kThreads, 4096), kThreads>>>(x, c, n);
  check_launch();
}

void muon_momentum(float* m, float* x, const float* g, int rows, int cols, float mu, float one_minus_mu, bool nesterov,
                   bool transpose) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (n == 0) return;
  muon_momentum_kernel<<<grid_for(n, 4 * kThreads, 4096), kThreads>>>(m, x, g, rows, cols, mu, one_minus_mu, nesterov,
                                                                       transpose);
  check_launch();
}

void muon_apply(float* w, const float* o, int rows, int cols, float decay, float step, bool transpose) {
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  if (n == 0) return;
  muon_apply_kernel<<<grid_for(n, 4 * kThreads, 4096), kThreads>>>(w, o, rows, cols, decay, step, transpose);
  check_launch();
}

}  // namespace laconic::optim_cuda
