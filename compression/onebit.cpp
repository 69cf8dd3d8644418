#include "compression/onebit.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/check.h"

// Plain C++; its functions are defined (and called) only with LACONIC_HAVE_CUDA.
#include "compression/cuda/reducers_cuda.h"

namespace laconic {

// The kernels are memory-bound passes over the chunk. GCC does not vectorise "8 compares -> one
// byte" on its own (it would need movemask), so the AVX2 build has explicit 8-float bodies; the
// scalar loops that finish the tail (and run everything elsewhere) compute the same bits, the
// same residuals and, lane for lane, the same scale sums.
namespace {

float flip(float s, bool negative) {  // -s or s, exactly: the sign bit toggled
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(s) ^ (std::uint32_t{negative} << 31));
}

// sum |acc| or sum acc^2 in double, in 8 lanes (element i in lane i % 8), added pairwise.
// Double makes the squares exact and the sums nearly so; the lanes make it fast and order-fixed.
template <bool kSquare>
double lane_sum(const float* x, const float* e, std::size_t n) {
  double lane[8] = {};
  std::size_t i = 0;
#if defined(__AVX2__)
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_loadu_ps(x + i);
    if (e) a = _mm256_add_ps(a, _mm256_loadu_ps(e + i));
    if (!kSquare) a = _mm256_and_ps(a, abs_mask);
    __m256d l = _mm256_cvtps_pd(_mm256_castps256_ps128(a)), h = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
    if (kSquare) {
      l = _mm256_mul_pd(l, l);
      h = _mm256_mul_pd(h, h);
    }
    lo = _mm256_add_pd(lo, l);
    hi = _mm256_add_pd(hi, h);
  }
  _mm256_storeu_pd(lane, lo);
  _mm256_storeu_pd(lane + 4, hi);
#endif
  for (; i < n; ++i) {
    const double a = e ? x[i] + e[i] : x[i];
    lane[i % 8] += kSquare ? a * a : std::fabs(a);
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// bits = sign(x + e), e = x + e - s * sign (when e is given). Whole bytes only; n % 8 == 0 for all
// but the last call of a chunk.
void pack(const float* x, float* e, std::uint8_t* bits, std::size_t n, float s) {
  std::size_t i = 0;
#if defined(__AVX2__)
  const __m256 zero = _mm256_setzero_ps(), sv = _mm256_set1_ps(s);
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_loadu_ps(x + i);
    if (e) a = _mm256_add_ps(a, _mm256_loadu_ps(e + i));
    const __m256 neg = _mm256_cmp_ps(a, zero, _CMP_LT_OQ);  // false for 0, -0 and NaN: sign +1
    bits[i / 8] = static_cast<std::uint8_t>(_mm256_movemask_ps(neg));
    if (e) _mm256_storeu_ps(e + i, _mm256_sub_ps(a, _mm256_xor_ps(sv, _mm256_and_ps(neg, sign))));
  }
#endif
  for (; i < n; i += 8) {
    const std::size_t m = std::min<std::size_t>(8, n - i);
    std::uint32_t byte = 0;
    for (std::size_t k = 0; k < m; ++k) {
      const float a = e ? x[i + k] + e[i + k] : x[i + k];
      const bool neg = a < 0.0f;
      byte |= std::uint32_t{neg} << k;
      if (e) e[i + k] = a - flip(s, neg);
    }
    bits[i / 8] = static_cast<std::uint8_t>(byte);
  }
}

// out = s * sign, or out = out + s * sign.
template <bool kAdd>
void unpack(const std::uint8_t* bits, float s, float* out, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX2__)
  const __m256 sv = _mm256_set1_ps(s);
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i to_sign = _mm256_setr_epi32(31, 30, 29, 28, 27, 26, 25, 24);  // bit k -> bit 31 of lane k
  for (; i + 8 <= n; i += 8) {
    const __m256i b = _mm256_sllv_epi32(_mm256_set1_epi32(bits[i / 8]), to_sign);
    __m256 v = _mm256_xor_ps(sv, _mm256_castsi256_ps(_mm256_and_si256(b, sign)));
    if (kAdd) v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
    _mm256_storeu_ps(out + i, v);
  }
#endif
  for (; i < n; ++i) {
    const float v = flip(s, (bits[i / 8] >> (i % 8)) & 1u);
    out[i] = kAdd ? out[i] + v : v;
  }
}

void check_packed(std::span<const std::uint8_t> bits, std::size_t n) {
  LC_CHECK(bits.size() >= onebit_packed_bytes(n), n, " signs need ", onebit_packed_bytes(n), " bytes, got ",
           bits.size());
}

}  // namespace


float onebit_scale(std::span<const float> x, std::span<const float> error, OneBitOptions::Scale s) {
  LC_CHECK(error.empty() || error.size() == x.size(), "error has ", error.size(), " elements, x ", x.size());
  const std::size_t n = x.size();
  if (n == 0) return 0.0f;
  const float* e = error.empty() ? nullptr : error.data();
  const double mean =
      (s == OneBitOptions::Scale::l2 ? lane_sum<true>(x.data(), e, n) : lane_sum<false>(x.data(), e, n)) /
      static_cast<double>(n);
  return static_cast<float>(s == OneBitOptions::Scale::l2 ? std::sqrt(mean) : mean);
}

float onebit_encode(std::span<const float> x, std::span<float> error, std::span<std::uint8_t> bits,
                    OneBitOptions::Scale s) {
  const std::size_t n = x.size();
  check_packed(bits, n);
  // Two passes: the scale needs all of acc before the first residual can be written. The second
  // recomputes acc = x + e rather than storing it in the first: a stored acc would be one more
  // stream of writes, which costs more than re-reading.
  const float scale = onebit_scale(x, error, s);
  pack(x.data(), error.empty() ? nullptr : error.data(), bits.data(), n, scale);
  std::fill(bits.begin() + static_cast<std::ptrdiff_t>(onebit_packed_bytes(n)), bits.end(), std::uint8_t{0});
  return scale;
}

void onebit_decode(std::span<const std::uint8_t> bits, float scale, std::span<float> out) {
  check_packed(bits, out.size());
  unpack<false>(bits.data(), scale, out.data(), out.size());
}

void onebit_decode_add(std::span<const std::uint8_t> bits, float scale, std::span<float> sum) {
  check_packed(bits, sum.size());
  unpack<true>(bits.data(), scale, sum.data(), sum.size());
}

// ---- the reducer ----

OneBitReducer::OneBitReducer(OneBitOptions opts)
    : opts_(opts), blocks_(opts.device), received_(opts.device), average_(opts.device), scale_scratch_(opts.device) {
  LC_CHECK(opts.warmup_steps >= 0, "1-bit warm-up of ", opts.warmup_steps, " steps");
  check_reducer_device(opts.device, "1-bit");
}

void OneBitReducer::prepare(std::span<const BucketLayout> buckets) {
  residuals_.clear();  // (Residuals are move-only)
  residuals_.resize(buckets.size());
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    LC_CHECK(buckets[i].id == static_cast<int>(i), "bucket ", i, " has id ", buckets[i].id);
    residuals(buckets[i]);
  }
}

OneBitReducer::Residuals& OneBitReducer::residuals(const BucketLayout& bucket) {
  LC_CHECK(bucket.id >= 0, "bucket id ", bucket.id);
  const auto id = static_cast<std::size_t>(bucket.id);
  if (id >= residuals_.size()) residuals_.resize(id + 1);  // prepare() did not see it
  Residuals& r = residuals_[id];
  if (r.worker.empty()) {
    r.worker = DeviceArray<float>(opts_.device, bucket.size);  // zeroed
    r.server = DeviceArray<float>(opts_.device, bucket.size);
  }
  LC_CHECK(r.worker.size() == bucket.size, "bucket ", bucket.id, " has ", bucket.size,
           " elements; its 1-bit residuals were sized for ", r.worker.size());
  return r;
}

void OneBitReducer::size_wire(std::size_t n, int world) {
  if (world == world_ && n <= wire_n_) return;
  std::size_t largest = n;
  for (const Residuals& r : residuals_) largest = std::max(largest, r.worker.size());
  const RankChunks c(largest, world);
  blocks_.resize(c.world * onebit_block_bytes(c));
  received_.resize(c.world * onebit_block_bytes(c));
  average_.resize(c.chunk);
#if defined(LACONIC_HAVE_CUDA)
  if (opts_.device == Device::cuda) scale_scratch_.resize(reducers_cuda::onebit_scratch_doubles());
#endif
  world_ = world;
  wire_n_ = largest;
}

void OneBitReducer::reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step,
                           Communicator& comm) {
  LC_CHECK(data.size() == bucket.size, "bucket ", bucket.id, " has ", bucket.size, " elements, got ",
           data.size());
  check_comm_memory(opts_.device, comm, "1-bit");
  if (step < opts_.warmup_steps) return reduce_dense(data, comm);
  ReducerStats stats;
  stats.calls = 1;
  stats.input_bytes = data.size_bytes();
  Residuals& res = residuals(bucket);
  size_wire(data.size(), comm.size());
  const RankChunks c(data.size(), comm.size());
  stats.value_bytes = c.padded() / 8 + c.chunk / 8;
  stats.scale_bytes = sizeof(float) * (c.world + 1);
  if (opts_.device == Device::cuda) {
    reduce_cuda(data, res, c, comm);
    account(stats);
    return;
  }
  const std::size_t nb = onebit_block_bytes(c), bits_bytes = c.chunk / 8;
  const auto own = static_cast<std::size_t>(comm.rank());
  const bool ef = opts_.error_feedback;
  // Chunk j's real elements of a bucket-sized buffer (empty, not out of range, for padding).
  const auto part = [&](std::span<float> v, std::size_t j) {
    return v.subspan(std::min(c.begin(j), c.n), c.real(j));
  };
  const auto bits = [&](DeviceArray<std::uint8_t>& v, std::size_t j) {
    return v.span().subspan(j * nb + sizeof(float), bits_bytes);
  };
  const auto get_scale = [&](const DeviceArray<std::uint8_t>& v, std::size_t j) {
    float s;
    std::memcpy(&s, v.data() + j * nb, sizeof s);
    return s;
  };
  const auto put_scale = [&](DeviceArray<std::uint8_t>& v, std::size_t j, float s) {
    std::memcpy(v.data() + j * nb, &s, sizeof s);
  };

  // Phase 1: every chunk compressed with this rank's residual; chunk j goes to rank j.
  for (std::size_t j = 0; j < c.world; ++j) {
    const std::span<float> err = ef ? part(res.worker.span(), j) : std::span<float>{};
    put_scale(blocks_, j, onebit_encode(part(data, j), err, bits(blocks_, j), opts_.scale));
  }
  comm.all_to_all(CBuf{blocks_.data(), c.world * nb, DType::u8},
                  Buf{received_.data(), c.world * nb, DType::u8});

  // Phase 2: average the owned chunk over the ranks (in rank order), compress it again with the
  // server residual, and share it.
  const std::span<float> average = average_.span().first(c.real(own));
  const auto workers = static_cast<float>(c.world);
  for (std::size_t i = 0; i < c.world; ++i) {
    const float w = get_scale(received_, i) / workers;
    if (i == 0) {
      onebit_decode(bits(received_, i), w, average);
    } else {
      onebit_decode_add(bits(received_, i), w, average);
    }
  }
  const std::span<float> err = ef ? part(res.server.span(), own) : std::span<float>{};
  put_scale(blocks_, own, onebit_encode(average, err, bits(blocks_, own), opts_.scale));
  // In place: this rank's block is already where the gather puts it.
  comm.all_gather(CBuf{blocks_.data() + own * nb, nb, DType::u8},
                  Buf{blocks_.data(), c.world * nb, DType::u8});
  for (std::size_t j = 0; j < c.world; ++j)
    onebit_decode(bits(blocks_, j), get_scale(blocks_, j), part(data, j));
  account(stats);
}

void OneBitReducer::reduce_cuda(std::span<float> data, Residuals& res, const RankChunks& c, Communicator& comm) {
#if defined(LACONIC_HAVE_CUDA)
  // reduce()'s two phases with the device codec. Scales never come to the host: each encode
  // writes its scale into the block header, and the decodes read it there.
  namespace rc = reducers_cuda;
  const std::size_t nb = onebit_block_bytes(c), bits_bytes = c.chunk / 8;
  const auto own = static_cast<std::size_t>(comm.rank());
  const bool ef = opts_.error_feedback, mean_abs = opts_.scale == OneBitOptions::Scale::mean_abs;
  double* scratch = scale_scratch_.data();
  const auto at = [&](std::size_t j) { return std::min(c.begin(j), c.n); };  // chunk j's first real element
  std::uint8_t* blocks = blocks_.data();
  std::uint8_t* received = received_.data();

  for (std::size_t j = 0; j < c.world; ++j)
    rc::onebit_encode(blocks + j * nb, blocks + j * nb + sizeof(float), bits_bytes,
                      ef ? res.worker.data() + at(j) : nullptr, data.data() + at(j), c.real(j), mean_abs, scratch);
  comm.all_to_all(CBuf{blocks, c.world * nb, DType::u8}, Buf{received, c.world * nb, DType::u8});

  const std::size_t mine = c.real(own);
  const auto workers = static_cast<float>(c.world);
  for (std::size_t i = 0; i < c.world; ++i)
    rc::onebit_decode(average_.data(), mine, received + i * nb + sizeof(float), received + i * nb, workers, i > 0);
  rc::onebit_encode(blocks + own * nb, blocks + own * nb + sizeof(float), bits_bytes,
                    ef ? res.server.data() + at(own) : nullptr, average_.data(), mine, mean_abs, scratch);
  comm.all_gather(CBuf{blocks + own * nb, nb, DType::u8}, Buf{blocks, c.world * nb, DType::u8});
  for (std::size_t j = 0; j < c.world; ++j)
    rc::onebit_decode(data.data() + at(j), c.real(j), blocks + j * nb + sizeof(float), blocks + j * nb, 1.0f, false);
#else
  (void)data, (void)res, (void)c, (void)comm;
  no_cuda_build("1-bit");
#endif
}

std::string OneBitReducer::describe() const {
  std::ostringstream os;
  os << "1-bit (" << name_of(opts_.scale) << " scale, "
     << (opts_.error_feedback ? "error feedback" : "no error feedback") << ", two-phase";
  if (opts_.device == Device::cuda) os << ", on cuda";
  if (opts_.warmup_steps > 0) os << ", dense for the first " << opts_.warmup_steps << " steps";
  os << ")";
  return os.str();
}

std::vector<StateTensor> OneBitReducer::state() {
  std::vector<StateTensor> out;
  for (std::size_t id = 0; id < residuals_.size(); ++id) {
    out.push_back({"onebit.worker_error." + std::to_string(id), residuals_[id].worker.span(), opts_.device});
    out.push_back({"onebit.server_error." + std::to_string(id), residuals_[id].server.span(), opts_.device});
  }
  return out;
}

}  // namespace laconic
