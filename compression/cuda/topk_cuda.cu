// Exact top-k and its decode on the device (compression/topk.h is the specification: same
// selection, bit for bit). Radix select over the 31-bit keys |x| (topk.h), resolved from the top
// in digits of 12, 11 and 8 bits like the CPU, but every digit is histogrammed over the whole
// buffer (no candidate gathering: that would need a stable compaction of unknown size before the
// threshold is known), and the threshold never leaves the device:
//   top      acc = x (+ residual, stored back: error feedback fused), 12-bit histogram.  12n bytes
//   pick     one block finds the digit's bin holding the k-th largest (a "cut" in device memory)
//   refine   the next digit's histogram over the elements in the cut's bin; twice.    4n each
//            (a no-op once the cut is resolved: every element of its bin is selected, or all
//            31 bits are known)
//   count    per tile of 4096 elements: how many lie above the cut's bin and in it.  4n
//   scan     exclusive prefix sums of the tile counts (cub::DeviceScan)
//   emit     per tile, in index order: elements above the bin, and the lowest-index `need` of
//            the bin, written at their rank among the selected (so indices come out ascending),
//            and zeroed in the residual.                                               4n + 12k
// Five passes over the buffer, 28n bytes with error feedback (the minimum, read x and the
// residual and write the residual back, is 12n). Counts are integer atomics (order-free, exact);
// no float is ever accumulated, so the result does not depend on scheduling.
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "compression/cuda/common.cuh"
#include "compression/cuda/reducers_cuda.h"

namespace laconic::reducers_cuda {
namespace {

using detail::check_launch;
using detail::key_of;
using detail::kThreads;
using detail::kWarp;

constexpr int kKeyBits = 31;
constexpr int kTopBits = 12;
constexpr int kBins = 1 << kTopBits;       // the widest digit
constexpr int kRows = 16;                  // a tile is kRows rows of kThreads elements
constexpr std::size_t kTile = std::size_t{kRows} * kThreads;
constexpr int kWarps = kThreads / kWarp;
constexpr unsigned kHistBlocks = 1024;     // grid of the histogram passes (fixed: flush cost bounded)
constexpr int kPickThreads = 1024;         // pick: kBins / kPickThreads = 4 bins per thread

// The partly resolved threshold (topk.cpp's Cut): the k-th largest key has (key >> lo) ==
// prefix; in_bin elements share that prefix and the `need` lowest-index ones among them complete
// the top k. Resolved when lo == 0 or need == in_bin.
struct Cut {
  std::uint32_t prefix;
  std::uint32_t lo;
  std::uint32_t need;
  std::uint32_t in_bin;
};
static_assert(sizeof(Cut) == 4 * sizeof(std::uint32_t));

__host__ __device__ constexpr int digit_bits(int lo) { return lo > 19 ? lo - 19 : lo > 8 ? lo - 8 : lo; }

__device__ __forceinline__ bool resolved(const Cut& c) { return c.lo == 0 || c.need == c.in_bin; }

// Shared-memory histogram of a block, flushed into the global one (integer atomics: exact).
__device__ __forceinline__ void flush(std::uint32_t* __restrict__ global, const std::uint32_t* shared, int bins) {
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    if (shared[b]) atomicAdd(global + b, shared[b]);
}

// Pass 1: acc = x (+ residual, stored back), hist[key >> 19] counted. hist zeroed by the caller.
template <bool kFused, bool kVec>
__global__ void top_kernel(std::uint32_t* __restrict__ hist, float* __restrict__ residual, const float* __restrict__ x,
                           std::size_t n) {
  __shared__ std::uint32_t h[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) h[b] = 0;
  __syncthreads();
  constexpr int shift = kKeyBits - kTopBits;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t t = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::size_t done = 0;
  if constexpr (kVec) {
    const std::size_t quads = n / 4;
    for (std::size_t q = t; q < quads; q += stride) {
      float4 a = reinterpret_cast<const float4*>(x)[q];
      if constexpr (kFused) {
        const float4 r = reinterpret_cast<const float4*>(residual)[q];
        a.x = __fadd_rn(a.x, r.x), a.y = __fadd_rn(a.y, r.y), a.z = __fadd_rn(a.z, r.z), a.w = __fadd_rn(a.w, r.w);
        reinterpret_cast<float4*>(residual)[q] = a;
      }
      atomicAdd(&h[key_of(a.x) >> shift], 1u);
      atomicAdd(&h[key_of(a.y) >> shift], 1u);
      atomicAdd(&h[key_of(a.z) >> shift], 1u);
      atomicAdd(&h[key_of(a.w) >> shift], 1u);
    }
    done = quads * 4;
  }
  for (std::size_t i = done + t; i < n; i += stride) {
    float a = x[i];
    if constexpr (kFused) {
      a = __fadd_rn(a, residual[i]);
      residual[i] = a;
    }
    atomicAdd(&h[key_of(a) >> shift], 1u);
  }
  flush(hist, h, kBins);
}

// The bin of this digit's histogram holding the need-th largest, scanning from the top bin:
// the cut narrowed by one digit. `first`: the cut starts as (0, 31, k, n).
__global__ void pick_kernel(Cut* __restrict__ cut, const std::uint32_t* __restrict__ hist, bool first, std::uint32_t k,
                            std::uint32_t n) {
  using Scan = cub::BlockScan<std::uint32_t, kPickThreads>;
  __shared__ typename Scan::TempStorage temp;
  Cut c = first ? Cut{0, kKeyBits, k, n} : *cut;
  if (!first && resolved(c)) return;  // uniform: every thread read the same cut
  const int bits = digit_bits(static_cast<int>(c.lo));
  const int bins = 1 << bits;
  constexpr int kPer = kBins / kPickThreads;
  // Thread t owns the bins bins-1-kPer*t ... downwards (the scan runs from the largest keys).
  std::uint32_t mine[kPer];
  std::uint32_t sum = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int r = kPer * static_cast<int>(threadIdx.x) + j;
    mine[j] = r < bins ? hist[bins - 1 - r] : 0u;
    sum += mine[j];
  }
  std::uint32_t above = 0;
  Scan(temp).ExclusiveSum(sum, above);
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int r = kPer * static_cast<int>(threadIdx.x) + j;
    if (r < bins && above < c.need && above + mine[j] >= c.need) {  // exactly one bin qualifies
      const auto b = static_cast<std::uint32_t>(bins - 1 - r);
      *cut = Cut{(c.prefix << bits) | b, c.lo - static_cast<std::uint32_t>(bits), c.need - above, mine[j]};
    }
    above += mine[j];
  }
}

// The next digit's histogram over the elements inside the cut's bin (no-op once resolved).
template <bool kVec>
__global__ void refine_kernel(std::uint32_t* __restrict__ hist, const Cut* __restrict__ cut,
                              const float* __restrict__ acc, std::size_t n) {
  __shared__ std::uint32_t h[1 << 11];
  const Cut c = *cut;
  if (resolved(c)) return;
  const int bits = digit_bits(static_cast<int>(c.lo));
  const int bins = 1 << bits;
  const std::uint32_t lo = c.lo - static_cast<std::uint32_t>(bits), mask = static_cast<std::uint32_t>(bins - 1);
  for (int b = threadIdx.x; b < bins; b += blockDim.x) h[b] = 0;
  __syncthreads();
  const auto count = [&](float v) {
    const std::uint32_t key = key_of(v);
    if ((key >> c.lo) == c.prefix) atomicAdd(&h[(key >> lo) & mask], 1u);
  };
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t t = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::size_t done = 0;
  if constexpr (kVec) {
    const std::size_t quads = n / 4;
    for (std::size_t q = t; q < quads; q += stride) {
      const float4 a = reinterpret_cast<const float4*>(acc)[q];
      count(a.x), count(a.y), count(a.z), count(a.w);
    }
    done = quads * 4;
  }
  for (std::size_t i = done + t; i < n; i += stride) count(acc[i]);
  flush(hist, h, bins);
}

// Sum of an unsigned over the block (kThreads); thread 0 gets it.
__device__ std::uint32_t block_count(std::uint32_t v, std::uint32_t* scratch) {
  for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(detail::kFullMask, v, off);
  if (threadIdx.x % kWarp == 0) scratch[threadIdx.x / kWarp] = v;
  __syncthreads();
  std::uint32_t s = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kWarps; ++w) s += scratch[w];
  return s;
}

// tiles[t] = (elements of tile t above the cut's bin) << 32 | (elements in it). Tile t holds
// elements t * kTile + j * kThreads + threadIdx.x, j < kRows (coalesced rows, index order).
__global__ void count_kernel(std::uint64_t* __restrict__ tiles, const Cut* __restrict__ cut,
                             const float* __restrict__ acc, std::size_t n) {
  __shared__ std::uint32_t scratch[2][kWarps];
  const Cut c = *cut;
  const std::size_t base = std::size_t{blockIdx.x} * kTile + threadIdx.x;
  float v[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {  // all loads first: kRows in flight per thread
    const std::size_t i = base + static_cast<std::size_t>(j) * kThreads;
    v[j] = i < n ? acc[i] : 0.0f;
  }
  std::uint32_t above = 0, in = 0;
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    if (base + static_cast<std::size_t>(j) * kThreads >= n) continue;
    const std::uint32_t top = key_of(v[j]) >> c.lo;
    above += top > c.prefix;
    in += top == c.prefix;
  }
  above = block_count(above, scratch[0]);
  in = block_count(in, scratch[1]);
  if (threadIdx.x == 0) tiles[blockIdx.x] = (std::uint64_t{above} << 32) | in;
}

// Warp w's exclusive prefix over the 128 (row, warp) counts in index order, in place.
__device__ void scan_counts(std::uint32_t* counts) {
  constexpr int kEntries = kRows * kWarps, kPer = kEntries / kWarp;
  const int lane = threadIdx.x % kWarp;
  std::uint32_t local[kPer], sum = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    local[j] = counts[lane * kPer + j];
    sum += local[j];
  }
  std::uint32_t before = sum;  // inclusive scan over lanes, then made exclusive
  for (int off = 1; off < kWarp; off *= 2) {
    const std::uint32_t y = __shfl_up_sync(detail::kFullMask, before, off);
    if (lane >= off) before += y;
  }
  before -= sum;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    counts[lane * kPer + j] = before;
    before += local[j];
  }
}

// The selected elements of each tile, in index order, at their rank among all selected.
// residual is not __restrict__: with error feedback it is acc itself (each element is read, then
// zeroed, by the same thread).
__global__ void emit_kernel(std::uint32_t* __restrict__ indices, float* __restrict__ values,
                            float* residual, const std::uint64_t* __restrict__ tiles,
                            const std::uint64_t* __restrict__ offsets, const Cut* __restrict__ cut,
                            const float* acc, std::size_t n) {
  __shared__ std::uint32_t counts[2][kRows * kWarps];  // above / in the bin, per (row, warp)
  const Cut c = *cut;
  const std::uint64_t mine = tiles[blockIdx.x], off = offsets[blockIdx.x];
  const auto above_off = static_cast<std::uint32_t>(off >> 32), in_off = static_cast<std::uint32_t>(off);
  const auto above_n = static_cast<std::uint32_t>(mine >> 32), in_n = static_cast<std::uint32_t>(mine);
  const std::uint32_t taken = in_off >= c.need ? 0u : min(in_n, c.need - in_off);
  if (above_n + taken == 0) return;  // nothing selected here (uniform across the block)

  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const unsigned lower = (1u << lane) - 1u;  // lanes below this one
  const std::size_t base = std::size_t{blockIdx.x} * kTile + threadIdx.x;
  float v[kRows];
  std::uint32_t is_above = 0, is_in = 0;  // bit j: row j's element
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const std::size_t i = base + static_cast<std::size_t>(j) * kThreads;
    v[j] = i < n ? acc[i] : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    if (base + static_cast<std::size_t>(j) * kThreads >= n) continue;
    const std::uint32_t top = key_of(v[j]) >> c.lo;
    is_above |= std::uint32_t{top > c.prefix} << j;
    is_in |= std::uint32_t{top == c.prefix} << j;
  }
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const unsigned a = __ballot_sync(detail::kFullMask, (is_above >> j) & 1u);
    const unsigned b = __ballot_sync(detail::kFullMask, (is_in >> j) & 1u);
    if (lane == 0) {
      counts[0][j * kWarps + warp] = __popc(a);
      counts[1][j * kWarps + warp] = __popc(b);
    }
  }
  __syncthreads();
  if (warp < 2) scan_counts(counts[warp]);
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const unsigned a = __ballot_sync(detail::kFullMask, (is_above >> j) & 1u);
    const unsigned b = __ballot_sync(detail::kFullMask, (is_in >> j) & 1u);
    const bool up = (is_above >> j) & 1u, eq = (is_in >> j) & 1u;
    if (!up && !eq) continue;
    const std::uint32_t above_before = above_off + counts[0][j * kWarps + warp] + __popc(a & lower);
    const std::uint32_t in_before = in_off + counts[1][j * kWarps + warp] + __popc(b & lower);
    if (eq && in_before >= c.need) continue;  // a tie past the ones taken
    const std::uint32_t at = above_before + min(in_before, c.need);
    const std::size_t i = base + static_cast<std::size_t>(j) * kThreads;
    indices[at] = static_cast<std::uint32_t>(i);
    values[at] = v[j];
    if (residual) residual[i] = 0.0f;
  }
}

// ---- decode ----

__global__ void scatter_add_kernel(float* __restrict__ out, std::size_t n, const std::uint32_t* __restrict__ words,
                                   std::size_t c) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t j = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; j < c; j += stride) {
    const std::uint32_t i = words[c + j];  // a rank's indices are distinct: no two threads meet
    if (i < n) out[i] = __fadd_rn(out[i], __uint_as_float(words[j]));
  }
}

__global__ void stage_kernel(std::uint32_t* __restrict__ words, std::size_t c, const float* __restrict__ out,
                             std::size_t n, float d) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t j = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; j < c; j += stride) {
    const std::uint32_t i = words[c + j];
    if (i < n) words[j] = __float_as_uint(__fdiv_rn(out[i], d));
  }
}

__global__ void store_kernel(float* __restrict__ out, std::size_t n, const std::uint32_t* __restrict__ words,
                             std::size_t c) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t j = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; j < c; j += stride) {
    const std::uint32_t i = words[c + j];
    if (i < n) out[i] = __uint_as_float(words[j]);
  }
}

std::size_t tiles_for(std::size_t n) { return (n + kTile - 1) / kTile; }

unsigned hist_grid(std::size_t n) {
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(kHistBlocks, (n + kTile - 1) / kTile)));
}

}  // namespace

void TopKScratch::reserve(std::size_t n) {
  if (hist.device() != Device::cuda) {
    hist = DeviceArray<std::uint32_t>(Device::cuda, kBins);
    cut = DeviceArray<std::uint32_t>(Device::cuda, sizeof(Cut) / sizeof(std::uint32_t));
    tiles = DeviceArray<std::uint64_t>(Device::cuda);
    scan_temp = DeviceArray<std::uint8_t>(Device::cuda);
  }
  const std::size_t t = tiles_for(n);
  if (tiles.size() < 2 * t) tiles.resize(2 * t);
  std::size_t bytes = 0;
  LC_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const std::uint64_t*>(nullptr),
                                              static_cast<std::uint64_t*>(nullptr), t));
  if (scan_temp.size() < bytes) scan_temp.resize(bytes);
}

std::size_t topk_exact(std::uint32_t* indices, float* values, float* residual, const float* x, std::size_t n,
                       std::size_t k, TopKScratch& scratch) {
  LC_CHECK(n <= 0xffffffffu, "top-k indexes with uint32, got ", n, " elements");
  k = std::min(k, n);
  if (n == 0) return 0;
  scratch.reserve(n);  // allocates only the first time for this size (prepare() calls it)
  std::uint32_t* hist = scratch.hist.data();
  Cut* cut = reinterpret_cast<Cut*>(scratch.cut.data());
  const unsigned grid = hist_grid(n);
  const std::size_t hist_bytes = kBins * sizeof(std::uint32_t);
  const bool vec = detail::aligned16(x) && (residual == nullptr || detail::aligned16(residual));
  LC_CUDA_CHECK(cudaMemsetAsync(hist, 0, hist_bytes, 0));
  if (residual) {
    if (vec) top_kernel<true, true><<<grid, kThreads>>>(hist, residual, x, n);
    else top_kernel<true, false><<<grid, kThreads>>>(hist, residual, x, n);
  } else {
    if (vec) top_kernel<false, true><<<grid, kThreads>>>(hist, residual, x, n);
    else top_kernel<false, false><<<grid, kThreads>>>(hist, residual, x, n);
  }
  check_launch();
  if (k == 0) return 0;  // the residual has taken the input; nothing is sent
  const float* acc = residual ? residual : x;
  const auto k32 = static_cast<std::uint32_t>(k), n32 = static_cast<std::uint32_t>(n);
  pick_kernel<<<1, kPickThreads>>>(cut, hist, true, k32, n32);
  check_launch();
  for (int digit = 0; digit < 2; ++digit) {  // the 11- and 8-bit digits below the top 12
    LC_CUDA_CHECK(cudaMemsetAsync(hist, 0, hist_bytes, 0));
    if (vec) refine_kernel<true><<<grid, kThreads>>>(hist, cut, acc, n);
    else refine_kernel<false><<<grid, kThreads>>>(hist, cut, acc, n);
    check_launch();
    pick_kernel<<<1, kPickThreads>>>(cut, hist, false, k32, n32);
    check_launch();
  }
  const std::size_t t = tiles_for(n);
  std::uint64_t* counts = scratch.tiles.data();
  std::uint64_t* offsets = counts + t;
  count_kernel<<<static_cast<unsigned>(t), kThreads>>>(counts, cut, acc, n);
  check_launch();
  std::size_t bytes = scratch.scan_temp.size();
  LC_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scratch.scan_temp.data(), bytes, counts, offsets, t));
  emit_kernel<<<static_cast<unsigned>(t), kThreads>>>(indices, values, residual, counts, offsets, cut, acc, n);
  check_launch();
  return k;
}

void topk_decode(float* out, std::size_t n, std::uint32_t* gathered, const std::size_t* counts, std::size_t world) {
  LC_CHECK(world > 0, "top-k decode of no ranks");
  if (n > 0) LC_CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(float), 0));
  // Rank by rank, in order: the same additions in the same order as the CPU's loop.
  std::size_t at = 0;
  for (std::size_t q = 0; q < world; ++q) {
    if (counts[q] > 0) scatter_add_kernel<<<detail::grid_for(counts[q]), kThreads>>>(out, n, gathered + at, counts[q]);
    at += 2 * counts[q];
  }
  check_launch();
  // Quotients staged in the value words, then stored: a position sent by several ranks is
  // divided once (every rank's copy of it computes the same quotient from the same sum).
  const auto d = static_cast<float>(world);
  at = 0;
  for (std::size_t q = 0; q < world; ++q) {
    if (counts[q] > 0) stage_kernel<<<detail::grid_for(counts[q]), kThreads>>>(gathered + at, counts[q], out, n, d);
    at += 2 * counts[q];
  }
  check_launch();
  at = 0;
  for (std::size_t q = 0; q < world; ++q) {
    if (counts[q] > 0) store_kernel<<<detail::grid_for(counts[q]), kThreads>>>(out, n, gathered + at, counts[q]);
    at += 2 * counts[q];
  }
  check_launch();
}

}  // namespace laconic::reducers_cuda
