#include "workloads/data/mlm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/rng.h"

namespace laconic {
namespace {

using Docs = std::vector<std::string>;
using Ids = std::vector<std::int64_t>;

// 200 distinct documents of 3..40 made-up words built from syllables, numbered so no two are equal.
Docs syllable_corpus() {
  static const char* kSyl[] = {"ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zi", "pe", "do", "ba"};
  Docs docs;
  for (std::uint64_t d = 0; d < 200; ++d) {
    std::string doc = "doc" + std::to_string(d);
    const auto words = 3 + rng::below(rng::key({11, d}), 0, 38);
    for (std::uint64_t w = 0; w < words; ++w) {
      doc += w % 7 == 6 ? ". " : " ";
      for (std::uint64_t s = 0; s < 1 + w % 3; ++s) doc += kSyl[rng::below(rng::key({12, d, w}), s, 12)];
    }
    docs.push_back(doc);
  }
  return docs;
}

class Mlm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    docs_ = new Docs(syllable_corpus());
    tok_ = new Tokenizer(Tokenizer::train(*docs_, {.vocab_size = 400}));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete docs_;
  }

  // The documents packed into d, recovered by dropping [CLS]/[PAD] and splitting at [SEP].
  static Docs unpack(const TokenDataset& d) {
    Docs out;
    std::vector<std::int32_t> doc;
    for (const std::int32_t id : d.tokens) {
      if (id == kSep) {
        out.push_back(tok_->decode(doc));
        doc.clear();
      } else if (id != kCls && id != kPad) {
        doc.push_back(id);
      }
    }
    // The final [SEP] is missing only when it fell alone into a last sequence, which is dropped.
    if (!doc.empty()) out.push_back(tok_->decode(doc));
    return out;
  }

  static Docs* docs_;
  static Tokenizer* tok_;
};
Docs* Mlm::docs_ = nullptr;
Tokenizer* Mlm::tok_ = nullptr;

TEST_F(Mlm, PackingKeepsEveryDocumentAndStartsSequencesWithCls) {
  const TextSplits s = build_text_datasets(*docs_, *tok_, {.seq_len = 24, .eval_fraction = 0.1});
  for (const TokenDataset* d : {&s.train, &s.eval}) {
    ASSERT_GT(d->size(), 0);
    EXPECT_EQ(d->seq_len, 24);
    EXPECT_EQ(d->vocab, tok_->vocab_size());
    EXPECT_EQ(d->tokens.size(), static_cast<std::size_t>(d->size() * 24));
    for (std::int64_t i = 0; i < d->size(); ++i) EXPECT_EQ(d->tokens[static_cast<std::size_t>(i * 24)], kCls);
    // [PAD] only as a suffix of the last sequence.
    const auto first_pad = std::find(d->tokens.begin(), d->tokens.end(), kPad);
    EXPECT_TRUE(std::all_of(first_pad, d->tokens.end(), [](std::int32_t t) { return t == kPad; }));
    EXPECT_LT(d->tokens.end() - first_pad, 24);
  }
  // Each split, unpacked, is its documents in corpus order: packing loses and reorders nothing.
  Docs train, eval;
  for (std::size_t i = 0; i < docs_->size(); ++i)
    (is_eval_document(static_cast<std::int64_t>(i), 0.1) ? eval : train).push_back(normalize_text((*docs_)[i]));
  EXPECT_EQ(unpack(s.train), train);
  EXPECT_EQ(unpack(s.eval), eval);
  EXPECT_EQ(s.train.documents, 180);
  EXPECT_EQ(s.eval.documents, 20);
}

TEST_F(Mlm, EvalSplitSharesNoDocumentWithTrain) {
  for (double f : {0.05, 0.1, 0.3}) {
    const TextSplits s = build_text_datasets(*docs_, *tok_, {.seq_len = 32, .eval_fraction = f});
    const Docs train = unpack(s.train), eval = unpack(s.eval);
    const std::set<std::string> train_set(train.begin(), train.end());
    for (const std::string& d : eval) EXPECT_FALSE(train_set.contains(d)) << d;
    EXPECT_EQ(train.size() + eval.size(), docs_->size());
    // The held-out share is f to within one document, and spread over the corpus.
    EXPECT_NEAR(static_cast<double>(eval.size()), f * static_cast<double>(docs_->size()), 1.0);
    EXPECT_TRUE(is_eval_document(static_cast<std::int64_t>(docs_->size()) - 1, f) ||
                !is_eval_document(0, f));
  }
  // eval_fraction 0: everything trains.
  const TextSplits all = build_text_datasets(*docs_, *tok_, {.seq_len = 32, .eval_fraction = 0});
  EXPECT_EQ(all.eval.size(), 0);
  EXPECT_EQ(all.train.documents, 200);
}

TEST_F(Mlm, BadOptionsAndTinyCorporaAreInputErrors) {
  EXPECT_THROW(build_text_datasets(*docs_, *tok_, {.seq_len = 1}), InputError);
  EXPECT_THROW(build_text_datasets(*docs_, *tok_, {.seq_len = 8, .eval_fraction = 1.0}), InputError);
  EXPECT_THROW(build_text_datasets(*docs_, *tok_, {.seq_len = 8, .eval_fraction = -0.1}), InputError);
  // 3 documents cannot hold out 5% of themselves.
  EXPECT_THROW(build_text_datasets(Docs(docs_->begin(), docs_->begin() + 3), *tok_, {.seq_len = 8}), InputError);
}

// Tallies of many masked batches against the unmasked sequences.
struct MaskStats {
  std::int64_t ordinary = 0, chosen = 0, as_mask = 0, as_random = 0, unchanged = 0;
};

MaskStats mask_many(const TokenDataset& d, int batches, int batch_size, const MlmOptions& opts) {
  MaskStats st;
  Batch b;
  Ids idx(static_cast<std::size_t>(batch_size));
  const auto L = static_cast<std::size_t>(d.seq_len);
  for (int step = 0; step < batches; ++step) {
    for (int i = 0; i < batch_size; ++i)
      idx[static_cast<std::size_t>(i)] = (step * batch_size + i * 7) % d.size();
    mlm_batch(b, d, idx, opts, rng::key({1, 0, static_cast<std::uint64_t>(step), rng::kData}));
    EXPECT_EQ(b.size, batch_size);
    EXPECT_EQ(b.seq_len, d.seq_len);
    for (int i = 0; i < batch_size; ++i) {
      for (std::size_t j = 0; j < L; ++j) {
        const std::size_t p = static_cast<std::size_t>(i) * L + j;
        const std::int32_t orig = d.tokens[static_cast<std::size_t>(idx[static_cast<std::size_t>(i)]) * L + j];
        const std::int32_t in = b.tokens[p], target = b.targets[p];
        if (orig < kNumSpecialTokens) {
          // Special positions: never chosen, never changed.
          EXPECT_EQ(target, -1);
          EXPECT_EQ(in, orig);
          continue;
        }
        ++st.ordinary;
        if (target == -1) {
          EXPECT_EQ(in, orig) << "an unchosen position was changed";
          continue;
        }
        EXPECT_EQ(target, orig) << "the target must be the original token";
        ++st.chosen;
        if (in == kMask) {
          ++st.as_mask;
        } else if (in == orig) {
          ++st.unchanged;
        } else {
          ++st.as_random;
          EXPECT_GE(in, kNumSpecialTokens) << "random replacements are ordinary tokens";
          EXPECT_LT(in, d.vocab);
        }
      }
    }
  }
  return st;
}

TEST_F(Mlm, MaskingFollowsBertsRates) {
  const TextSplits s = build_text_datasets(*docs_, *tok_, {.seq_len = 64, .eval_fraction = 0.1});
  const MaskStats st = mask_many(s.train, 300, 8, {});
  ASSERT_GT(st.ordinary, 100000);
  const auto share = [](std::int64_t a, std::int64_t b) { return static_cast<double>(a) / static_cast<double>(b); };
  // Binomial standard errors are ~0.001 (15% of 1.4e5) and ~0.003 (80/10/10 of 2e4); allow ~5 of them.
  EXPECT_NEAR(share(st.chosen, st.ordinary), 0.15, 0.006);
  EXPECT_NEAR(share(st.as_mask, st.chosen), 0.80, 0.015);
  // A random draw equals the original with probability 1/395, which moves ~0.03% to "unchanged".
  EXPECT_NEAR(share(st.as_random, st.chosen), 0.10, 0.012);
  EXPECT_NEAR(share(st.unchanged, st.chosen), 0.10, 0.012);

  const MaskStats half = mask_many(s.train, 100, 8, {.mask_prob = 0.5, .mask_token = 1.0, .random_token = 0});
  EXPECT_NEAR(share(half.chosen, half.ordinary), 0.5, 0.01);
  EXPECT_EQ(half.as_mask, half.chosen);
}

TEST_F(Mlm, EveryBatchHasAMaskedPosition) {
  const TextSplits s = build_text_datasets(*docs_, *tok_, {.seq_len = 16, .eval_fraction = 0.1});
  // At mask_prob 0.001 a 16-token sequence is almost never chosen by the draw alone, so nearly
  // every batch relies on the fallback.
  Batch b;
  std::int64_t natural = 0;
  for (std::int64_t i = 0; i < s.train.size(); ++i) {
    mlm_batch(b, s.train, Ids{i}, {.mask_prob = 0.001}, rng::key({2, 0, static_cast<std::uint64_t>(i), rng::kData}));
    const auto chosen = std::count_if(b.targets.begin(), b.targets.end(), [](std::int32_t t) { return t != -1; });
    ASSERT_GE(chosen, 1) << "sequence " << i;
    natural += chosen - 1;
  }
  EXPECT_LT(natural, s.train.size() / 10);
  // The fallback position is drawn, not always the first ordinary one.
  std::set<std::ptrdiff_t> where;
  for (std::uint64_t k = 0; k < 50; ++k) {
    mlm_batch(b, s.train, Ids{0}, {.mask_prob = 1e-6}, k);
    where.insert(std::find_if(b.targets.begin(), b.targets.end(), [](std::int32_t t) { return t != -1; }) -
                 b.targets.begin());
  }
  EXPECT_GT(where.size(), 5u);
}

TEST_F(Mlm, BatchesArePureFunctionsOfTheKey) {
  const TextSplits s = build_text_datasets(*docs_, *tok_, {.seq_len = 32, .eval_fraction = 0.1});
  const Ids idx{3, 0, 17, 3};
  Batch a, b, c;
  mlm_batch(a, s.train, idx, {}, rng::key({5, 1, 9, rng::kData}));
  mlm_batch(b, s.train, idx, {}, rng::key({5, 1, 9, rng::kData}));
  mlm_batch(c, s.train, idx, {}, rng::key({5, 1, 10, rng::kData}));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_NE(a.targets, c.targets);
  // Sequence 3 appears twice in the batch but is masked independently at its two places.
  const std::size_t L = 32;
  EXPECT_FALSE(std::equal(a.targets.begin(), a.targets.begin() + L, a.targets.begin() + 3 * L));

  // Reusing the batch allocates nothing.
  const std::int32_t* tokens = a.tokens.data();
  const std::int32_t* targets = a.targets.data();
  mlm_batch(a, s.train, Ids{1, 2, 4, 5}, {}, 42);
  EXPECT_EQ(a.tokens.data(), tokens);
  EXPECT_EQ(a.targets.data(), targets);

  // Eval keys: fixed per batch index, distinct across indices and from training keys.
  EXPECT_EQ(mlm_eval_key(5, 0), mlm_eval_key(5, 0));
  EXPECT_NE(mlm_eval_key(5, 0), mlm_eval_key(5, 1));
  EXPECT_NE(mlm_eval_key(5, 0), mlm_eval_key(6, 0));
  EXPECT_NE(mlm_eval_key(5, 0), rng::key({5, 0, 0, rng::kData}));
}

TEST(MlmEntropy, UnigramEntropyOfAKnownDistribution) {
  // Ordinary tokens 5,5,6,7 (specials ignored): p = 1/2, 1/4, 1/4, H = 1.5 ln 2.
  TokenDataset d{.seq_len = 4, .vocab = 8, .tokens = {kCls, 5, 5, kSep, kCls, 6, 7, kPad}};
  EXPECT_NEAR(unigram_entropy(d), 1.5 * std::log(2.0), 1e-12);
  d.tokens = {kCls, 6, 6, 6};
  EXPECT_EQ(unigram_entropy(d), 0.0);
}

}  // namespace
}  // namespace laconic
