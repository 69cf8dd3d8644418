// CUDA implementations of ops_decl.inc. The CPU kernels in core/ops/ are the specification;
// these match them to float rounding (tests/cuda/ are the parity tests), dropout bit for bit.
//
// All kernels run on the default stream and do not synchronise. Element counts are size_t and
// indices are computed in size_t, so rows * cols beyond 2^31 is fine.
//
// Determinism: every reduction here has a fixed order (warp shuffles in a fixed pattern, column
// sums with a fixed per-thread stride), so repeated runs are bitwise identical, with one
// exception: embedding_backward accumulates with atomicAdd, so when ids repeat the order of the
// float additions into one table row varies between runs (differences at rounding level).
#include "core/ops/cuda/ops_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/rng.h"
#include "core/ops/cuda/cuda_check.h"

namespace laconic::ops::cuda {

namespace {

constexpr int kThreads = 256;     // block size of the elementwise and per-row kernels
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Grid for a grid-stride loop over n elements: enough blocks to fill the device, capped so that
// huge n is covered by striding rather than by an enormous grid.
unsigned grid_for(std::size_t n) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<std::size_t>(blocks, 65535));
}

void check_launch() { LC_CUDA_CHECK(cudaGetLastError()); }


// ---- reductions -----------------------------------------------------------------------------
__device__ inline float warp_sum(float v) {
  for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int off = kWarp / 2; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, off));
  return v;
}

// Sum (or max) over a whole block of kThreads threads; every thread gets the result.
// `scratch` holds kThreads / kWarp floats; the trailing __syncthreads lets callers reuse it.
template <bool kMax>
__device__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  constexpr int kWarps = kThreads / kWarp;
  v = lane < kWarps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();
  return v;
}

// Column sums of a [rows, cols] matrix given elementwise by f(r, c), added into out[cols]:
// out[c] += sum_r f(r, c). Block (32, kColRows): threadIdx.x picks a column (coalesced across a
// warp), threadIdx.y strides over rows; the kColRows partial sums are then added in a fixed order,
// so the result is deterministic (no atomics). One block per 32 columns: a bias of 128 columns
// gets only 4 blocks, so each block is as large as allowed (1024 threads) and every thread keeps
// four loads in flight (their sum order is still fixed), which makes these latency-bound sums a
// few microseconds at BERT's sizes instead of tens.
constexpr int kColRows = 32;
template <typename F>
__global__ void __launch_bounds__(kWarp * kColRows)
    column_sum_kernel(float* out, int rows, int cols, F f) {
  __shared__ float partial[kColRows][kWarp];
  const int c = blockIdx.x * kWarp + threadIdx.x;
  float acc = 0.0f;
  if (c < cols) {
    int r = threadIdx.y;
    for (; r + 3 * kColRows < rows; r += 4 * kColRows) {
      const float v0 = f(r, c), v1 = f(r + kColRows, c), v2 = f(r + 2 * kColRows, c),
                  v3 = f(r + 3 * kColRows, c);
      acc += v0;
      acc += v1;
      acc += v2;
      acc += v3;
    }
    for (; r < rows; r += kColRows) acc += f(r, c);
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float s = 0.0f;
    for (int i = 0; i < kColRows; ++i) s += partial[i][threadIdx.x];
    out[c] += s;
  }
}
template <typename F>
void column_sum(float* out, int rows, int cols, F f) {
  if (rows <= 0 || cols <= 0) return;
  const dim3 block(kWarp, kColRows);
  const unsigned grid = static_cast<unsigned>((cols + kWarp - 1) / kWarp);
  column_sum_kernel<<<grid, block>>>(out, rows, cols, f);
  check_launch();
}

// ---- elementwise kernels (grid-stride loops) ----------------------------------------------
#define LC_GRID_STRIDE(i, n)                                                                  \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(blockDim.x) * gridDim.x)

__global__ void add_bias_kernel(float* y, const float* bias, std::size_t n, int cols) {
  LC_GRID_STRIDE(i, n) y[i] += bias[i % cols];
}

__global__ void relu_forward_kernel(float* y, const float* x, std::size_t n) {
  LC_GRID_STRIDE(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;  // as the CPU: NaN and -0 give +0
}
__global__ void relu_backward_kernel(float* dx, const float* dy, const float* y, std::size_t n) {
  LC_GRID_STRIDE(i, n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1 / sqrt(2 pi), phi(0)

__global__ void gelu_forward_kernel(float* y, const float* x, std::size_t n) {
  LC_GRID_STRIDE(i, n) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * kInvSqrt2));
  }
}
__global__ void gelu_backward_kernel(float* dx, const float* dy, const float* x, std::size_t n) {
  LC_GRID_STRIDE(i, n) {
    const float v = x[i];
    const float cdf = 0.5f * (1.0f + erff(v * kInvSqrt2));      // Phi(x)
    const float pdf = kInvSqrt2Pi * expf(-0.5f * v * v);        // phi(x)
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

// Same mask as the CPU: element i is kept iff rng::uniform(key, i) >= p (24-bit uniform, exact
// in float, so the comparison is bitwise identical on host and device).
__global__ void dropout_kernel(float* y, const float* x, std::size_t n, float p, float keep_scale,
                               std::uint64_t key) {
  LC_GRID_STRIDE(i, n) y[i] = rng::uniform(key, i) >= p ? x[i] * keep_scale : 0.0f;
}

__global__ void fill_kernel(float* x, float value, std::size_t n) {
  LC_GRID_STRIDE(i, n) x[i] = value;
}
__global__ void round_bf16_kernel(float* y, const float* x, std::size_t n) {
  LC_GRID_STRIDE(i, n) {  // as the CPU's round_bf16, bit for bit
    unsigned b = __float_as_uint(x[i]);
    b = (b & 0x7fffffffu) > 0x7f800000u ? (b | 0x00400000u) : b + 0x7fffu + ((b >> 16) & 1u);
    y[i] = __uint_as_float(b & 0xffff0000u);
  }
}
__global__ void scale_kernel(float* x, float alpha, std::size_t n) {
  LC_GRID_STRIDE(i, n) x[i] *= alpha;
}
__global__ void axpy_kernel(float* y, float alpha, const float* x, std::size_t n) {
  LC_GRID_STRIDE(i, n) y[i] += alpha * x[i];
}

// ---- layernorm --------------------------------------------------------------------------------
// One warp per row (kThreads / 32 rows per block): rows are usually a few hundred to a few
// thousand wide, which a warp covers in a handful of coalesced passes with shuffle reductions
// and no shared memory. Mean and variance in two passes (biased variance, as the CPU).
constexpr int kRowsPerBlock = kThreads / kWarp;

__global__ void layernorm_forward_kernel(float* y, float* mean, float* rstd, const float* x,
                                         const float* gamma, const float* beta, int rows,
                                         int cols, float eps) {
  const int r = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;  // whole warp leaves together: shuffles below stay full-mask
  const float* xr = x + static_cast<std::size_t>(r) * cols;
  float s = 0.0f;
  for (int c = lane; c < cols; c += kWarp) s += xr[c];
  const float inv_cols = 1.0f / static_cast<float>(cols);
  const float m = warp_sum(s) * inv_cols;
  float v = 0.0f;
  for (int c = lane; c < cols; c += kWarp) {
    const float d = xr[c] - m;
    v += d * d;
  }
  const float rs = 1.0f / sqrtf(warp_sum(v) * inv_cols + eps);  // IEEE, not rsqrtf: parity
  float* yr = y + static_cast<std::size_t>(r) * cols;
  for (int c = lane; c < cols; c += kWarp) yr[c] = (xr[c] - m) * rs * gamma[c] + beta[c];
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = rs;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - mean) * rstd.
__global__ void layernorm_backward_dx_kernel(float* dx, const float* dy, const float* x,
                                             const float* mean, const float* rstd,
                                             const float* gamma, int rows, int cols) {
  const int r = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const std::size_t off = static_cast<std::size_t>(r) * cols;
  const float m = mean[r], rs = rstd[r];
  float sg = 0.0f, sgx = 0.0f;
  for (int c = lane; c < cols; c += kWarp) {
    const float g = dy[off + c] * gamma[c];
    const float xhat = (x[off + c] - m) * rs;
    sg += g;
    sgx += g * xhat;
  }
  const float inv_cols = 1.0f / static_cast<float>(cols);
  const float mg = warp_sum(sg) * inv_cols, mgx = warp_sum(sgx) * inv_cols;
  for (int c = lane; c < cols; c += kWarp) {
    const float xhat = (x[off + c] - m) * rs;
    dx[off + c] = rs * (dy[off + c] * gamma[c] - mg - xhat * mgx);
  }
}

// ---- embedding --------------------------------------------------------------------------------
// Ids are not validated against the vocabulary on the device (that would need a synchronising
// error flag); out-of-range ids (only negative ones are detectable here, as the vocabulary size
// is not an argument) produce NaN rows forward and are skipped backward, so they cannot corrupt
// memory and show up in the loss. Callers validate ids on the host (the data loader does).
__global__ void embedding_forward_kernel(float* y, const std::int32_t* ids, const float* table,
                                         std::size_t total, int dim) {
  LC_GRID_STRIDE(i, total) {
    const std::int32_t id = ids[i / dim];
    y[i] = id >= 0 ? table[static_cast<std::size_t>(id) * dim + i % dim] : NAN;
  }
}
__global__ void embedding_backward_kernel(float* dtable, const float* dy, const std::int32_t* ids,
                                          std::size_t total, int dim) {
  LC_GRID_STRIDE(i, total) {
    const std::int32_t id = ids[i / dim];
    if (id >= 0) atomicAdd(&dtable[static_cast<std::size_t>(id) * dim + i % dim], dy[i]);
  }
}

// ---- softmax cross-entropy ------------------------------------------------------------------
// One block per row; stable: subtract the row max before exp. loss = log(sum exp(x - max)) -
// (x[t] - max), which equals -log(probs[t]) but keeps precision when probs[t] underflows.
// A target outside [0, classes) that is not ignore_index gives loss NaN (cannot throw here).
__global__ void softmax_xent_forward_kernel(float* losses, float* probs, const float* logits,
                                            const std::int32_t* targets, int classes,
                                            int ignore_index) {
  __shared__ float scratch[kThreads / kWarp];
  const std::size_t off = static_cast<std::size_t>(blockIdx.x) * classes;
  const float* xr = logits + off;
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < classes; c += kThreads) mx = fmaxf(mx, xr[c]);
  mx = block_reduce<true>(mx, scratch);
  float s = 0.0f;
  for (int c = threadIdx.x; c < classes; c += kThreads) s += expf(xr[c] - mx);
  s = block_reduce<false>(s, scratch);
  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < classes; c += kThreads) probs[off + c] = expf(xr[c] - mx) * inv;
  if (threadIdx.x == 0) {
    const std::int32_t t = targets[blockIdx.x];
    float loss = 0.0f;
    if (t != ignore_index) loss = (t >= 0 && t < classes) ? logf(s) - (xr[t] - mx) : NAN;
    losses[blockIdx.x] = loss;
  }
}

__global__ void softmax_xent_backward_kernel(float* dlogits, const float* probs,
                                             const std::int32_t* targets, std::size_t total,
                                             int classes, int ignore_index, float scale) {
  LC_GRID_STRIDE(i, total) {
    const std::int32_t t = targets[i / classes];
    const int c = static_cast<int>(i % classes);
    // scale * p - scale (not scale * (p - 1)) to round exactly as the CPU does; __fmul_rn keeps
    // nvcc from contracting the multiply and the subtraction into one fma (one rounding fewer).
    const float d = __fmul_rn(scale, probs[i]);
    dlogits[i] = t == ignore_index ? 0.0f : (c == t ? d - scale : d);
  }
}

// ---- argmax -----------------------------------------------------------------------------------
// One block per row. Each thread keeps its first maximum (strict >, columns ascending); the
// reduction prefers the larger value and, on ties, the smaller column: the first maximum overall.
// NaN as the CPU's sequential scan treats it: a NaN in column 0 wins (nothing compares greater),
// a NaN elsewhere never wins (it is read as -inf; with column 0 >= -inf, ties go to column 0).
__global__ void argmax_rows_kernel(std::int32_t* out, const float* x, int cols) {
  __shared__ float best_v[kThreads];
  __shared__ int best_i[kThreads];
  const float* xr = x + static_cast<std::size_t>(blockIdx.x) * cols;
  if (isnan(xr[0])) {  // uniform across the block, so the early return skips no barrier
    if (threadIdx.x == 0) out[blockIdx.x] = 0;
    return;
  }
  float bv = -INFINITY;
  int bi = -1;
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    const float v = isnan(xr[c]) ? -INFINITY : xr[c];
    if (bi < 0 || v > bv) {
      bv = v;
      bi = c;
    }
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      const float ov = best_v[threadIdx.x + stride];
      const int oi = best_i[threadIdx.x + stride];
      const int mi = best_i[threadIdx.x];
      if (oi >= 0 && (mi < 0 || ov > best_v[threadIdx.x] ||
                      (ov == best_v[threadIdx.x] && oi < mi))) {
        best_v[threadIdx.x] = ov;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = best_i[0];
}

// ---- attention: heads, row softmax -----------------------------------------------------------
// Element i of [B, H, T, D] <-> its place in the [B*T, stride] row layout (column offset + h*D + d).
// kMerge = false: split (out is [B, H, T, D]); true: merge (out is the row layout). Consecutive
// threads take consecutive d, so both sides are read and written in contiguous runs of D floats.
template <bool kMerge>
__global__ void heads_kernel(float* out, const float* in, std::size_t total, int seq, int heads,
                             int head_dim, int stride, int offset) {
  LC_GRID_STRIDE(i, total) {
    const int d = static_cast<int>(i % head_dim);
    std::size_t rest = i / head_dim;
    const int t = static_cast<int>(rest % seq);
    rest /= seq;
    const int h = static_cast<int>(rest % heads);
    const std::size_t b = rest / heads;
    const std::size_t row = (b * seq + t) * static_cast<std::size_t>(stride) + offset +
                            static_cast<std::size_t>(h) * head_dim + d;
    if (kMerge)
      out[row] = in[i];
    else
      out[i] = in[row];
  }
}

// One warp per row, as layernorm: attention rows are T (tens to a few hundred) wide. Each lane
// touches only its own columns, so y may alias x (and dx alias dy) as on the CPU.
// Causal: row r is query position t = r % cols of a stacked [cols, cols] score matrix and keeps
// columns [0, t] only (the rest are written 0), as the CPU's softmax_causal_forward.
template <bool Causal>
__global__ void softmax_rows_forward_kernel(float* y, const float* x, int rows, int cols) {
  const int r = blockIdx.x * (kThreads / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;  // whole warp leaves together: shuffles below stay full-mask
  const std::size_t off = static_cast<std::size_t>(r) * cols;
  const int width = Causal ? r % cols + 1 : cols;
  float mx = -INFINITY;
  for (int c = lane; c < width; c += kWarp) mx = fmaxf(mx, x[off + c]);
  mx = warp_max(mx);  // exp(x - max) <= 1: no overflow
  float s = 0.0f;
  for (int c = lane; c < width; c += kWarp) {
    const float e = expf(x[off + c] - mx);
    y[off + c] = e;
    s += e;
  }
  const float inv = 1.0f / warp_sum(s);
  for (int c = lane; c < width; c += kWarp) y[off + c] *= inv;
  for (int c = width + lane; c < cols; c += kWarp) y[off + c] = 0.0f;
}

__global__ void softmax_rows_backward_kernel(float* dx, const float* dy, const float* y, int rows,
                                             int cols) {
  const int r = blockIdx.x * (kThreads / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (r >= rows) return;
  const std::size_t off = static_cast<std::size_t>(r) * cols;
  float dot = 0.0f;
  for (int c = lane; c < cols; c += kWarp) dot += dy[off + c] * y[off + c];
  dot = warp_sum(dot);
  for (int c = lane; c < cols; c += kWarp) dx[off + c] = y[off + c] * (dy[off + c] - dot);
}

// ---- residuals, MLM rows, positions ----------------------------------------------------------
__global__ void add_kernel(float* y, const float* a, const float* b, std::size_t n) {
  LC_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

// A negative index is skipped (as embedding_backward): it cannot throw here, and writing below
// the buffer would corrupt memory. Callers validate indices on the host.
__global__ void scatter_rows_kernel(float* out, const float* x, const std::int32_t* idx,
                                    std::size_t total, int dim) {
  LC_GRID_STRIDE(i, total) {
    const std::int32_t row = idx[i / dim];
    if (row >= 0) out[static_cast<std::size_t>(row) * dim + i % dim] = x[i];
  }
}

__global__ void iota_mod_kernel(std::int32_t* out, int n, int period) {
  LC_GRID_STRIDE(i, static_cast<std::size_t>(n)) out[i] = static_cast<std::int32_t>(i % period);
}

// ---- loss statistics -------------------------------------------------------------------------
// One block: each thread sums the rows i = threadIdx.x (mod kThreads) in order, then a fixed
// tree adds the threads' partial sums: deterministic, in double (the CPU sums in double in row
// order; the two agree to double rounding, far below the float the loss is reported in). The
// counts are exact integers.
__global__ void xent_stats_kernel(double* stats, const float* losses, const std::int32_t* argmax,
                                  const std::int32_t* targets, int rows, int ignore_index) {
  __shared__ double sum[kThreads];
  __shared__ long long counted[kThreads];
  __shared__ long long correct[kThreads];
  double s = 0.0;
  long long n = 0, ok = 0;
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    const std::int32_t t = targets[i];
    if (t == ignore_index) continue;
    ++n;
    s += static_cast<double>(losses[i]);
    ok += argmax[i] == t;
  }
  sum[threadIdx.x] = s;
  counted[threadIdx.x] = n;
  correct[threadIdx.x] = ok;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      sum[threadIdx.x] += sum[threadIdx.x + stride];
      counted[threadIdx.x] += counted[threadIdx.x + stride];
      correct[threadIdx.x] += correct[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    stats[0] = sum[0];
    stats[1] = static_cast<double>(counted[0]);
    stats[2] = static_cast<double>(correct[0]);
  }
}

}  // namespace

// ---- cuBLAS handle --------------------------------------------------------------------------
// One handle per (host thread, device), created lazily on first use: cuBLAS handles are bound to
// the device current at creation and are not safe to share between threads without external
// locking, so thread_local is the smallest state that is correct for the threads backend (one
// rank per thread, perhaps one GPU per rank). This is the only mutable global state in ops/cuda.
// The handles are destroyed when their thread exits.
namespace {
struct CublasHandles {
  std::vector<cublasHandle_t> by_device;
  ~CublasHandles() {
    for (cublasHandle_t h : by_device)
      if (h) (void)cublasDestroy(h);  // no throwing from a destructor
  }
};
}  // namespace

cublasHandle_t cublas_handle() {
  thread_local CublasHandles handles;
  int device = 0;
  LC_CUDA_CHECK(cudaGetDevice(&device));
  if (static_cast<std::size_t>(device) >= handles.by_device.size())
    handles.by_device.resize(device + 1, nullptr);
  cublasHandle_t& h = handles.by_device[device];
  if (!h) {
    LC_CUBLAS_CHECK(cublasCreate(&h));
    // Plain FP32 math, explicitly: TF32 tensor-core math (CUBLAS_TF32_TENSOR_OP_MATH) rounds the
    // inputs to 10 mantissa bits, which would break parity with the CPU reference (~1e-3 relative
    // instead of ~1e-6). A faster, opt-in TF32 path would be a separate option, never the default.
    LC_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    LC_CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  }
  return h;
}

// ---- the ops_decl.inc entry points ---------------------------------------------------------

// Row-major C[m,n] = alpha op(A) op(B) + beta C through column-major cuBLAS: a row-major [r,c]
// matrix is the column-major [c,r] matrix, i.e. its transpose, so we compute
// C^T[n,m] = alpha op(B)^T op(A)^T + beta C^T, passing B first. B stored row-major [k,n] is
// column-major [n,k] = op(B)^T as is (OP_N, ld n); stored [n,k] (trans_b) it is column-major
// [k,n] and needs OP_T (ld k). Likewise A: [m,k] -> OP_N, ld k; [k,m] (trans_a) -> OP_T, ld m.
void gemm(float* c, const float* a, const float* b, int m, int n, int k, bool trans_a, bool trans_b,
          float alpha, float beta) {
  LC_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm sizes m=", m, " n=", n, " k=", k);
  if (m == 0 || n == 0) return;
  // As the CPU (and BLAS): with alpha == 0 or k == 0, A and B are not read and C = beta C, with
  // beta == 0 assigning zeros (old NaNs in C do not survive). Done here since cuBLAS rejects ld 0.
  if (alpha == 0.0f || k == 0) {
    if (beta == 0.0f) fill(c, 0.0f, static_cast<std::size_t>(m) * n);
    else if (beta != 1.0f) scale(c, beta, static_cast<std::size_t>(m) * n);
    return;
  }
  const int lda = trans_a ? m : k;
  const int ldb = trans_b ? k : n;
  LC_CUBLAS_CHECK(cublasSgemm(cublas_handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda,
                              &beta, c, n));
}

void add_bias(float* y, const float* bias, int rows, int cols) {
  const std::size_t n = static_cast<std::size_t>(std::max(rows, 0)) * std::max(cols, 0);
  if (n == 0) return;
  add_bias_kernel<<<grid_for(n), kThreads>>>(y, bias, n, cols);
  check_launch();
}

namespace {
struct DyAt {
  const float* dy;
  int cols;
  __device__ float operator()(int r, int c) const {
    return dy[static_cast<std::size_t>(r) * cols + c];
  }
};
struct DyXhatAt {
  const float* dy;
  const float* x;
  const float* mean;
  const float* rstd;
  int cols;
  __device__ float operator()(int r, int c) const {
    const std::size_t i = static_cast<std::size_t>(r) * cols + c;
    return dy[i] * (x[i] - mean[r]) * rstd[r];
  }
};
}  // namespace

void bias_grad(float* dbias, const float* dy, int rows, int cols) {
  column_sum(dbias, rows, cols, DyAt{dy, cols});
}

void relu_forward(float* y, const float* x, std::size_t n) {
  if (n == 0) return;
  relu_forward_kernel<<<grid_for(n), kThreads>>>(y, x, n);
  check_launch();
}
void relu_backward(float* dx, const float* dy, const float* y, std::size_t n) {
  if (n == 0) return;
  relu_backward_kernel<<<grid_for(n), kThreads>>>(dx, dy, y, n);
  check_launch();
}

void gelu_forward(float* y, const float* x, std::size_t n) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n), kThreads>>>(y, x, n);
  check_launch();
}
void gelu_backward(float* dx, const float* dy, const float* x, std::size_t n) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n), kThreads>>>(dx, dy, x, n);
  check_launch();
}

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int rows, int cols, float eps) {
  if (rows <= 0 || cols <= 0) return;
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  layernorm_forward_kernel<<<grid, kThreads>>>(y, mean, rstd, x, gamma, beta, rows, cols, eps);
  check_launch();
}

void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* mean, const float* rstd, const float* gamma, int rows,
                        int cols) {
  if (rows <= 0 || cols <= 0) return;
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  layernorm_backward_dx_kernel<<<grid, kThreads>>>(dx, dy, x, mean, rstd, gamma, rows, cols);
  check_launch();
  // Parameter gradients: deterministic column sums (dgamma += sum_r dy xhat, dbeta += sum_r dy).
  column_sum(dgamma, rows, cols, DyXhatAt{dy, x, mean, rstd, cols});
  column_sum(dbeta, rows, cols, DyAt{dy, cols});
}

void embedding_forward(float* y, const std::int32_t* ids, const float* table, int n, int dim) {
  const std::size_t total = static_cast<std::size_t>(std::max(n, 0)) * std::max(dim, 0);
  if (total == 0) return;
  embedding_forward_kernel<<<grid_for(total), kThreads>>>(y, ids, table, total, dim);
  check_launch();
}
void embedding_backward(float* dtable, const float* dy, const std::int32_t* ids, int n, int dim) {
  const std::size_t total = static_cast<std::size_t>(std::max(n, 0)) * std::max(dim, 0);
  if (total == 0) return;
  embedding_backward_kernel<<<grid_for(total), kThreads>>>(dtable, dy, ids, total, dim);
  check_launch();
}

void dropout_forward(float* y, const float* x, std::size_t n, float p, std::uint64_t key) {
  LC_CHECK(p >= 0.0f && p < 1.0f, "dropout p=", p, " outside [0, 1)");
  if (n == 0) return;
  dropout_kernel<<<grid_for(n), kThreads>>>(y, x, n, p, 1.0f / (1.0f - p), key);
  check_launch();
}
void dropout_backward(float* dx, const float* dy, std::size_t n, float p, std::uint64_t key) {
  LC_CHECK(p >= 0.0f && p < 1.0f, "dropout p=", p, " outside [0, 1)");
  if (n == 0) return;
  dropout_kernel<<<grid_for(n), kThreads>>>(dx, dy, n, p, 1.0f / (1.0f - p), key);
  check_launch();
}

void softmax_xent_forward(float* losses, float* probs, const float* logits,
                          const std::int32_t* targets, int rows, int classes, int ignore_index) {
  LC_CHECK(classes > 0 || rows == 0, "softmax_xent_forward with classes=", classes);
  if (rows <= 0) return;
  softmax_xent_forward_kernel<<<static_cast<unsigned>(rows), kThreads>>>(
      losses, probs, logits, targets, classes, ignore_index);
  check_launch();
}
void softmax_xent_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                           int rows, int classes, int ignore_index, float scale) {
  const std::size_t total = static_cast<std::size_t>(std::max(rows, 0)) * std::max(classes, 0);
  if (total == 0) return;
  softmax_xent_backward_kernel<<<grid_for(total), kThreads>>>(dlogits, probs, targets, total,
                                                              classes, ignore_index, scale);
  check_launch();
}

void argmax_rows(std::int32_t* out, const float* x, int rows, int cols) {
  LC_CHECK(cols > 0 || rows == 0, "argmax_rows with cols=", cols);
  if (rows <= 0) return;
  argmax_rows_kernel<<<static_cast<unsigned>(rows), kThreads>>>(out, x, cols);
  check_launch();
}

void fill(float* x, float value, std::size_t n) {
  if (n == 0) return;
  fill_kernel<<<grid_for(n), kThreads>>>(x, value, n);
  check_launch();
}
void round_bf16(float* y, const float* x, std::size_t n) {
  if (n == 0) return;
  round_bf16_kernel<<<grid_for(n), kThreads>>>(y, x, n);
  check_launch();
}
void scale(float* x, float alpha, std::size_t n) {
  if (n == 0) return;
  scale_kernel<<<grid_for(n), kThreads>>>(x, alpha, n);
  check_launch();
}
void axpy(float* y, float alpha, const float* x, std::size_t n) {
  if (n == 0) return;
  axpy_kernel<<<grid_for(n), kThreads>>>(y, alpha, x, n);
  check_launch();
}

// Batched through cublasSgemmStridedBatched with gemm's row-major -> column-major mapping (see
// gemm above): B_i first, then A_i, each with its stride.
void gemm_strided_batched(float* c, const float* a, const float* b, int m, int n, int k,
                          bool trans_a, bool trans_b, float alpha, float beta, int batch,
                          std::int64_t stride_c, std::int64_t stride_a, std::int64_t stride_b) {
  LC_CHECK(m >= 0 && n >= 0 && k >= 0 && batch >= 0, "gemm_strided_batched sizes m=", m, " n=", n,
           " k=", k, " batch=", batch);
  if (m == 0 || n == 0 || batch == 0) return;
  if (alpha == 0.0f || k == 0) {  // as gemm: C_i = beta C_i, A and B unread
    for (int i = 0; i < batch; ++i) gemm(c + i * stride_c, nullptr, nullptr, m, n, 0, false, false, 1.0f, beta);
    return;
  }
  const int lda = trans_a ? m : k;
  const int ldb = trans_b ? k : n;
  LC_CUBLAS_CHECK(cublasSgemmStridedBatched(
      cublas_handle(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m,
      k, &alpha, b, ldb, static_cast<long long>(stride_b), a, lda, static_cast<long long>(stride_a),
      &beta, c, n, static_cast<long long>(stride_c), batch));
}

namespace {
template <bool kMerge>
void rearrange_heads(float* out, const float* in, int batch, int seq, int heads, int head_dim,
                     int stride, int offset) {
  const std::size_t total = static_cast<std::size_t>(std::max(batch, 0)) * std::max(heads, 0) *
                            std::max(seq, 0) * std::max(head_dim, 0);
  if (total == 0) return;
  heads_kernel<kMerge><<<grid_for(total), kThreads>>>(out, in, total, seq, heads, head_dim, stride,
                                                      offset);
  check_launch();
}
}  // namespace

void split_heads(float* out, const float* in, int batch, int seq, int heads, int head_dim,
                 int stride, int offset) {
  rearrange_heads<false>(out, in, batch, seq, heads, head_dim, stride, offset);
}
void merge_heads(float* out, const float* in, int batch, int seq, int heads, int head_dim,
                 int stride, int offset) {
  rearrange_heads<true>(out, in, batch, seq, heads, head_dim, stride, offset);
}

void softmax_rows_forward(float* y, const float* x, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_rows_forward_kernel<false><<<grid, kThreads>>>(y, x, rows, cols);
  check_launch();
}
void softmax_causal_forward(float* y, const float* x, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_rows_forward_kernel<true><<<grid, kThreads>>>(y, x, rows, cols);
  check_launch();
}
void softmax_rows_backward(float* dx, const float* dy, const float* y, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  const unsigned grid = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  softmax_rows_backward_kernel<<<grid, kThreads>>>(dx, dy, y, rows, cols);
  check_launch();
}

void add(float* y, const float* a, const float* b, std::size_t n) {
  if (n == 0) return;
  add_kernel<<<grid_for(n), kThreads>>>(y, a, b, n);
  check_launch();
}

void scatter_rows(float* out, const float* x, const std::int32_t* idx, int n, int dim) {
  const std::size_t total = static_cast<std::size_t>(std::max(n, 0)) * std::max(dim, 0);
  if (total == 0) return;
  scatter_rows_kernel<<<grid_for(total), kThreads>>>(out, x, idx, total, dim);
  check_launch();
}

void iota_mod(std::int32_t* out, int n, int period) {
  LC_CHECK(period > 0 || n <= 0, "iota_mod: period=", period);
  if (n <= 0) return;
  iota_mod_kernel<<<grid_for(static_cast<std::size_t>(n)), kThreads>>>(out, n, period);
  check_launch();
}

void xent_stats(double* stats, const float* losses, const std::int32_t* argmax,
                const std::int32_t* targets, int rows, int ignore_index) {
  // Launched for rows == 0 too: the statistics are then zeros, written like any others.
  xent_stats_kernel<<<1, kThreads>>>(stats, losses, argmax, targets, std::max(rows, 0), ignore_index);
  check_launch();
}

}  // namespace laconic::ops::cuda
