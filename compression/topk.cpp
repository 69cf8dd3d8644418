#include "compression/topk.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/check.h"
#include "core/rng.h"

// Plain C++; its functions are defined (and called) only with LACONIC_HAVE_CUDA.
#include "compression/cuda/reducers_cuda.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace laconic {
namespace {

// Keys: the bit pattern of |x|, 31 bits. Resolved from the top in digits of 12, 11 and 8 bits:
// [19, 31) is the exponent and 4 mantissa bits, fine enough that the threshold bin of
// gradient-like data holds a few per mille of the elements.
constexpr int kKeyBits = 31;
constexpr int kTopBits = 12;
constexpr std::size_t kBins = std::size_t{1} << kTopBits;
// Pass 1 spreads its increments over 4 histograms: consecutive elements tend to fall in the same
// few bins, and a single table would serialise on the store-to-load of that bin's counter.
constexpr std::size_t kSubHists = 4;
// Elements per inner block: the bins of a block are computed in a vectorised loop, then counted.
constexpr std::size_t kBlock = 1024;
// Elements per step of the emitting pass: a step wholly below the threshold bin is skipped after
// one vectorised test.
constexpr std::size_t kScan = 16;
constexpr std::size_t kMinSample = 256;
constexpr std::size_t kMinCandidates = 4096;

inline std::uint32_t key_of(float v) { return std::bit_cast<std::uint32_t>(v) & 0x7fffffffu; }

// Width of the digit just below bit `lo`.
int digit_bits(int lo) { return lo > 19 ? lo - 19 : lo > 8 ? lo - 8 : lo; }

// A partly resolved threshold: the wanted k-th largest key has (key >> lo) == prefix; `in_bin`
// elements share that prefix and the top `need` of them complete the top k (the rest of the top
// k lies above the bin). lo == 0: the key is exactly `prefix`, and the `need` lowest-index
// elements equal to it are selected.
struct Cut {
  std::uint32_t prefix = 0;
  int lo = kKeyBits;
  std::size_t need = 0;
  std::size_t in_bin = 0;
};

// Narrows c to the bin of `hist` (the next digit, `bits` wide) that holds the need-th largest.
Cut pick(const std::uint32_t* hist, int bits, Cut c) {
  for (std::uint32_t b = 1u << bits; b-- > 0;) {
    if (hist[b] >= c.need) return {(c.prefix << bits) | b, c.lo - bits, c.need, hist[b]};
    c.need -= hist[b];
  }
  LC_CHECK(false, "histogram holds fewer elements than the ", c.need, " still needed");
  return c;
}

// One more digit of c, histogrammed over the elements of v inside c's bin.
Cut refine(std::span<const float> v, Cut c, std::uint32_t* hist) {
  const int bits = digit_bits(c.lo), lo = c.lo - bits;
  const std::uint32_t mask = (1u << bits) - 1;
  std::fill_n(hist, std::size_t{1} << bits, 0u);
  for (const float x : v) {
    const std::uint32_t key = key_of(x);
    if ((key >> c.lo) == c.prefix) ++hist[(key >> lo) & mask];
  }
  return pick(hist, bits, c);
}

// Refines until c's bin holds at most `cap` elements or the key is fully resolved.
Cut descend(std::span<const float> v, Cut c, std::size_t cap, std::uint32_t* hist) {
  while (c.lo > 0 && c.in_bin > cap) c = refine(v, c, hist);
  return c;
}

// Pass 1: hist[0, kBins) = histogram of the top 12 key bits of acc, where acc = x, or with
// kFused acc = x + residual, stored back into the residual (error feedback in the same pass).
template <bool kFused>
void histogram_top(const float* x, float* residual, std::size_t n, std::uint32_t* hist) {
  std::fill_n(hist, kSubHists * kBins, 0u);
  std::uint32_t* h0 = hist;
  std::uint32_t* h1 = hist + kBins;
  std::uint32_t* h2 = hist + 2 * kBins;
  std::uint32_t* h3 = hist + 3 * kBins;
  std::uint16_t bins[kBlock];
  for (std::size_t i = 0; i < n; i += kBlock) {
    const std::size_t m = std::min(kBlock, n - i);
    for (std::size_t j = 0; j < m; ++j) {
      float a = x[i + j];
      if constexpr (kFused) {
        a += residual[i + j];
        residual[i + j] = a;
      }
      bins[j] = static_cast<std::uint16_t>(key_of(a) >> (kKeyBits - kTopBits));
    }
    // While counting this block, prefetch the next one (a cache line per 16 elements): the two
    // phases alternate, and the hardware prefetcher alone idles during the counting.
    const bool prefetch = i + 2 * kBlock <= n;
    std::size_t j = 0;
    for (; j + 16 <= m; j += 16) {
      if (prefetch) {
        __builtin_prefetch(x + i + kBlock + j);
        if constexpr (kFused) __builtin_prefetch(residual + i + kBlock + j, 1);
      }
      for (std::size_t u = j; u < j + 16; u += 4) {
        ++h0[bins[u]];
        ++h1[bins[u + 1]];
        ++h2[bins[u + 2]];
        ++h3[bins[u + 3]];
      }
    }
    for (; j < m; ++j) ++h0[bins[j]];
  }
  for (std::size_t b = 0; b < kBins; ++b) h0[b] += h1[b] + h2[b] + h3[b];
}

// Where the emitting pass writes: `out` takes the selected pairs, `cand` the candidates.
struct Sink {
  std::uint32_t* index;
  float* value;
  std::size_t size = 0;      // pairs written
  std::size_t capacity = 0;  // pairs that fit
};

// The emitting pass over v, ascending: elements with key >= high go to `out`; those with
// low <= key < high go to `cand` when gathering, else to `out` while `ties` lasts (lowest index
// first). Returns false, with the sinks partly written, if a sink would overflow.
bool scan(std::span<const float> v, std::uint32_t low, std::uint32_t high, bool gather, std::size_t ties,
          Sink& out, Sink& cand) {
  const std::size_t n = v.size();
  const float* x = v.data();
  const auto put = [&](Sink& to, std::size_t i) {
    if (to.size == to.capacity) return false;
    to.index[to.size] = static_cast<std::uint32_t>(i);
    to.value[to.size++] = x[i];
    return true;
  };
  // One element of a block that holds something at or above `low`.
  const auto one = [&](std::size_t i) {
    const std::uint32_t key = key_of(x[i]);
    if (key >= high) return put(out, i);
    if (key < low) return true;
    if (gather) return put(cand, i);
    if (ties == 0) return true;
    --ties;
    return put(out, i);
  };
  std::size_t i = 0;
#if defined(__AVX2__)
  // 16 keys per step as two 8-lane compares; keys are < 2^31, so signed compares against
  // low - 1 and high - 1 (as int: -1 for 0, INT_MAX for 2^31) test key >= low and key >= high.
  // Most steps find nothing; the others visit only their set mask bits.
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i low1 = _mm256_set1_epi32(static_cast<int>(low - 1));
  const __m256i high1 = _mm256_set1_epi32(static_cast<int>(high - 1));
  const auto mask = [](__m256i k0, __m256i k1, __m256i bound) {
    const auto m0 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(k0, bound))));
    const auto m1 = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(k1, bound))));
    return m0 | m1 << 8;
  };
  for (; i + kScan <= n; i += kScan) {
    const __m256i k0 = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), abs_mask);
    const __m256i k1 = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8)), abs_mask);
    const unsigned at_low = mask(k0, k1, low1);
    if (at_low == 0) continue;
    if (!gather) {  // ties or a single bound: in index order, through one()
      for (unsigned e = at_low; e; e &= e - 1)
        if (!one(i + static_cast<std::size_t>(std::countr_zero(e)))) return false;
      continue;
    }
    const unsigned above = mask(k0, k1, high1);
    for (unsigned e = above; e; e &= e - 1)
      if (!put(out, i + static_cast<std::size_t>(std::countr_zero(e)))) return false;
    for (unsigned e = at_low & ~above; e; e &= e - 1)
      if (!put(cand, i + static_cast<std::size_t>(std::countr_zero(e)))) return false;
  }
#else
  for (; i + kScan <= n; i += kScan) {
    std::uint32_t any = 0;
    for (std::size_t j = 0; j < kScan; ++j) any |= key_of(x[i + j]) >= low;
    if (!any) continue;
    for (std::size_t j = i; j < i + kScan; ++j)
      if (!one(j)) return false;
  }
#endif
  for (; i < n; ++i)
    if (!one(i)) return false;
  return true;
}

void check_sizes(std::span<const float> x, std::span<float> residual) {
  LC_CHECK(residual.empty() || residual.size() == x.size(), "residual has ", residual.size(),
           " elements, input ", x.size());
  LC_CHECK(x.size() <= std::numeric_limits<std::uint32_t>::max(), "top-k indexes with uint32, got ",
           x.size(), " elements");
}

// Exact top-k of acc (already including any residual); indices ascending.
std::size_t select_exact(std::span<const float> acc, std::size_t k, std::uint32_t* hist,
                         std::span<std::uint32_t> indices, std::span<float> values, TopKScratch& scratch) {
  Cut c = pick(hist, kTopBits, Cut{0, kKeyBits, k, acc.size()});
  c = descend(acc, c, topk_candidate_capacity(acc.size(), k), hist);
  Sink out{indices.data(), values.data(), 0, k};
  Sink cand{scratch.cand_index.data(), scratch.cand_value.data(), 0, scratch.cand_index.size()};
  const std::uint32_t low = c.prefix << c.lo;
  const auto high = static_cast<std::uint32_t>((std::uint64_t{c.prefix} + 1) << c.lo);
  LC_CHECK(scan(acc, low, high, c.lo > 0, c.need, out, cand), "top-k output overflowed");
  if (c.lo == 0) {  // the threshold key was resolved over the whole buffer: scan took the ties
    LC_CHECK(out.size == k, "top-k selected ", out.size, ", wanted ", k);
    return k;
  }

  // Resolve the threshold among the candidates, keep those in the top k (ascending), and merge
  // them with the elements above the bin.
  LC_CHECK(cand.size == c.in_bin && out.size + c.need == k, "top-k bin count mismatch");
  const Cut t = descend({cand.value, cand.size}, Cut{c.prefix, c.lo, c.need, cand.size}, 0, hist);
  std::size_t kept = 0, ties = t.need;
  for (std::size_t j = 0; j < cand.size; ++j) {
    const std::uint32_t key = key_of(cand.value[j]);
    const bool tie = key == t.prefix && ties > 0;
    ties -= tie;
    if (key > t.prefix || tie) {
      cand.index[kept] = cand.index[j];
      cand.value[kept++] = cand.value[j];
    }
  }
  LC_CHECK(kept == c.need, "top-k kept ", kept, " candidates, wanted ", c.need);
  // Backward merge into out: both runs ascending, out's tail is free.
  std::size_t a = out.size, b = kept, w = k;
  while (b > 0) {
    if (a > 0 && out.index[a - 1] > cand.index[b - 1]) {
      --a, --w;
      out.index[w] = out.index[a];
      out.value[w] = out.value[a];
    } else {
      --b, --w;
      out.index[w] = cand.index[b];
      out.value[w] = cand.value[b];
    }
  }
  return k;
}

void zero_sent(std::span<float> residual, std::span<const std::uint32_t> indices) {
  for (const std::uint32_t i : indices) residual[i] = 0.0f;
}

std::uint32_t sampled_key(std::span<const float> v, std::size_t k, double sample_fraction, std::uint64_t seed,
                          TopKScratch& scratch) {
  const std::size_t n = v.size();
  LC_CHECK(n > 0 && k > 0, "sampled threshold of ", k, " of ", n, " elements");
  scratch.reserve(n, k, sample_fraction);
  const std::size_t m = topk_sample_size(n, sample_fraction);
  const auto position = [&](std::uint64_t j) {
    const std::uint64_t begin = j * n / m, end = (j + 1) * n / m;
    return begin + rng::below(seed, j, end - begin);
  };
  // The reads are random, hence latency-bound: each position is computed kAhead samples early
  // and prefetched (kept in a ring), so that many misses are in flight at once.
  constexpr std::size_t kAhead = 32;
  std::uint64_t ring[kAhead];
  for (std::size_t j = 0; j < std::min(kAhead, m); ++j) ring[j] = position(j);
  float* s = scratch.sample.data();
  for (std::size_t j = 0; j < m; ++j) {
    const std::uint64_t at = ring[j % kAhead];
    if (j + kAhead < m) {
      ring[j % kAhead] = position(j + kAhead);
      __builtin_prefetch(v.data() + ring[j % kAhead]);
    }
    s[j] = v[at];
  }
  const auto r = std::clamp<std::size_t>(
      static_cast<std::size_t>(std::llround(static_cast<double>(k) * static_cast<double>(m) / static_cast<double>(n))),
      1, m);
  return descend({s, m}, Cut{0, kKeyBits, r, m}, 0, scratch.hist.data()).prefix;
}

}  // namespace

std::size_t topk_count(std::size_t n, double ratio) {
  LC_CHECK(ratio > 0 && ratio <= 1, "top-k ratio must be in (0, 1], got ", ratio);
  if (n == 0) return 0;
  const auto k = static_cast<std::size_t>(std::llround(ratio * static_cast<double>(n)));
  return std::clamp<std::size_t>(k, 1, n);
}

std::size_t topk_candidate_capacity(std::size_t n, std::size_t k) {
  return std::min(n, std::max(2 * k, kMinCandidates));
}

std::size_t topk_sampled_capacity(std::size_t n, std::size_t k) { return std::min(n, 2 * k); }

std::size_t topk_sample_size(std::size_t n, double sample_fraction) {
  LC_CHECK(sample_fraction > 0 && sample_fraction <= 1, "top-k sample fraction must be in (0, 1], got ",
           sample_fraction);
  const auto m = static_cast<std::size_t>(std::llround(sample_fraction * static_cast<double>(n)));
  return std::clamp(m, std::min(n, kMinSample), n);
}

void TopKScratch::reserve(std::size_t n, std::size_t k, double sample_fraction) {
  if (hist.size() < kSubHists * kBins) hist.resize(kSubHists * kBins);
  const std::size_t cands = topk_candidate_capacity(n, k);
  if (cand_index.size() < cands) {
    cand_index.resize(cands);
    cand_value.resize(cands);
  }
  if (sample_fraction > 0 && sample.size() < topk_sample_size(n, sample_fraction))
    sample.resize(topk_sample_size(n, sample_fraction));
}

std::size_t topk_exact(std::span<const float> x, std::span<float> residual, std::size_t k,
                       std::span<std::uint32_t> indices, std::span<float> values, TopKScratch& scratch) {
  check_sizes(x, residual);
  const std::size_t n = x.size();
  k = std::min(k, n);
  LC_CHECK(indices.size() >= k && values.size() >= k, "top-k output holds ", std::min(indices.size(), values.size()),
           " pairs, need ", k);
  scratch.reserve(n, k);
  std::uint32_t* hist = scratch.hist.data();
  if (residual.empty()) {
    histogram_top<false>(x.data(), nullptr, n, hist);
  } else {
    histogram_top<true>(x.data(), residual.data(), n, hist);
  }
  if (k == 0) return 0;
  const std::span<const float> acc = residual.empty() ? x : std::span<const float>(residual);
  select_exact(acc, k, hist, indices, values, scratch);
  if (!residual.empty()) zero_sent(residual, indices.first(k));
  return k;
}

float topk_sampled_threshold(std::span<const float> v, std::size_t k, double sample_fraction, std::uint64_t seed,
                             TopKScratch& scratch) {
  return std::bit_cast<float>(sampled_key(v, k, sample_fraction, seed, scratch));
}

std::size_t topk_sampled(std::span<const float> x, std::span<float> residual, std::size_t k, double sample_fraction,
                         std::uint64_t seed, std::span<std::uint32_t> indices, std::span<float> values,
                         TopKScratch& scratch) {
  check_sizes(x, residual);
  const std::size_t n = x.size();
  k = std::min(k, n);
  const std::size_t cap = topk_sampled_capacity(n, k);
  LC_CHECK(indices.size() >= cap && values.size() >= cap, "sampled top-k output holds ",
           std::min(indices.size(), values.size()), " pairs, need ", cap);
  std::span<const float> acc = x;
  if (!residual.empty()) {
    float* r = residual.data();
    for (std::size_t i = 0; i < n; ++i) r[i] += x[i];
    acc = residual;
  }
  if (k == 0) return 0;
  const std::uint32_t t = sampled_key(acc, k, sample_fraction, seed, scratch);
  Sink out{indices.data(), values.data(), 0, cap}, none{nullptr, nullptr, 0, 0};
  // More than cap at or above the estimate: the exact k instead (acc already holds the residual).
  const std::size_t count =
      scan(acc, t, t, false, 0, out, none) ? out.size : topk_exact(acc, {}, k, indices, values, scratch);
  if (!residual.empty()) zero_sent(residual, indices.first(count));
  return count;
}

void topk_decode(std::span<std::uint32_t> gathered, std::span<const std::size_t> counts, std::span<float> out) {
  const std::size_t world = counts.size(), n = out.size();
  LC_CHECK(world > 0, "top-k decode of no ranks");
  std::size_t words = 0;
  for (const std::size_t c : counts) words += 2 * c;
  LC_CHECK(words <= gathered.size(), "top-k decode: counts need ", words, " words, got ", gathered.size());
  std::fill(out.begin(), out.end(), 0.0f);
  float* o = out.data();
  std::uint32_t* g = gathered.data();
  // Each rank's block is c value words then c index words; `fn(value word, index)` per pair.
  const auto each = [&](auto fn) {
    std::size_t off = 0;
    for (const std::size_t c : counts) {
      for (std::size_t j = 0; j < c; ++j) fn(g[off + j], g[off + c + j]);
      off += 2 * c;
    }
  };
  each([&](std::uint32_t v, std::uint32_t i) {
    LC_CHECK(i < n, "top-k index ", i, " out of range for ", n, " elements");
    o[i] += std::bit_cast<float>(v);
  });
  // Quotients are staged, then stored: a position sent by several ranks is divided once.
  const auto d = static_cast<float>(world);
  each([&](std::uint32_t& v, std::uint32_t i) { v = std::bit_cast<std::uint32_t>(o[i] / d); });
  each([&](std::uint32_t v, std::uint32_t i) { o[i] = std::bit_cast<float>(v); });
}

TopKReducer::TopKReducer(TopKOptions opts) : opts_(opts), wire_(opts.device) {
  LC_CHECK(opts.ratio > 0 && opts.ratio <= 1, "top-k ratio must be in (0, 1], got ", opts.ratio);
  LC_CHECK(opts.sample_fraction > 0 && opts.sample_fraction <= 1, "top-k sample fraction must be in (0, 1], got ",
           opts.sample_fraction);
  LC_CHECK(opts.warmup_steps >= 0, "top-k warm-up steps must be >= 0, got ", opts.warmup_steps);
  check_reducer_device(opts.device, "top-k");
  LC_CHECK(opts.device == Device::cpu || opts.selection == TopKOptions::Selection::exact,
           "sampled top-k selection runs on the CPU only: use exact selection on cuda");
}

// Out of line: reducers_cuda::TopKScratch is complete only here.
TopKReducer::~TopKReducer() = default;

void TopKReducer::prepare(std::span<const BucketLayout> buckets) {
  const bool sampled = opts_.selection == TopKOptions::Selection::sampled;
  residual_.clear();
  max_pairs_ = 0;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const BucketLayout& b = buckets[i];
    LC_CHECK(b.id == static_cast<int>(i), "bucket ", i, " has id ", b.id);
    const std::size_t k = topk_count(b.size, opts_.ratio);
    max_pairs_ = std::max(max_pairs_, sampled ? topk_sampled_capacity(b.size, k) : k);
    scratch_.reserve(b.size, k, sampled ? opts_.sample_fraction : 0);
    if (opts_.error_feedback) residual_.emplace_back(opts_.device, b.size);  // zeroed
  }
  if (opts_.device == Device::cuda) {
#if defined(LACONIC_HAVE_CUDA)
    if (!device_scratch_) device_scratch_ = std::make_unique<reducers_cuda::TopKScratch>();
    for (const BucketLayout& b : buckets) device_scratch_->reserve(b.size);
#endif
    return;  // the selection goes straight into the wire buffer
  }
  indices_.resize(max_pairs_);
  values_.resize(max_pairs_);
}

void TopKReducer::reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step, Communicator& comm) {
  const std::size_t n = data.size();
  LC_CHECK(n == bucket.size, "bucket ", bucket.id, " has ", bucket.size, " elements, got ", n);
  check_comm_memory(opts_.device, comm, "top-k");
  const auto id = static_cast<std::size_t>(bucket.id);
  LC_CHECK(bucket.id >= 0 && (!opts_.error_feedback || (id < residual_.size() && residual_[id].size() == n)),
           "top-k bucket ", bucket.id, " of ", n, " elements was not prepared");
  if (step < opts_.warmup_steps) return reduce_dense(data, comm);
  ReducerStats s;
  s.calls = 1;
  s.input_bytes = 4 * n;
  const auto world = static_cast<std::size_t>(comm.size());
  const auto rank = static_cast<std::size_t>(comm.rank());
  if (counts_.size() != world) {  // first call: the world-dependent buffers, once
    LC_CHECK(counts_.empty(), "top-k reducer used with ", world, " ranks after ", counts_.size());
    wire_.resize(world * 2 * max_pairs_);
    counts_.resize(world);
    words_.resize(world);
    count_wire_.resize(world);
  }
  const std::size_t k = topk_count(n, opts_.ratio);
  const std::span<float> residual = opts_.error_feedback ? residual_[id].span() : std::span<float>();
  if (opts_.device == Device::cuda) {
    reduce_cuda(data, residual, k, comm);
    s.value_bytes = 4 * k;
    s.index_bytes = 4 * k;
    account(s);
    return;
  }
  const bool sampled = opts_.selection == TopKOptions::Selection::sampled;
  const std::size_t pairs = sampled ? topk_sampled_capacity(n, k) : k;
  LC_CHECK(pairs <= max_pairs_, "top-k bucket ", bucket.id, " of ", n, " elements was not prepared");
  const std::span<std::uint32_t> idx = std::span(indices_).first(pairs);
  const std::span<float> val = std::span(values_).first(pairs);

  std::size_t c = 0;
  if (sampled) {
    const std::uint64_t seed = rng::key({0x746f706bULL /* "topk" */, static_cast<std::uint64_t>(step), id});
    c = topk_sampled(data, residual, k, opts_.sample_fraction, seed, idx, val, scratch_);
    count_wire_[rank] = static_cast<std::int32_t>(c);
    comm.all_gather(CBuf{&count_wire_[rank], 1, DType::i32}, Buf{count_wire_.data(), world, DType::i32});
    for (std::size_t q = 0; q < world; ++q) counts_[q] = static_cast<std::size_t>(count_wire_[q]);
    s.meta_bytes = 4;
  } else {
    c = topk_exact(data, residual, k, idx, val, scratch_);
    std::fill(counts_.begin(), counts_.end(), c);
  }
  std::size_t offset = 0, total = 0;
  for (std::size_t q = 0; q < world; ++q) {
    words_[q] = 2 * counts_[q];
    if (q < rank) offset += words_[q];
    total += words_[q];
  }
  // This rank's block, in place in the receive buffer (the all-gathers accept that).
  std::uint32_t* own = wire_.data() + offset;
  std::memcpy(own, val.data(), 4 * c);
  std::memcpy(own + c, idx.data(), 4 * c);
  const CBuf send{own, 2 * c, DType::i32};
  const Buf recv{wire_.data(), total, DType::i32};
  if (sampled) {
    comm.all_gather_v(send, recv, words_);
  } else {
    comm.all_gather(send, recv);
  }
  topk_decode(wire_.span().first(total), counts_, data);
  s.value_bytes = 4 * c;
  s.index_bytes = 4 * c;
  account(s);
}

void TopKReducer::reduce_cuda(std::span<float> data, std::span<float> residual, std::size_t k,
                              Communicator& comm) {
#if defined(LACONIC_HAVE_CUDA)
  // Exact selection sends k pairs from every rank: the layout of the gathered blocks is known
  // without looking at the data, so nothing comes back to the host.
  const std::size_t n = data.size(), world = counts_.size();
  const auto rank = static_cast<std::size_t>(comm.rank());
  LC_CHECK(k <= max_pairs_ && device_scratch_, "top-k bucket of ", n, " elements was not prepared");
  std::fill(counts_.begin(), counts_.end(), k);
  std::uint32_t* own = wire_.data() + rank * 2 * k;
  reducers_cuda::topk_exact(own + k, reinterpret_cast<float*>(own), residual.empty() ? nullptr : residual.data(),
                            data.data(), n, k, *device_scratch_);
  comm.all_gather(CBuf{own, 2 * k, DType::i32}, Buf{wire_.data(), world * 2 * k, DType::i32});
  reducers_cuda::topk_decode(data.data(), n, wire_.data(), counts_.data(), world);
#else
  (void)data, (void)residual, (void)k, (void)comm;
  no_cuda_build("top-k");
#endif
}

std::string TopKReducer::describe() const {
  std::ostringstream os;
  os << "top-k " << opts_.ratio * 100 << "% (";
  if (opts_.selection == TopKOptions::Selection::sampled) {
    os << "sampled " << opts_.sample_fraction * 100 << "%";
  } else {
    os << "exact";
  }
  os << (opts_.error_feedback ? ", error feedback" : ", no error feedback");
  if (opts_.device == Device::cuda) os << ", on cuda";
  if (opts_.warmup_steps > 0) os << ", " << opts_.warmup_steps << " dense warm-up steps";
  os << ")";
  return os.str();
}

std::vector<StateTensor> TopKReducer::state() {
  std::vector<StateTensor> out;
  for (std::size_t i = 0; i < residual_.size(); ++i)
    out.push_back({"topk.residual." + std::to_string(i), residual_[i].span(), opts_.device});
  return out;
}

}  // namespace laconic
