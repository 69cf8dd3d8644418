// Masked-language-model data (Devlin et al. 2019, "BERT", section 3.1 task #1): a corpus encoded
// and packed into fixed-length sequences, and the per-step masking that turns sequences into a
// Batch of (corrupted tokens, targets).
//
// Packing. The documents of a split are encoded and concatenated into one stream, each followed
// by [SEP]. The stream is cut into chunks of seq_len - 1 tokens and every sequence is [CLS] +
// chunk, so a sequence may hold the end of one document and the start of the next, and a long
// document continues in the next sequence (RoBERTa's FULL-SENTENCES packing, Liu et al. 2019,
// section 4.2): no padding is wasted on short fortunes. Only the last sequence is padded with
// [PAD]; a last chunk without any ordinary token (the final document's lone [SEP]) is dropped,
// so every sequence has a position that can be masked (when seq_len > 2).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/batch.h"
#include "workloads/data/tokenizer.h"

namespace laconic {

struct TokenDataset {
  int seq_len = 0;
  int vocab = 0;                      // ids are in [0, vocab)
  std::vector<std::int32_t> tokens;   // size() * seq_len, packed as described above
  std::int64_t documents = 0;         // how many documents were packed

  std::int64_t size() const {
    return seq_len > 0 ? static_cast<std::int64_t>(tokens.size()) / seq_len : 0;
  }
};

struct TextDatasetOptions {
  int seq_len = 128;           // tokens per sequence, [CLS] included (>= 2)
  double eval_fraction = 0.05; // share of documents held out for evaluation, in [0, 1)
};

struct TextSplits {
  TokenDataset train;
  TokenDataset eval;  // empty when eval_fraction is 0
};

// Whether document `index` is held out. Held-out documents are spread evenly over the corpus:
// document i is held out when floor((i + 1) * f) > floor(i * f), i.e. every (1/f)-th one. Fortune
// databases are grouped by topic, so "the last x%" would evaluate on one topic only.
bool is_eval_document(std::int64_t index, double eval_fraction);

// Encodes and packs `documents` into train and eval sets that share no document.
// Throws InputError for seq_len < 2, eval_fraction outside [0, 1), or a corpus too small to give
// a train sequence and (when eval_fraction > 0) an eval sequence.
TextSplits build_text_datasets(std::span<const std::string> documents, const Tokenizer& tokenizer,
                               const TextDatasetOptions& options);

struct MlmOptions {
  double mask_prob = 0.15;    // share of ordinary (non-special) positions chosen for prediction
  double mask_token = 0.8;    // of those: replaced by [MASK]
  double random_token = 0.1;  // of those: replaced by a uniformly drawn ordinary token; else unchanged
};

// out <- the sequences d[seq_indices[i]] with BERT's corruption: each ordinary position is chosen
// with probability mask_prob; a chosen position gets target = its original id and its input
// becomes [MASK] (80%), a random ordinary token (10%) or stays (10%); every other position has
// target -1. Special tokens ([CLS], [SEP], [PAD]) are never chosen. The draws for position p of
// the batch use rng counters 3p, 3p+1, 3p+2 under `key`, so a batch is a pure function of
// (d, seq_indices, options, key). When no position is chosen (likely only for tiny batches),
// one ordinary position drawn uniformly with counter 3 * size * seq_len is chosen instead, so
// the loss always has a term. Allocates nothing once `out` has held a batch this large.
// The trainer passes key = rng::key({seed, rank, step, rng::kData}); evaluation uses mlm_eval_key.
void mlm_batch(Batch& out, const TokenDataset& d, std::span<const std::int64_t> seq_indices,
               const MlmOptions& options, std::uint64_t key);

// The masking key of evaluation batch `batch_index`: independent of rank and step, so every
// evaluation of a run scores the same masked positions and eval losses are comparable.
std::uint64_t mlm_eval_key(std::uint64_t seed, std::int64_t batch_index);

// Entropy in nats of the distribution of ordinary tokens in d: the MLM loss of the best model
// that ignores context (it can only predict unigram frequencies), printed as a baseline.
double unigram_entropy(const TokenDataset& d);
// -sum p log p (nats) of the distribution counts / total (0 for total 0).
double count_entropy(std::span<const std::int64_t> counts, std::int64_t total);

}  // namespace laconic
