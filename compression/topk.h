// Top-k sparsification with error feedback (Aji & Heafield 2017; Lin et al. 2018, "Deep Gradient
// Compression"; docs/references.md "Top-k and DGC"). Each rank sends only the k entries of
// largest magnitude of its buffer, as (value, index) pairs; everything it did not send stays in a
// residual that is added to the next step's buffer, so nothing is lost, only delayed.
//
// Selection is a radix select on the bit pattern of |x| (for floats, the order of the patterns
// is the order of the magnitudes), not a sort:
//   pass 1  histogram of the top 12 bits of the pattern (exponent + 4 mantissa bits), fused with
//           acc = x + residual under error feedback;
//   pass 2  emit every element above the bin holding the k-th largest, and gather that bin's
//           elements as candidates (a small set: a few per mille for gradient-like data);
//   then    resolve the candidates with radix passes over the remaining 19 bits (11 + 8).
// When the threshold bin holds more than the candidate capacity (heavy ties, data packed into
// one bin), the next digits are histogrammed over the whole buffer first: more passes, same
// result, bounded scratch.
//
// The sampled variant (DGC) estimates the threshold from a stratified random sample and sends
// everything at or above it: one pass instead of two, but a count that varies around k.
//
// Rules shared by all selections:
//  - order: |x|, compared as bit patterns; -0 and +0 are equal; NaN (either sign) counts as
//    larger than every number including inf, so a diverging gradient is sent, not hidden.
//  - ties at the threshold: lowest index first (exact selection).
//  - output: indices strictly ascending, values the signed accumulated values x[i] (+ residual).
//  - indices are uint32: buffers hold at most 2^32 - 1 elements.
//
// Wire format of one rank's contribution (one all-gather, 8 bytes per pair): c value bit
// patterns then c indices, as 2c 32-bit words. Exact selection always sends c = k, so a plain
// all-gather of 2k words suffices; sampled selection first all-gathers the counts (4 bytes of
// meta per rank), then all-gather-v's the pairs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compression/reducer.h"

namespace laconic {

namespace reducers_cuda {
struct TopKScratch;  // compression/cuda/reducers_cuda.h
}

struct TopKOptions {
  // Fraction of each bucket's elements a rank sends; k = topk_count(n, ratio). In (0, 1].
  double ratio = 0.01;
  // Keep what was not sent in a per-bucket residual and add it to the next step's buffer.
  // Without it top-k is biased (small coordinates are never updated).
  bool error_feedback = true;
  // exact: the k largest, always k pairs. sampled: everything at or above a threshold estimated
  // from a sample (DGC); between 1 and 2k pairs (see topk_sampled).
  enum class Selection { exact, sampled } selection = Selection::exact;
  // sampled only: fraction of the elements in the threshold's sample, in (0, 1].
  double sample_fraction = 0.01;
  // Steps 0 .. warmup_steps-1 are averaged densely (fp32 all-reduce), residuals untouched: the
  // first steps' large, fast-changing gradients are where sparsification hurts most (DGC).
  std::int64_t warmup_steps = 0;
  // Where the reducer's state and reduce()'s data live (reducer.h). cuda: exact selection only
  // (the sampled variant is CPU-only and rejected at construction).
  Device device = Device::cpu;
  bool operator==(const TopKOptions&) const = default;
};
inline constexpr std::array kTopKSelectionNames{"exact", "sampled"};
constexpr std::span<const char* const> names(TopKOptions::Selection) { return kTopKSelectionNames; }
inline const char* name_of(TopKOptions::Selection s) { return enum_name(s); }

// k for n elements at `ratio`: the nearest integer to ratio * n (halves rounded up), clamped to
// [1, n]; 0 for n = 0. ratio must be in (0, 1].
std::size_t topk_count(std::size_t n, double ratio);

// Scratch space of the selections. They grow it on demand; reserve() it up front (as the reducer
// does in prepare()) and selecting allocates nothing.
struct TopKScratch {
  std::vector<std::uint32_t> hist;        // 4 sub-histograms of 4096 bins (pass 1); one for refining
  std::vector<std::uint32_t> cand_index;  // threshold-bin candidates, topk_candidate_capacity()
  std::vector<float> cand_value;
  std::vector<float> sample;              // the sampled variant's sample
  // Grows (never shrinks) to what selecting k of n needs; sample_fraction > 0 adds the sample.
  void reserve(std::size_t n, std::size_t k, double sample_fraction = 0);
};

// How many threshold-bin candidates exact selection gathers before it refines over the whole
// buffer instead: min(n, max(2k, 4096)).
std::size_t topk_candidate_capacity(std::size_t n, std::size_t k);
// The most pairs topk_sampled returns: min(n, 2k).
std::size_t topk_sampled_capacity(std::size_t n, std::size_t k);
// The sample topk_sampled draws: the nearest integer to sample_fraction * n, at least
// min(n, 256) (fewer make a useless estimate), at most n.
std::size_t topk_sample_size(std::size_t n, double sample_fraction);

// Exact top-k of acc = x (+ residual): writes the min(k, n) indices of largest |acc| ascending to
// `indices` and acc at them to `values` (both at least k long) and returns that count. With a
// non-empty `residual` (error feedback, same size as x), residual becomes acc with the selected
// positions zeroed: input + residual - sent, exactly, since what is sent is acc itself.
std::size_t topk_exact(std::span<const float> x, std::span<float> residual, std::size_t k,
                       std::span<std::uint32_t> indices, std::span<float> values, TopKScratch& scratch);

// The sampled threshold (a magnitude): the r-th largest |v| of a stratified random sample of
// m = topk_sample_size(n, sample_fraction) elements of v, r = round(k * m / n) clamped to [1, m].
// Sample j is drawn uniformly from the j-th of m equal strata of the buffer with the counter-based
// generator keyed by `seed`: deterministic, yet blind to periodic structure (rows of a matrix).
// With m = n it is the exact k-th largest magnitude.
float topk_sampled_threshold(std::span<const float> v, std::size_t k, double sample_fraction,
                             std::uint64_t seed, TopKScratch& scratch);

// Sampled top-k of acc = x (+ residual): selects every i with |acc[i]| >= the sampled threshold
// of acc, ascending, and returns the count, in [1, topk_sampled_capacity(n, k)]: if more than
// that pass the threshold (a poor estimate, heavy ties), it falls back to topk_exact (k pairs).
// indices and values must hold topk_sampled_capacity(n, k). residual as for topk_exact.
std::size_t topk_sampled(std::span<const float> x, std::span<float> residual, std::size_t k,
                         double sample_fraction, std::uint64_t seed, std::span<std::uint32_t> indices,
                         std::span<float> values, TopKScratch& scratch);

// Decodes the gathered contributions of counts.size() ranks (wire format above, rank blocks
// back to back): out = 0, then every pair scatter-added in rank order, then divided by the
// number of ranks, so every rank computes the same bits. Only the touched positions are divided
// (the quotients are staged in the value words of `gathered`, which this overwrites), so it
// costs O(n) for the zero fill plus O(pairs), not a second pass over out.
void topk_decode(std::span<std::uint32_t> gathered, std::span<const std::size_t> counts, std::span<float> out);

// The reducer: per bucket, select (with error feedback when enabled), all-gather the pairs,
// decode. Stats per call: input 4n bytes, values 4c, indices 4c, meta 4 per rank's count
// (sampled only); exact sends c = k, and the ring all-gather puts (N-1) * 8k bytes on the wire
// per rank. On cuda the selection writes straight into this rank's block of the wire buffer and
// nothing is read back to the host (counts are all k, known in advance).
class TopKReducer final : public Reducer {
 public:
  explicit TopKReducer(TopKOptions opts = {});
  ~TopKReducer() override;
  void prepare(std::span<const BucketLayout> buckets) override;
  void reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step,
              Communicator& comm) override;
  std::string describe() const override;
  // "topk.residual.<bucket id>" per bucket, with error feedback; nothing without.
  std::vector<StateTensor> state() override;

 private:
  // The exact selection, all-gather and decode on the device (after the world-sized buffers).
  void reduce_cuda(std::span<float> data, std::span<float> residual, std::size_t k, Communicator& comm);

  TopKOptions opts_;
  std::vector<DeviceArray<float>> residual_;  // per bucket id (error feedback only), on opts_.device
  TopKScratch scratch_;                       // cpu selection
  std::unique_ptr<reducers_cuda::TopKScratch> device_scratch_;  // cuda selection
  std::size_t max_pairs_ = 0;          // most pairs one rank sends for any bucket
  std::vector<std::uint32_t> indices_;  // this rank's selection, max_pairs_ (cpu only)
  std::vector<float> values_;
  // World-dependent, sized on the first reduce(): N blocks of 2 * max_pairs_ words (on
  // opts_.device), the counts (host).
  DeviceArray<std::uint32_t> wire_;
  std::vector<std::size_t> counts_;     // pairs per rank
  std::vector<std::size_t> words_;      // 32-bit words per rank (2 * counts_), for all_gather_v
  std::vector<std::int32_t> count_wire_;
};

}  // namespace laconic
