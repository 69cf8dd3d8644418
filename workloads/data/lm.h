// Causal language-model data (the GPT workload): one stream of token ids cut into windows.
//
// Example i of a stream of n tokens with context T is the window tokens[i*T, i*T + T] (T + 1
// tokens): its first T are the inputs and its last T the targets (the next token at every
// position), so consecutive examples share one boundary token and every token but the first is
// predicted exactly once per epoch; size() = (n - 1) / T. Documents are concatenated, each
// followed by the end-of-text id ([SEP] for Laconic's BPE; llm.c's GPT-2 files begin each
// document with <|endoftext|> 50256 instead), and windows cross document boundaries, as
// GPT-2/nanoGPT/llm.c training does.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/batch.h"
#include "workloads/data/source.h"
#include "workloads/data/tokenizer.h"

namespace laconic {

struct TokenStream {
  int vocab = 0;                     // ids are in [0, vocab)
  std::vector<std::int32_t> tokens;  // the concatenated documents
  std::int64_t documents = 0;        // how many documents (0 when unknown: pre-tokenized files)

  // Windows of context seq_len (see above).
  std::int64_t windows(int seq_len) const {
    return seq_len > 0 && tokens.size() > 1 ? static_cast<std::int64_t>(tokens.size() - 1) / seq_len : 0;
  }
};

struct LmSplits {
  TokenStream train;
  TokenStream eval;  // empty when eval_fraction is 0
};

// Encodes `documents` into train and eval streams that share no document (held-out documents
// chosen by is_eval_document, as for MLM), each document followed by [SEP].
LmSplits build_lm_streams(std::span<const std::string> documents, const Tokenizer& tokenizer, double eval_fraction);

// Entropy in nats of the token distribution of the targets of `s`'s windows (every token but the
// first, up to the last full window): the loss of the best model that ignores context.
double unigram_entropy(const TokenStream& s, int seq_len);

// out <- the windows at `indices` (inputs and next-token targets; nothing is masked, so `key` is
// unused). Allocates nothing once `out` has held a batch this large.
class LmSource final : public DataSource {
 public:
  LmSource(std::shared_ptr<const TokenStream> s, int seq_len);
  std::int64_t size() const override { return s_->windows(seq_len_); }
  void fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t key) const override;
  const TokenStream& stream() const { return *s_; }

 private:
  std::shared_ptr<const TokenStream> s_;
  int seq_len_;
};

}  // namespace laconic
