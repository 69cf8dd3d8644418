// CPU reference kernels: the specification that ops/cuda must match (signatures in ops_decl.inc).
// Loops are written plainly so the compiler can vectorise them; GEMM goes through oneDNN, OpenBLAS
// or Eigen (LACONIC_GEMM at configure) on row-major buffers (no copies, no temporaries of ours).

// No allocation in the step loop (tests/train/alloc_test.cpp). Eigen's blocked GEMM packs panels
// of A (mc x kc) and B (kc x nc) into scratch that it takes from the stack up to this limit and
// from malloc above it, on every call; the default 128 KiB is exceeded by ordinary layers (784
// inputs x 512 outputs packs 800 KiB of A). Eigen 3.4's heuristic
// (evaluateProductBlockingSizesHeuristic) bounds B's panel by half its assumed 1.5 MB cache, so
// B <= 768 KiB always, while A's panel is up to (output width) x kc floats with kc <= ~500: 1 MiB
// covers every layer up to ~512 wide. Worst case a GEMM therefore puts 1 MiB + 768 KiB on the
// calling thread's stack (8 MiB on Linux for the main thread and glibc's std::thread default),
// released when the product returns; wider layers fall back to malloc, correct but allocating.
// This must precede the first Eigen include, and this is the only translation unit that includes
// Eigen, so no other instantiation of its templates sees a different limit.
#define EIGEN_STACK_ALLOCATION_LIMIT (1024 * 1024)
#include <Eigen/Core>

#include "core/ops/vec_math.h"
#if LACONIC_HAVE_ONEDNN
// oneDNN's SGEMM dispatches on the instruction set (AVX-512 where the core has it) and reaches
// ~89% of the measured fp32 peak on the models' shapes, 2x OpenBLAS's Haswell kernels
// (docs/benchmarks.md, "CPU GEMM library"). Its threads are OpenMP's.
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include "core/ops/defer_signals.h"
#elif LACONIC_HAVE_OPENBLAS
// OpenBLAS's single-threaded SGEMM is 1.3-1.7x Eigen's on every layer shape of the BERT and MLP
// models on an AVX2 machine (docs/benchmarks.md, "Training step: Laconic vs PyTorch 1.13").
#include <cblas.h>
#endif
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/rng.h"
#include "core/ops/ops.h"

namespace laconic::ops::cpu {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Map = Eigen::Map<RowMajor>;
// Flat float arrays for elementwise kernels: Eigen evaluates these with AVX packets, including
// exp and erf, which libm evaluates one float at a time.
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;

// C = alpha * opA * opB + beta * C for Eigen expressions opA [m,k], opB [k,n]. beta == 0 assigns,
// so whatever C held before (even NaN) never reaches the result, as BLAS specifies.
template <typename A, typename B>
void gemm_into(Map& c, const A& a, const B& b, float alpha, float beta) {
  if (beta == 0.0f) {
    c.noalias() = alpha * a * b;
    return;
  }
  if (beta != 1.0f) c *= beta;
  c.noalias() += alpha * a * b;
}

}  // namespace

namespace {
std::atomic<int> gemm_thread_count{1};
std::atomic<bool> gemm_threads_set{false};
}  // namespace

void set_gemm_threads(int n) {
  LC_CHECK(n >= 1, "set_gemm_threads: expected n >= 1, got ", n);
  gemm_threads_set = true;
  gemm_thread_count = n;
#if LACONIC_HAVE_OPENBLAS
  openblas_set_num_threads(n);
#endif
}

void keep_gemm_threads() {
  gemm_threads_set = true;
#if LACONIC_HAVE_ONEDNN
  gemm_thread_count = std::max(1, omp_get_max_threads());
#elif LACONIC_HAVE_OPENBLAS
  gemm_thread_count = std::max(1, openblas_get_num_threads());
#endif
}

int gemm_threads() { return gemm_thread_count.load(); }

std::string gemm_library() {
#if LACONIC_HAVE_ONEDNN
  // The instruction set oneDNN dispatches to decides its kernels, hence the last bits of results.
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "unknown";
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: isa = "sse41"; break;
    case dnnl_cpu_isa_avx: isa = "avx"; break;
    case dnnl_cpu_isa_avx2: isa = "avx2"; break;
    case dnnl_cpu_isa_avx512_mic: isa = "avx512_mic"; break;
    case dnnl_cpu_isa_avx512_mic_4ops: isa = "avx512_mic_4ops"; break;
    case dnnl_cpu_isa_avx512_core: isa = "avx512_core"; break;
    case dnnl_cpu_isa_avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl_cpu_isa_avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl_cpu_isa_avx512_core_amx: isa = "avx512_core_amx"; break;
    case dnnl_cpu_isa_avx2_vnni: isa = "avx2_vnni"; break;
    default: break;
  }
  return "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) +
         " " + isa;
#elif LACONIC_HAVE_OPENBLAS
  return std::string("openblas ") + openblas_get_corename();
#else
  return "eigen";
#endif
}

void gemm(float* c, const float* a, const float* b, int m, int n, int k, bool trans_a, bool trans_b,
          float alpha, float beta) {
  LC_CHECK(m >= 0 && n >= 0 && k >= 0, "gemm: negative size m=", m, " n=", n, " k=", k);
  if (m == 0 || n == 0) return;
  Map cm(c, m, n);
  // BLAS semantics: with alpha == 0 or k == 0, A and B are not read (they may hold anything).
  if (alpha == 0.0f || k == 0) {
    if (beta == 0.0f)
      cm.setZero();
    else if (beta != 1.0f)
      cm *= beta;
    return;
  }
#if LACONIC_HAVE_ONEDNN
  // OpenMP's thread count is per calling thread: each rank's thread runs its GEMMs on a team of
  // its own, of gemm_threads() threads (set from the cores per rank), never one pool shared by all.
  const int threads = gemm_thread_count.load(std::memory_order_relaxed);
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  // A signal handled while one of oneDNN 2.6's JIT GEMM kernels runs has its frame (the FPU state
  // with it) written over heap memory, as if the stack pointer pointed there: SIGTERM to an elastic
  // replica corrupted its heap ("corrupted size vs. prev_size"), and a thread signalled during
  // GEMMs does it within seconds (Gemm.SignalsDuringGemmsLeaveTheHeapIntact). So asynchronous
  // signals wait while a GEMM runs (defer_signals.h).
  dnnl_status_t status;
  {
    const DeferSignals deferred;
    status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, trans_a ? m : k, b,
                        trans_b ? k : n, beta, c, n);
  }
  LC_CHECK(status == dnnl_success, "gemm: oneDNN's sgemm failed (status ", static_cast<int>(status), ") for m=", m,
           " n=", n, " k=", k);
#elif LACONIC_HAVE_OPENBLAS
  // OpenBLAS starts with a thread per core, which would oversubscribe the cores of a run whose
  // parallelism is its ranks: until set_gemm_threads says otherwise, one thread (the caller).
  static const bool defaulted = [] {
    if (!gemm_threads_set.load()) openblas_set_num_threads(1);
    return true;
  }();
  (void)defaulted;
  // Row-major, as ours; BLAS leading dimensions are the stored row lengths. With beta == 0 BLAS
  // does not read C (a NaN there does not propagate), as our contract says.
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
#else
  // A stored [m,k] or, transposed, [k,m]; B stored [k,n] or, transposed, [n,k].
  const ConstMap am(a, trans_a ? k : m, trans_a ? m : k);
  const ConstMap bm(b, trans_b ? n : k, trans_b ? k : n);
  if (!trans_a && !trans_b) gemm_into(cm, am, bm, alpha, beta);
  if (!trans_a && trans_b) gemm_into(cm, am, bm.transpose(), alpha, beta);
  if (trans_a && !trans_b) gemm_into(cm, am.transpose(), bm, alpha, beta);
  if (trans_a && trans_b) gemm_into(cm, am.transpose(), bm.transpose(), alpha, beta);
#endif
}

void add_bias(float* y, const float* bias, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    float* row = y + static_cast<std::size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void bias_grad(float* dbias, const float* dy, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* row = dy + static_cast<std::size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) dbias[c] += row[c];
  }
}

void relu_forward(float* y, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(float* dx, const float* dy, const float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi), the normal pdf at 0
}  // namespace

namespace {

// Elementwise kernels run over blocks of this many floats, so their intermediates live in
// fixed-capacity Eigen arrays on the stack (no heap) and stay in L1.
constexpr Eigen::Index kBlock = 256;
using BlockArray = Eigen::Array<float, Eigen::Dynamic, 1, 0, kBlock, 1>;

// Phi(x), the standard normal CDF, for len <= kBlock floats, vectorised (libm's erff is scalar
// and made GELU a tenth of a BERT step). Phi(x) = erfc(-x / sqrt 2) / 2, with erfc(z), z >= 0,
// from the Chebyshev fit erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), whose relative error is
// below 1.2e-7 for every z >= 0 (Press et al., Numerical Recipes, 2nd ed., sec. 6.2, erfcc).
// Relative accuracy in erfc keeps Phi accurate in the negative tail, where 1 + erf(x / sqrt 2)
// cancels (there it is more accurate than the formula with erff); elsewhere the two agree to
// float rounding of values near 1.
void normal_cdf(float* cdf, const float* x, Eigen::Index len) {
  const ConstArrayMap xa(x, len);
  const BlockArray z = xa.abs() * kInvSqrt2;
  const BlockArray t = 1.0f / (1.0f + 0.5f * z);
  BlockArray p = 0.17087277f * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  const BlockArray half_erfc = 0.5f * t * (p - z * z).exp();  // = Phi(-|x|)
  // Phi(x) = Phi(-|x|) for negative x, else 1 - Phi(-|x|); chosen by the sign bit with integer
  // masks, which vectorise (Eigen 3.4's select() is scalar, and so is a float ?: under GCC's
  // default -ftrapping-math).
  for (Eigen::Index i = 0; i < len; ++i) {
    const std::uint32_t negative = 0u - (std::bit_cast<std::uint32_t>(x[i]) >> 31);
    const std::uint32_t lower = std::bit_cast<std::uint32_t>(half_erfc[i]);
    const std::uint32_t upper = std::bit_cast<std::uint32_t>(1.0f - half_erfc[i]);
    cdf[i] = std::bit_cast<float>((lower & negative) | (upper & ~negative));
  }
}

}  // namespace

void gelu_forward(float* y, const float* x, std::size_t n) {
  float cdf[kBlock];
  for (std::size_t i = 0; i < n; i += kBlock) {
    const auto len = static_cast<Eigen::Index>(std::min<std::size_t>(kBlock, n - i));
    normal_cdf(cdf, x + i, len);
    ArrayMap(y + i, len) = ConstArrayMap(x + i, len) * ConstArrayMap(cdf, len);
  }
}

void gelu_backward(float* dx, const float* dy, const float* x, std::size_t n) {
  float cdf[kBlock];
  for (std::size_t i = 0; i < n; i += kBlock) {
    const auto len = static_cast<Eigen::Index>(std::min<std::size_t>(kBlock, n - i));
    normal_cdf(cdf, x + i, len);
    const ConstArrayMap v(x + i, len);
    // Into an aligned block first: evaluated straight into dx, Eigen would peel scalar exp()
    // iterations up to dx's alignment, so the result would depend on where dx lies in memory.
    const BlockArray pdf = kInvSqrt2Pi * (-0.5f * v * v).exp();
    // Elementwise within the block, so dx may alias dy.
    ArrayMap(dx + i, len) = ConstArrayMap(dy + i, len) * (ConstArrayMap(cdf, len) + v * pdf);
  }
}

void layernorm_forward(float* y, float* mean, float* rstd, const float* x, const float* gamma,
                       const float* beta, int rows, int cols, float eps) {
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    float* yr = y + static_cast<std::size_t>(r) * cols;
    // Two passes (mean, then squared deviations): stable where E[x^2] - E[x]^2 would cancel.
    float m = 0.0f;
    for (int c = 0; c < cols; ++c) m += xr[c];
    m *= inv_cols;
    float v = 0.0f;
    for (int c = 0; c < cols; ++c) {
      const float d = xr[c] - m;
      v += d * d;
    }
    const float s = 1.0f / std::sqrt(v * inv_cols + eps);
    for (int c = 0; c < cols; ++c) yr[c] = (xr[c] - m) * s * gamma[c] + beta[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

// With xhat = (x - mean) * rstd and g = dy * gamma (per row, N = cols):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
// (the standard derivation, e.g. llm.c layernorm_backward); dgamma += dy * xhat, dbeta += dy.
void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                        const float* mean, const float* rstd, const float* gamma, int rows, int cols) {
  const float inv_cols = 1.0f / static_cast<float>(cols);
  for (int r = 0; r < rows; ++r) {
    const std::size_t off = static_cast<std::size_t>(r) * cols;
    const float* xr = x + off;
    const float* dyr = dy + off;
    float* dxr = dx + off;
    const float m = mean[r];
    const float s = rstd[r];
    float g_mean = 0.0f;
    float gx_mean = 0.0f;
    for (int c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - m) * s;
      const float g = dyr[c] * gamma[c];
      g_mean += g;
      gx_mean += g * xhat;
      dgamma[c] += dyr[c] * xhat;
      dbeta[c] += dyr[c];
    }
    g_mean *= inv_cols;
    gx_mean *= inv_cols;
    for (int c = 0; c < cols; ++c) {
      const float xhat = (xr[c] - m) * s;
      dxr[c] = s * (dyr[c] * gamma[c] - g_mean - xhat * gx_mean);
    }
  }
}

void embedding_forward(float* y, const std::int32_t* ids, const float* table, int n, int dim) {
  for (int i = 0; i < n; ++i)
    std::copy_n(table + static_cast<std::size_t>(ids[i]) * dim, dim, y + static_cast<std::size_t>(i) * dim);
}

void embedding_backward(float* dtable, const float* dy, const std::int32_t* ids, int n, int dim) {
  for (int i = 0; i < n; ++i) {
    float* row = dtable + static_cast<std::size_t>(ids[i]) * dim;
    const float* g = dy + static_cast<std::size_t>(i) * dim;
    for (int c = 0; c < dim; ++c) row[c] += g[c];
  }
}

void dropout_forward(float* y, const float* x, std::size_t n, float p, std::uint64_t key) {
  LC_CHECK(p >= 0.0f && p < 1.0f, "dropout probability ", p, " is outside [0, 1)");
  const float keep_scale = 1.0f / (1.0f - p);
  // rng::uniform(key, i) = u * 2^-24 with u = bits(key, i) >> 40 an integer below 2^24, so
  // uniform >= p  <=>  u >= p * 2^24  <=>  u >= ceil(p * 2^24) (both sides exact in double): the
  // same mask, decided in integers, which the compiler vectorises (u64 -> float it cannot).
  const auto threshold = static_cast<std::uint64_t>(std::ceil(static_cast<double>(p) * 16777216.0));
  // The product is taken unconditionally and the mask applied to its bits: a conditional float
  // operation keeps the loop scalar under GCC's default -ftrapping-math.
  for (std::size_t i = 0; i < n; ++i) {
    const auto keep = static_cast<std::uint32_t>((rng::bits(key, i) >> 40) >= threshold);
    y[i] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(x[i] * keep_scale) & (0u - keep));
  }
}

void dropout_backward(float* dx, const float* dy, std::size_t n, float p, std::uint64_t key) {
  // The forward map is y = x * mask / (1 - p), so its transpose is the same map applied to dy.
  dropout_forward(dx, dy, n, p, key);
}

void softmax_xent_forward(float* losses, float* probs, const float* logits,
                          const std::int32_t* targets, int rows, int classes, int ignore_index) {
  for (int r = 0; r < rows; ++r) {
    const std::size_t off = static_cast<std::size_t>(r) * classes;
    const float* z = logits + off;
    float* pr = probs + off;
    const std::int32_t t = targets[r];
    LC_CHECK(t == ignore_index || (t >= 0 && t < classes), "target ", t, " in row ", r,
             " is outside [0, ", classes, ") and is not ignore_index ", ignore_index);
    // Subtracting the row max keeps exp() in range (every exponent <= 0, the largest is 1).
    // Vectorised helpers with a fixed order (vec_math.h): libm's scalar expf and one dependent
    // add per class took 2% of a BERT step over its 4000-word vocabulary, and Eigen's packet
    // versions peel to alignment, which made losses depend on where the buffer was allocated.
    const float zmax = vec::row_max(z, classes);
    for (int c = 0; c < classes; ++c) pr[c] = vec::exp_nonpositive(z[c] - zmax);
    const float sum = vec::row_sum(pr, classes);
    const float inv = 1.0f / sum;
    for (int c = 0; c < classes; ++c) pr[c] *= inv;
    // -log p[t] = log(sum) - (z[t] - zmax): finite even when p[t] underflows to 0.
    losses[r] = t == ignore_index ? 0.0f : std::log(sum) - (z[t] - zmax);
  }
}

void softmax_xent_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                           int rows, int classes, int ignore_index, float scale) {
  for (int r = 0; r < rows; ++r) {
    const std::size_t off = static_cast<std::size_t>(r) * classes;
    float* d = dlogits + off;
    const std::int32_t t = targets[r];
    if (t == ignore_index) {
      std::fill_n(d, classes, 0.0f);
      continue;
    }
    const float* pr = probs + off;
    for (int c = 0; c < classes; ++c) d[c] = scale * pr[c];
    d[t] -= scale;
  }
}

void argmax_rows(std::int32_t* out, const float* x, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    int best = 0;
    for (int c = 1; c < cols; ++c)
      if (xr[c] > xr[best]) best = c;
    out[r] = best;
  }
}

void fill(float* x, float value, std::size_t n) { std::fill_n(x, n, value); }

void round_bf16(float* y, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t b = std::bit_cast<std::uint32_t>(x[i]);
    const bool nan = (b & 0x7fffffffu) > 0x7f800000u;
    // Ties to even: add half an ulp of bf16, less one unless the kept last bit is odd. A NaN keeps
    // its sign and gets the quiet bit, so no payload rounds to inf.
    b = nan ? (b | 0x00400000u) : b + 0x7fffu + ((b >> 16) & 1u);
    y[i] = std::bit_cast<float>(b & 0xffff0000u);
  }
}

void scale(float* x, float alpha, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] *= alpha;
}

void axpy(float* y, float alpha, const float* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void gemm_strided_batched(float* c, const float* a, const float* b, int m, int n, int k,
                          bool trans_a, bool trans_b, float alpha, float beta, int batch,
                          std::int64_t stride_c, std::int64_t stride_a, std::int64_t stride_b) {
  LC_CHECK(batch >= 0, "gemm_strided_batched: batch=", batch);
  // One gemm per matrix: the same numbers as the loops of gemm calls this replaced.
  for (int i = 0; i < batch; ++i)
    gemm(c + i * stride_c, a + i * stride_a, b + i * stride_b, m, n, k, trans_a, trans_b, alpha, beta);
}

namespace {

// Calls f(head_offset, row_offset) for each (b, h, t): the element offsets of the D-vector of head h
// at token t of sequence b in [B, H, T, D] and in the [B*T, stride] row layout (column offset +h*D).
template <typename F>
void for_each_head_vector(int batch, int seq, int heads, int head_dim, int stride, int offset, F f) {
  const std::size_t d = static_cast<std::size_t>(head_dim);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int t = 0; t < seq; ++t)
        f(((static_cast<std::size_t>(b) * heads + h) * seq + t) * d,
          (static_cast<std::size_t>(b) * seq + t) * stride + offset + h * d);
}

}  // namespace

void split_heads(float* out, const float* in, int batch, int seq, int heads, int head_dim,
                 int stride, int offset) {
  const std::size_t bytes = static_cast<std::size_t>(head_dim) * sizeof(float);
  for_each_head_vector(batch, seq, heads, head_dim, stride, offset,
                       [&](std::size_t ho, std::size_t ro) { std::memcpy(out + ho, in + ro, bytes); });
}

void merge_heads(float* out, const float* in, int batch, int seq, int heads, int head_dim,
                 int stride, int offset) {
  const std::size_t bytes = static_cast<std::size_t>(head_dim) * sizeof(float);
  for_each_head_vector(batch, seq, heads, head_dim, stride, offset,
                       [&](std::size_t ho, std::size_t ro) { std::memcpy(out + ro, in + ho, bytes); });
}

namespace {
// Row r softmaxed over its first width(r) columns; the rest are set to 0.
template <typename Width>
void softmax_rows_prefix(float* y, const float* x, int rows, int cols, Width width) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * cols;
    float* yr = y + static_cast<std::size_t>(r) * cols;
    const int w = width(r);
    vec::softmax_row(yr, xr, w);
    std::fill(yr + w, yr + cols, 0.0f);
  }
}
}  // namespace

void softmax_rows_forward(float* y, const float* x, int rows, int cols) {
  softmax_rows_prefix(y, x, rows, cols, [cols](int) { return cols; });
}

void softmax_causal_forward(float* y, const float* x, int rows, int cols) {
  softmax_rows_prefix(y, x, rows, cols, [cols](int r) { return r % cols + 1; });
}

void softmax_rows_backward(float* dx, const float* dy, const float* y, int rows, int cols) {
  // Jacobian of softmax: dy_c/dx_c' = y_c (delta_cc' - y_c'), so dx = y * (dy - <dy, y>).
  for (int r = 0; r < rows; ++r) {
    const float* dyr = dy + static_cast<std::size_t>(r) * cols;
    const float* yr = y + static_cast<std::size_t>(r) * cols;
    float* dxr = dx + static_cast<std::size_t>(r) * cols;
    const float dot = vec::row_dot(dyr, yr, cols);
    for (int c = 0; c < cols; ++c) dxr[c] = yr[c] * (dyr[c] - dot);
  }
}

void add(float* y, const float* a, const float* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void scatter_rows(float* out, const float* x, const std::int32_t* idx, int n, int dim) {
  for (int i = 0; i < n; ++i)
    std::copy_n(x + static_cast<std::size_t>(i) * dim, dim, out + static_cast<std::size_t>(idx[i]) * dim);
}

void iota_mod(std::int32_t* out, int n, int period) {
  LC_CHECK(period > 0 || n == 0, "iota_mod: period=", period);
  for (int i = 0; i < n; ++i) out[i] = i % period;
}

void xent_stats(double* stats, const float* losses, const std::int32_t* argmax,
                const std::int32_t* targets, int rows, int ignore_index) {
  // In double: a mean over many tokens should not depend much on the summation order.
  double sum = 0.0;
  std::int64_t counted = 0, correct = 0;
  for (int i = 0; i < rows; ++i) {
    if (targets[i] == ignore_index) continue;
    ++counted;
    sum += losses[i];
    if (argmax[i] == targets[i]) ++correct;
  }
  stats[0] = sum;
  stats[1] = static_cast<double>(counted);
  stats[2] = static_cast<double>(correct);
}

}  // namespace laconic::ops::cpu
