#include "workloads/data/lm.h"

#include <algorithm>

#include "core/check.h"
#include "workloads/data/mlm.h"

namespace laconic {

LmSplits build_lm_streams(std::span<const std::string> documents, const Tokenizer& tokenizer, double eval_fraction) {
  if (!(eval_fraction >= 0 && eval_fraction < 1))
    LC_INPUT_ERROR("text eval_fraction ", eval_fraction, " must be in [0, 1)");
  LmSplits s;
  s.train.vocab = s.eval.vocab = tokenizer.vocab_size();
  for (std::size_t i = 0; i < documents.size(); ++i) {
    TokenStream& out = is_eval_document(static_cast<std::int64_t>(i), eval_fraction) ? s.eval : s.train;
    tokenizer.encode_append(documents[i], out.tokens);
    out.tokens.push_back(kSep);
    ++out.documents;
  }
  return s;
}

double unigram_entropy(const TokenStream& s, int seq_len) {
  const std::int64_t windows = s.windows(seq_len);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(s.vocab), 0);
  const std::int64_t total = windows * seq_len;
  for (std::int64_t i = 1; i <= total; ++i) ++counts[static_cast<std::size_t>(s.tokens[static_cast<std::size_t>(i)])];
  return count_entropy(counts, total);
}

LmSource::LmSource(std::shared_ptr<const TokenStream> s, int seq_len) : s_(std::move(s)), seq_len_(seq_len) {
  LC_CHECK(seq_len_ >= 1, "LmSource: seq_len must be >= 1, got ", seq_len_);
}

void LmSource::fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t) const {
  const int T = seq_len_;
  const std::size_t n = indices.size() * static_cast<std::size_t>(T);
  out.size = static_cast<int>(indices.size());
  out.seq_len = T;
  out.features = 0;
  out.tokens.resize(n);
  out.targets.resize(n);
  const std::int64_t count = size();
  for (std::size_t b = 0; b < indices.size(); ++b) {
    const std::int64_t i = indices[b];
    LC_CHECK(i >= 0 && i < count, "LmSource: window ", i, " outside [0, ", count, ")");
    const std::int32_t* w = s_->tokens.data() + static_cast<std::size_t>(i) * T;
    std::copy_n(w, T, out.tokens.data() + b * T);
    std::copy_n(w + 1, T, out.targets.data() + b * T);
  }
}

}  // namespace laconic
