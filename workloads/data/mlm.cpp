#include "workloads/data/mlm.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/check.h"
#include "core/rng.h"

namespace laconic {
namespace {

bool is_ordinary(std::int32_t id) { return id >= kNumSpecialTokens; }

// Streams documents into packed sequences (see mlm.h).
class Packer {
 public:
  Packer(const Tokenizer& tokenizer, int seq_len) : tokenizer_(tokenizer) {
    out_.seq_len = seq_len;
    out_.vocab = tokenizer.vocab_size();
  }

  void add(const std::string& document) {
    ids_.clear();
    tokenizer_.encode_append(document, ids_);
    ids_.push_back(kSep);
    for (const std::int32_t id : ids_) push(id);
    ++out_.documents;
  }

  TokenDataset finish() {
    if (filled_ > 0) {
      const auto start = out_.tokens.end() - filled_;
      bool maskable = false;
      for (auto it = start; it != out_.tokens.end(); ++it) maskable = maskable || is_ordinary(*it);
      if (maskable)
        out_.tokens.resize(out_.tokens.size() + static_cast<std::size_t>(out_.seq_len - filled_), kPad);
      else
        out_.tokens.erase(start, out_.tokens.end());
    }
    filled_ = 0;
    return std::move(out_);
  }

 private:
  void push(std::int32_t id) {
    if (filled_ == out_.seq_len) filled_ = 0;
    if (filled_ == 0) {
      out_.tokens.push_back(kCls);
      filled_ = 1;
    }
    out_.tokens.push_back(id);
    ++filled_;
  }

  const Tokenizer& tokenizer_;
  TokenDataset out_;
  std::vector<std::int32_t> ids_;  // one document's ids, reused
  int filled_ = 0;                 // tokens in the current (last) sequence
};

}  // namespace

bool is_eval_document(std::int64_t index, double eval_fraction) {
  const auto i = static_cast<double>(index);
  return std::floor((i + 1) * eval_fraction) > std::floor(i * eval_fraction);
}

TextSplits build_text_datasets(std::span<const std::string> documents, const Tokenizer& tokenizer,
                               const TextDatasetOptions& options) {
  if (options.seq_len < 2) LC_INPUT_ERROR("text seq_len ", options.seq_len, " must be >= 2 ([CLS] and one token)");
  if (!(options.eval_fraction >= 0 && options.eval_fraction < 1))
    LC_INPUT_ERROR("text eval_fraction ", options.eval_fraction, " must be in [0, 1)");
  Packer train(tokenizer, options.seq_len);
  Packer eval(tokenizer, options.seq_len);
  for (std::size_t i = 0; i < documents.size(); ++i)
    (is_eval_document(static_cast<std::int64_t>(i), options.eval_fraction) ? eval : train).add(documents[i]);
  TextSplits s{train.finish(), eval.finish()};
  if (s.train.size() == 0 || (options.eval_fraction > 0 && s.eval.size() == 0))
    LC_INPUT_ERROR("the text corpus (", documents.size(), " documents) is too small: it gives ", s.train.size(),
                   " train and ", s.eval.size(), " eval sequences with eval_fraction ", options.eval_fraction);
  return s;
}

void mlm_batch(Batch& out, const TokenDataset& d, std::span<const std::int64_t> seq_indices,
               const MlmOptions& options, std::uint64_t key) {
  LC_CHECK(options.mask_prob > 0 && options.mask_prob <= 1 && options.mask_token >= 0 && options.random_token >= 0 &&
               options.mask_token + options.random_token <= 1,
           "mask_prob=", options.mask_prob, " mask_token=", options.mask_token, " random_token=", options.random_token);
  LC_CHECK(d.vocab > kNumSpecialTokens, "vocab ", d.vocab);
  const auto L = static_cast<std::size_t>(d.seq_len);
  const std::size_t n = seq_indices.size() * L;
  out.size = static_cast<int>(seq_indices.size());
  out.seq_len = d.seq_len;
  out.tokens.resize(n);
  out.targets.resize(n);

  const auto p_mask = static_cast<float>(options.mask_prob);
  const auto p_mask_token = static_cast<float>(options.mask_token);
  const auto p_replace = static_cast<float>(options.mask_token + options.random_token);
  const auto ordinary = static_cast<std::uint64_t>(d.vocab - kNumSpecialTokens);

  // Chosen position p: its target is the original id; its input follows the 80/10/10 rule.
  auto corrupt = [&](std::size_t p) {
    out.targets[p] = out.tokens[p];
    const float action = rng::uniform(key, 3 * p + 1);
    if (action < p_mask_token)
      out.tokens[p] = kMask;
    else if (action < p_replace)
      out.tokens[p] = kNumSpecialTokens + static_cast<std::int32_t>(rng::below(key, 3 * p + 2, ordinary));
  };

  std::size_t eligible = 0, chosen = 0;
  for (std::size_t i = 0; i < seq_indices.size(); ++i) {
    const std::int64_t k = seq_indices[i];
    LC_CHECK(k >= 0 && k < d.size(), "sequence ", k, " outside a dataset of ", d.size());
    const auto src = d.tokens.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(k) * L);
    std::copy(src, src + static_cast<std::ptrdiff_t>(L), out.tokens.begin() + static_cast<std::ptrdiff_t>(i * L));
    for (std::size_t p = i * L; p < (i + 1) * L; ++p) {
      out.targets[p] = -1;
      if (!is_ordinary(out.tokens[p])) continue;
      ++eligible;
      if (rng::uniform(key, 3 * p) < p_mask) {
        corrupt(p);
        ++chosen;
      }
    }
  }
  if (chosen > 0 || eligible == 0) return;
  // No position chosen: take the j-th ordinary position, j uniform. Nothing was corrupted, so
  // out.tokens still holds the originals to count through.
  std::size_t j = rng::below(key, 3 * n, eligible);
  for (std::size_t p = 0; p < n; ++p) {
    if (is_ordinary(out.tokens[p]) && j-- == 0) {
      corrupt(p);
      return;
    }
  }
}

std::uint64_t mlm_eval_key(std::uint64_t seed, std::int64_t batch_index) {
  // The second word stands where training keys have the rank; no rank is 2^64 - 1.
  return rng::key({seed, ~std::uint64_t{0}, static_cast<std::uint64_t>(batch_index), rng::kData});
}

double unigram_entropy(const TokenDataset& d) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(d.vocab), 0);
  std::int64_t total = 0;
  for (const std::int32_t id : d.tokens) {
    if (!is_ordinary(id)) continue;
    ++counts[static_cast<std::size_t>(id)];
    ++total;
  }
  return count_entropy(counts, total);
}

double count_entropy(std::span<const std::int64_t> counts, std::int64_t total) {
  if (total == 0) return 0.0;
  double h = 0;
  for (const std::int64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(total);
    h -= p * std::log(p);
  }
  return h;
}

}  // namespace laconic
