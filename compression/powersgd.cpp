#include "compression/powersgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "compression/cuda/reducers_cuda.h"  // plain C++; its functions are called only with LACONIC_HAVE_CUDA
#include "core/check.h"
#include "core/rng.h"

// Without -march=native GCC notes that returning 32-byte vectors by value has an ABI that depends
// on AVX; the helpers below are internal to this file and inlined, so no ABI is involved.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace laconic {
namespace powersgd {
namespace {

// The three GEMM passes stream M once each and are memory-bound: the kernels keep up to four
// columns of P or Q in vector registers (GCC vector extensions; two 128-bit halves without AVX)
// and split larger ranks into chunks of four, re-reading the row from L1.
using v8 = float __attribute__((vector_size(32)));
constexpr std::size_t kLanes = 8;
constexpr std::size_t kChunk = 4;
// Householder QR keeps one float per column on the stack.
constexpr std::size_t kMaxQrCols = 256;

inline v8 load(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, const v8& v) { std::memcpy(p, &v, sizeof v); }
inline float hsum(const v8& v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// out[c] = dot(x, qt[c]) for C columns of Q (qt rows of length n). With AddError, first
// x += e, in the same pass (M += error fused into P = M Q).
template <std::size_t C, bool AddError>
void dots(float* x, const float* e, const float* qt, std::size_t n, float* out) {
  v8 a[C] = {}, b[C] = {};  // two accumulators per column hide the add latency
  auto row = [&](std::size_t k) {
    if constexpr (AddError) {
      const v8 v = load(x + k) + load(e + k);
      store(x + k, v);
      return v;
    } else {
      return load(x + k);
    }
  };
  std::size_t k = 0;
  for (; k + 2 * kLanes <= n; k += 2 * kLanes) {
    const v8 x0 = row(k), x1 = row(k + kLanes);
    for (std::size_t c = 0; c < C; ++c) {
      a[c] += x0 * load(qt + c * n + k);
      b[c] += x1 * load(qt + c * n + k + kLanes);
    }
  }
  for (; k + kLanes <= n; k += kLanes) {
    const v8 x0 = row(k);
    for (std::size_t c = 0; c < C; ++c) a[c] += x0 * load(qt + c * n + k);
  }
  if constexpr (AddError) {
    for (std::size_t t = k; t < n; ++t) x[t] += e[t];
  }
  for (std::size_t c = 0; c < C; ++c) {
    float s = hsum(a[c] + b[c]);
    for (std::size_t t = k; t < n; ++t) s += x[t] * qt[c * n + t];
    out[c] = s;
  }
}

// qt[c] += sum over the B rows x[b] of p[b][c] x[b], for C columns (qt rows of length n; rows of
// x `stride` apart, of p `r` apart). Each qt vector is loaded once per B rows, which keeps the
// accumulators' L2 traffic below M's memory traffic; the rows are still added in order.
template <std::size_t C, std::size_t B>
void axpys(const float* x, std::size_t stride, const float* p, std::size_t r, std::size_t n, float* qt) {
  v8 pv[B][C];
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t c = 0; c < C; ++c) pv[b][c] = v8{} + p[b * r + c];
  std::size_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    v8 acc[C];
    for (std::size_t c = 0; c < C; ++c) acc[c] = load(qt + c * n + k);
    for (std::size_t b = 0; b < B; ++b) {
      const v8 xv = load(x + b * stride + k);
      for (std::size_t c = 0; c < C; ++c) acc[c] += xv * pv[b][c];
    }
    for (std::size_t c = 0; c < C; ++c) store(qt + c * n + k, acc[c]);
  }
  for (; k < n; ++k)
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t c = 0; c < C; ++c) qt[c * n + k] += x[b * stride + k] * p[b * r + c];
}

// One row of P Q^T over C columns of Q, added in column order to `acc` (or starting from the
// first product when First). When Last, the row is final: err = m - row (if err), m = row;
// otherwise it goes to acc. The sum runs over the columns in order, whatever the chunking.
template <std::size_t C, bool First, bool Last>
void reconstruct(const float* p, const float* qt, std::size_t n, float* acc, float* m, float* err) {
  v8 pv[C];
  for (std::size_t c = 0; c < C; ++c) pv[c] = v8{} + p[c];
  auto finish = [&](std::size_t k, const v8& h) {
    if constexpr (Last) {
      if (err) store(err + k, load(m + k) - h);
      store(m + k, h);
    } else {
      store(acc + k, h);
    }
  };
  std::size_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    v8 h;
    if constexpr (First) {
      h = pv[0] * load(qt + k);
    } else {
      h = load(acc + k) + pv[0] * load(qt + k);
    }
    for (std::size_t c = 1; c < C; ++c) h += pv[c] * load(qt + c * n + k);
    finish(k, h);
  }
  for (; k < n; ++k) {
    float h = First ? p[0] * qt[k] : acc[k] + p[0] * qt[k];
    for (std::size_t c = 1; c < C; ++c) h += p[c] * qt[c * n + k];
    if constexpr (Last) {
      if (err) err[k] = m[k] - h;
      m[k] = h;
    } else {
      acc[k] = h;
    }
  }
}

// Calls f(std::integral_constant<size_t, C>) with C = c (1..4).
template <class F>
void with_chunk(std::size_t c, F&& f) {
  switch (c) {
    case 1: f(std::integral_constant<std::size_t, 1>{}); break;
    case 2: f(std::integral_constant<std::size_t, 2>{}); break;
    case 3: f(std::integral_constant<std::size_t, 3>{}); break;
    default: f(std::integral_constant<std::size_t, 4>{}); break;
  }
}

template <std::size_t C>
void reconstruct_chunk(bool first, bool last, const float* p, const float* qt, std::size_t n, float* acc,
                       float* m, float* err) {
  if (first && last) reconstruct<C, true, true>(p, qt, n, acc, m, err);
  else if (first) reconstruct<C, true, false>(p, qt, n, acc, m, err);
  else if (last) reconstruct<C, false, true>(p, qt, n, acc, m, err);
  else reconstruct<C, false, false>(p, qt, n, acc, m, err);
}

// Applies H = I - tau v v^T (v = a[i.., i] with v[0] = 1 implied) from the left to columns
// i+1..cols-1 of rows i..rows-1 of a row-major matrix: LAPACK's slarf with w = C^T v
// (accumulated in double) and the rank-1 update C += v (-tau w)^T as sger does it.
void apply_reflector(float* a, std::size_t rows, std::size_t cols, std::size_t i, float tau) {
  if (tau == 0.0f) return;
  for (std::size_t j = i + 1; j < cols; ++j) {
    double w = a[i * cols + j];
    for (std::size_t l = i + 1; l < rows; ++l) w += static_cast<double>(a[l * cols + i]) * a[l * cols + j];
    const float t = -tau * static_cast<float>(w);
    a[i * cols + j] += t;
    for (std::size_t l = i + 1; l < rows; ++l) a[l * cols + j] += a[l * cols + i] * t;
  }
}

}  // namespace

std::size_t tensor_rank(std::size_t rows, std::size_t cols, int rank) {
  LC_CHECK(rank >= 1, "PowerSGD rank must be at least 1, got ", rank);
  return std::min({rows, cols, static_cast<std::size_t>(rank)});
}

bool should_compress(std::size_t rows, std::size_t cols, std::size_t rank, double min_compression_rate) {
  const double compressed = static_cast<double>((rows + cols) * rank);
  return compressed * min_compression_rate < static_cast<double>(rows * cols);
}

void orthogonalize(std::span<float> a, std::size_t rows, std::size_t cols, float epsilon) {
  if (cols <= 2) {
    gram_schmidt(a, rows, cols, epsilon);
  } else {
    householder_qr(a, rows, cols);
  }
}

void gram_schmidt(std::span<float> a, std::size_t rows, std::size_t cols, float epsilon) {
  LC_CHECK(a.size() == rows * cols && cols <= rows, "gram_schmidt: ", a.size(), " values for ", rows, " x ",
           cols);
  float* x = a.data();
  for (std::size_t i = 0; i < cols; ++i) {
    double ss = 0;
    for (std::size_t l = 0; l < rows; ++l) ss += static_cast<double>(x[l * cols + i]) * x[l * cols + i];
    const float norm = static_cast<float>(std::sqrt(ss));
    // torch divides by the norm (plus epsilon when it is set); 0/0 there is NaN, we keep zeros.
    const float d = epsilon == 0.0f ? norm : norm + epsilon;
    if (d != 0.0f) {
      for (std::size_t l = 0; l < rows; ++l) x[l * cols + i] /= d;
    }
    for (std::size_t j = i + 1; j < cols; ++j) {
      double dot = 0;
      for (std::size_t l = 0; l < rows; ++l) dot += static_cast<double>(x[l * cols + i]) * x[l * cols + j];
      const float s = static_cast<float>(dot);
      for (std::size_t l = 0; l < rows; ++l) x[l * cols + j] -= s * x[l * cols + i];
    }
  }
}

void householder_qr(std::span<float> a, std::size_t rows, std::size_t cols) {
  LC_CHECK(a.size() == rows * cols && cols <= rows, "householder_qr: ", a.size(), " values for ", rows,
           " x ", cols);
  LC_CHECK(cols <= kMaxQrCols, "householder_qr supports up to ", kMaxQrCols, " columns, got ", cols);
  float* x = a.data();
  float tau[kMaxQrCols];
  // sgeqr2: reflector i zeroes column i below the diagonal (slarfg), then updates the columns
  // to its right. The reflector's tail stays below the diagonal, R on and above it.
  for (std::size_t i = 0; i < cols; ++i) {
    float& alpha = x[i * cols + i];
    tau[i] = 0.0f;
    double ss = 0;
    for (std::size_t l = i + 1; l < rows; ++l) ss += static_cast<double>(x[l * cols + i]) * x[l * cols + i];
    const float xnorm = static_cast<float>(std::sqrt(ss));
    if (xnorm != 0.0f) {  // otherwise H = I (tau 0): R's diagonal keeps alpha's sign
      const float beta =
          -std::copysign(static_cast<float>(std::hypot(static_cast<double>(alpha), static_cast<double>(xnorm))),
                         alpha);
      tau[i] = (beta - alpha) / beta;
      const float scale = 1.0f / (alpha - beta);
      for (std::size_t l = i + 1; l < rows; ++l) x[l * cols + i] *= scale;
      alpha = beta;
    }
    apply_reflector(x, rows, cols, i, tau[i]);
  }
  // sorg2r: Q = H_0 H_1 ... H_{cols-1} applied to the first cols columns of I, built in place
  // from the last reflector back.
  for (std::size_t i = cols; i-- > 0;) {
    apply_reflector(x, rows, cols, i, tau[i]);
    for (std::size_t l = i + 1; l < rows; ++l) x[l * cols + i] *= -tau[i];
    x[i * cols + i] = 1.0f - tau[i];
    for (std::size_t l = 0; l < i; ++l) x[l * cols + i] = 0.0f;
  }
}

void transpose(std::span<const float> a, std::size_t rows, std::size_t cols, std::span<float> out) {
  LC_CHECK(a.size() == rows * cols && out.size() >= rows * cols, "transpose of ", rows, " x ", cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) out[j * rows + i] = a[i * cols + j];
}

void compute_p(std::span<float> m, std::span<const float> error, std::size_t rows, std::size_t cols,
               std::span<const float> qt, std::size_t r, std::span<float> p) {
  LC_CHECK(m.size() == rows * cols && (error.empty() || error.size() == m.size()) && qt.size() >= r * cols &&
               p.size() == rows * r,
           "compute_p: sizes do not match ", rows, " x ", cols, " rank ", r);
  for (std::size_t i = 0; i < rows; ++i) {
    float* row = m.data() + i * cols;
    const float* e = error.empty() ? nullptr : error.data() + i * cols;
    for (std::size_t c = 0; c < r; c += kChunk) {
      with_chunk(std::min(kChunk, r - c), [&](auto n) {
        constexpr std::size_t C = decltype(n)::value;
        float* out = p.data() + i * r + c;
        if (e && c == 0) {  // the first chunk adds the error; later ones read the sum
          dots<C, true>(row, e, qt.data(), cols, out);
        } else {
          dots<C, false>(row, nullptr, qt.data() + c * cols, cols, out);
        }
      });
    }
  }
}

void compute_qt(std::span<const float> m, std::size_t rows, std::size_t cols, std::span<const float> p,
                std::size_t r, std::span<float> qt) {
  LC_CHECK(m.size() == rows * cols && p.size() == rows * r && qt.size() >= r * cols,
           "compute_qt: sizes do not match ", rows, " x ", cols, " rank ", r);
  std::fill_n(qt.data(), r * cols, 0.0f);
  constexpr std::size_t kBlock = 4;
  for (std::size_t i = 0; i < rows;) {
    const std::size_t b = rows - i >= kBlock ? kBlock : 1;
    const float* x = m.data() + i * cols;
    for (std::size_t c = 0; c < r; c += kChunk) {
      with_chunk(std::min(kChunk, r - c), [&](auto n) {
        constexpr std::size_t C = decltype(n)::value;
        if (b == kBlock) {
          axpys<C, kBlock>(x, cols, p.data() + i * r + c, r, cols, qt.data() + c * cols);
        } else {
          axpys<C, 1>(x, cols, p.data() + i * r + c, r, cols, qt.data() + c * cols);
        }
      });
    }
    i += b;
  }
}

void decompress(std::span<float> m, std::span<float> error, std::size_t rows, std::size_t cols,
                std::span<const float> p, std::span<const float> qt, std::size_t r, std::span<float> row) {
  LC_CHECK(m.size() == rows * cols && (error.empty() || error.size() == m.size()) && p.size() == rows * r &&
               qt.size() >= r * cols && (r <= kChunk || row.size() >= cols),
           "decompress: sizes do not match ", rows, " x ", cols, " rank ", r);
  for (std::size_t i = 0; i < rows; ++i) {
    float* mi = m.data() + i * cols;
    float* ei = error.empty() ? nullptr : error.data() + i * cols;
    for (std::size_t c = 0; c < r; c += kChunk) {
      const std::size_t n = std::min(kChunk, r - c);
      with_chunk(n, [&](auto k) {
        reconstruct_chunk<decltype(k)::value>(c == 0, c + n == r, p.data() + i * r + c, qt.data() + c * cols, cols,
                                              row.data(), mi, ei);
      });
    }
  }
}

void init_q(std::span<float> q, std::uint64_t seed, int bucket_id, std::int64_t step, bool warm_start) {
  constexpr std::uint64_t kPowerSgd = 0x50535344;  // "PSGD": keeps this stream apart from other inits
  const std::uint64_t key =
      warm_start ? rng::key({seed, rng::kInit, kPowerSgd, static_cast<std::uint64_t>(bucket_id)})
                 : rng::key({seed, rng::kInit, kPowerSgd, static_cast<std::uint64_t>(bucket_id),
                             static_cast<std::uint64_t>(step)});
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = rng::normal(key, i);
}

}  // namespace powersgd

// The device-side tables of each bucket, built in prepare() (cuda only).
struct PowerSgdReducer::CudaTables {
  struct PerBucket {
    DeviceArray<std::uint32_t> dense;           // bucket positions of the uncompressed tensors, in order
    DeviceArray<reducers_cuda::OrthoJob> q, p;  // each matrix's Q and P, for orthogonalize()
  };
  std::vector<PerBucket> buckets;
};

PowerSgdReducer::~PowerSgdReducer() = default;

PowerSgdReducer::PowerSgdReducer(PowerSgdOptions opts) : opts_(opts), concat_(opts.device) {
  check_reducer_device(opts.device, "PowerSGD");
  LC_CHECK(opts_.rank >= 1 && static_cast<std::size_t>(opts_.rank) <= powersgd::kMaxQrCols,
           "PowerSGD rank must be in [1, 256], got ", opts_.rank);
  LC_CHECK(opts_.min_compression_rate >= 0, "PowerSGD min_compression_rate must be >= 0, got ",
           opts_.min_compression_rate);
  LC_CHECK(opts_.start_iter >= 0, "PowerSGD start_iter must be >= 0, got ", opts_.start_iter);
  LC_CHECK(opts_.orthogonalization_epsilon >= 0, "PowerSGD orthogonalization epsilon must be >= 0");
}

void PowerSgdReducer::prepare(std::span<const BucketLayout> buckets) {
  buckets_.clear();
  buckets_.resize(buckets.size());
  std::size_t concat = 0, qt = 0, row = 0;
  for (std::size_t id = 0; id < buckets.size(); ++id) {
    const BucketLayout& layout = buckets[id];
    LC_CHECK(layout.id == static_cast<int>(id), "bucket ", id, " has id ", layout.id);
    Bucket& b = buckets_[id];
    b.size = layout.size;
    // Compressed tensors grouped by (rows, cols) in order of first appearance, like torch.
    std::vector<std::pair<std::size_t, std::size_t>> shapes;
    std::size_t next = 0;
    for (const TensorShape& t : layout.tensors) {
      LC_CHECK(t.offset == next, "bucket ", id, ": tensor at ", t.offset, " does not follow the previous one (", next,
               ")");
      next += t.numel();
      const std::size_t r = powersgd::tensor_rank(t.rows, t.cols, opts_.rank);
      if (powersgd::should_compress(t.rows, t.cols, r, opts_.min_compression_rate)) {
        if (std::find(shapes.begin(), shapes.end(), std::pair{t.rows, t.cols}) == shapes.end())
          shapes.emplace_back(t.rows, t.cols);
      } else {
        b.dense.push_back(Slice{t.offset, t.numel()});
        b.dense_size += t.numel();
      }
    }
    LC_CHECK(next == layout.size, "bucket ", id, ": tensors cover ", next, " of ", layout.size, " elements");
    for (const auto& [rows, cols] : shapes) {
      for (const TensorShape& t : layout.tensors) {
        if (t.rows != rows || t.cols != cols) continue;
        const std::size_t r = powersgd::tensor_rank(rows, cols, opts_.rank);
        b.matrices.push_back(Matrix{t.offset, rows, cols, r, b.p_size, b.q_size});
        b.p_size += rows * r;
        b.q_size += cols * r;
        qt = std::max(qt, cols * r);
        row = std::max(row, cols);
      }
    }
    concat = std::max(concat, b.dense_size);
    const Device dev = opts_.device;
    if (opts_.error_feedback) b.error = DeviceArray<float>(dev, b.size);  // zeroed
    b.p = DeviceArray<float>(dev, b.p_size);
    b.q = DeviceArray<float>(dev, b.q_size);
    if (dev == Device::cpu) {
      powersgd::init_q(b.q.span(), opts_.seed, static_cast<int>(id), 0, opts_.warm_start);
    } else {
      std::vector<float> q(b.q_size);
      powersgd::init_q(q, opts_.seed, static_cast<int>(id), 0, opts_.warm_start);
      b.q.upload(q);
    }
  }
  concat_ = DeviceArray<float>(opts_.device, concat);
  if (opts_.device == Device::cpu) {
    qt_.assign(qt, 0.0f);
    row_.assign(row, 0.0f);
    return;
  }
  // cuda: the tables the device passes use, and the host staging of a fresh Q.
  cuda_ = std::make_unique<CudaTables>();
  std::size_t q_max = 0;
  for (Bucket& b : buckets_) {
    CudaTables::PerBucket& t = cuda_->buckets.emplace_back();
    std::vector<std::uint32_t> dense;
    for (const Slice& d : b.dense)
      for (std::size_t k = d.offset; k < d.offset + d.size; ++k) dense.push_back(static_cast<std::uint32_t>(k));
    std::vector<reducers_cuda::OrthoJob> q, p;
    for (const Matrix& m : b.matrices) {
      LC_CHECK(m.rows <= 0xffffffffu && m.cols <= 0xffffffffu && b.size <= 0xffffffffu, "PowerSGD on cuda: bucket of ",
               b.size, " elements is too large");
      q.push_back({b.q.data() + m.q_offset, static_cast<std::uint32_t>(m.cols), static_cast<std::uint32_t>(m.rank)});
      p.push_back({b.p.data() + m.p_offset, static_cast<std::uint32_t>(m.rows), static_cast<std::uint32_t>(m.rank)});
    }
    t.dense = DeviceArray<std::uint32_t>(Device::cuda, dense.size());
    t.dense.upload(dense);
    t.q = DeviceArray<reducers_cuda::OrthoJob>(Device::cuda, q.size());
    t.q.upload(q);
    t.p = DeviceArray<reducers_cuda::OrthoJob>(Device::cuda, p.size());
    t.p.upload(p);
    q_max = std::max(q_max, b.q_size);
  }
  if (!opts_.warm_start) q_host_.assign(q_max, 0.0f);
}

void PowerSgdReducer::reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step,
                             Communicator& comm) {
  LC_CHECK(bucket.id >= 0 && static_cast<std::size_t>(bucket.id) < buckets_.size(), "bucket ", bucket.id,
           " was not prepared (", buckets_.size(), " buckets)");
  Bucket& b = buckets_[static_cast<std::size_t>(bucket.id)];
  LC_CHECK(data.size() == b.size && bucket.size == b.size, "bucket ", bucket.id, " was prepared with ", b.size,
           " elements, got ", data.size());
  ReducerStats s;
  s.calls = 1;
  s.input_bytes = data.size_bytes();
  check_comm_memory(opts_.device, comm, "PowerSGD");
  if (step < opts_.start_iter) {
    // torch's default hook: divide first, then sum.
    s.value_bytes = data.size_bytes();
    account(s);
    const float n = static_cast<float>(comm.size());
    if (opts_.device == Device::cuda) {
#if defined(LACONIC_HAVE_CUDA)
      reducers_cuda::divide(data.data(), n, data.size());
#endif
    } else {
      for (float& x : data) x /= n;
    }
    comm.all_reduce(data, ReduceOp::sum);
    return;
  }
  s.value_bytes = sizeof(float) * (b.p_size + b.q_size + b.dense_size);
  account(s);
  if (opts_.device == Device::cuda) {
    reduce_cuda(data, b, bucket.id, step, comm);
    return;
  }
  float* x = data.data();
  float* err = opts_.error_feedback ? b.error.data() : nullptr;

  // Uncompressed tensors: M += error, concatenate, average; error = local - average.
  if (b.dense_size > 0) {
    std::size_t at = 0;
    for (const Slice& t : b.dense) {
      for (std::size_t k = t.offset; k < t.offset + t.size; ++k) {
        if (err) x[k] += err[k];
        concat_.data()[at++] = x[k];
      }
    }
    const std::span<float> avg(concat_.data(), b.dense_size);
    comm.all_reduce(avg, ReduceOp::avg);  // sum, then / world size: torch's order
    at = 0;
    for (const Slice& t : b.dense) {
      for (std::size_t k = t.offset; k < t.offset + t.size; ++k) {
        if (err) err[k] = x[k] - avg[at];
        x[k] = avg[at++];
      }
    }
  }
  if (b.matrices.empty()) return;

  auto matrix = [&](const Matrix& t) { return std::span<float>(x + t.offset, t.rows * t.cols); };
  auto error = [&](const Matrix& t) {
    return err ? std::span<float>(err + t.offset, t.rows * t.cols) : std::span<float>();
  };
  auto p_of = [&](const Matrix& t) { return std::span<float>(b.p.data() + t.p_offset, t.rows * t.rank); };
  auto q_of = [&](const Matrix& t) { return std::span<float>(b.q.data() + t.q_offset, t.cols * t.rank); };
  const std::span<float> qt(qt_);
  const float eps = opts_.orthogonalization_epsilon;

  if (!opts_.warm_start) powersgd::init_q(b.q.span(), opts_.seed, bucket.id, step, false);
  // P = (M + error) Q with Q orthogonalized (warm start: last step's Q).
  for (const Matrix& t : b.matrices) {
    powersgd::orthogonalize(q_of(t), t.cols, t.rank, eps);
    powersgd::transpose(q_of(t), t.cols, t.rank, qt);
    powersgd::compute_p(matrix(t), error(t), t.rows, t.cols, qt, t.rank, p_of(t));
  }
  comm.all_reduce(b.p.span(), ReduceOp::sum);  // orthogonalized next: no division needed
  // Q = M^T P, averaged.
  for (const Matrix& t : b.matrices) {
    powersgd::orthogonalize(p_of(t), t.rows, t.rank, eps);
    powersgd::compute_qt(matrix(t), t.rows, t.cols, p_of(t), t.rank, qt);
    powersgd::transpose(qt.first(t.rank * t.cols), t.rank, t.cols, q_of(t));
  }
  comm.all_reduce(b.q.span(), ReduceOp::avg);
  // M = P Q^T; error = (M + error) - P Q^T.
  for (const Matrix& t : b.matrices) {
    powersgd::transpose(q_of(t), t.cols, t.rank, qt);
    powersgd::decompress(matrix(t), error(t), t.rows, t.cols, p_of(t), qt, t.rank, row_);
  }
}

void PowerSgdReducer::reduce_cuda(std::span<float> data, Bucket& b, int id, std::int64_t step, Communicator& comm) {
#if defined(LACONIC_HAVE_CUDA)
  namespace rc = reducers_cuda;
  const CudaTables::PerBucket& tables = cuda_->buckets[static_cast<std::size_t>(id)];
  float* x = data.data();
  float* err = opts_.error_feedback ? b.error.data() : nullptr;
  // M += error over the whole bucket (the CPU fuses it into its first pass over each tensor).
  if (err) rc::add_into(x, err, b.size);
  // Uncompressed tensors: concatenate, average, error = local - average.
  if (b.dense_size > 0) {
    rc::gather(concat_.data(), x, tables.dense.data(), b.dense_size);
    comm.all_reduce(concat_.span().first(b.dense_size), ReduceOp::avg);
    rc::scatter_average(x, err, concat_.data(), tables.dense.data(), b.dense_size);
  }
  if (b.matrices.empty()) return;
  if (!opts_.warm_start) {
    const std::span<float> q = std::span(q_host_).first(b.q_size);
    powersgd::init_q(q, opts_.seed, id, step, false);
    b.q.upload(q);
  }
  const float eps = opts_.orthogonalization_epsilon;
  // P = M Q with Q orthogonalized; summed.
  rc::orthogonalize(tables.q.data(), b.matrices.size(), eps);
  for (const Matrix& t : b.matrices)
    rc::compute_p(b.p.data() + t.p_offset, x + t.offset, b.q.data() + t.q_offset, t.rows, t.cols, t.rank);
  comm.all_reduce(b.p.span(), ReduceOp::sum);
  // Q = M^T P with P orthogonalized; averaged.
  rc::orthogonalize(tables.p.data(), b.matrices.size(), eps);
  for (const Matrix& t : b.matrices)
    rc::compute_q(b.q.data() + t.q_offset, x + t.offset, b.p.data() + t.p_offset, t.rows, t.cols, t.rank);
  comm.all_reduce(b.q.span(), ReduceOp::avg);
  // M = P Q^T; error = (M + error) - P Q^T.
  for (const Matrix& t : b.matrices)
    rc::decompress(x + t.offset, err ? err + t.offset : nullptr, b.p.data() + t.p_offset, b.q.data() + t.q_offset,
                   t.rows, t.cols, t.rank);
#else
  (void)data, (void)b, (void)id, (void)step, (void)comm;
  no_cuda_build("PowerSGD");
#endif
}

std::string PowerSgdReducer::describe() const {
  std::ostringstream os;
  os << "powersgd rank " << opts_.rank << " (dense before step " << opts_.start_iter << ", min compression "
     << opts_.min_compression_rate << ", error feedback " << (opts_.error_feedback ? "on" : "off")
     << ", warm start " << (opts_.warm_start ? "on" : "off") << (opts_.device == Device::cuda ? ", on cuda" : "")
     << ")";
  return os.str();
}

std::vector<StateTensor> PowerSgdReducer::state() {
  std::vector<StateTensor> out;
  for (std::size_t id = 0; id < buckets_.size(); ++id) {
    Bucket& b = buckets_[id];
    if (opts_.error_feedback) out.push_back({"powersgd.error." + std::to_string(id), b.error.span(), opts_.device});
    if (!b.q.empty()) out.push_back({"powersgd.q." + std::to_string(id), b.q.span(), opts_.device});
  }
  return out;
}

}  // namespace laconic
