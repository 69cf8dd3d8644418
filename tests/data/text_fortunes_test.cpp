// The real corpus: Debian's fortunes under /usr/share/games/fortunes (skipped when not installed).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "workloads/data/mlm.h"
#include "workloads/data/text_corpus.h"
#include "workloads/data/tokenizer.h"

namespace laconic {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(FortunesReal, LoadTrainPackAndBaseline) {
  if (!std::filesystem::is_directory(kFortunesDir)) GTEST_SKIP() << kFortunesDir << " absent (apt-get install fortunes)";

  auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> docs = load_text_corpus(kFortunesDir, TextCorpusOptions{.extensions = {""}});
  const double load_s = seconds_since(t0);
  std::size_t bytes = 0;
  for (const std::string& d : docs) bytes += d.size();
  EXPECT_GT(docs.size(), 1000u);

  t0 = std::chrono::steady_clock::now();
  const Tokenizer tok = Tokenizer::train(docs, {.vocab_size = 4000});
  const double train_s = seconds_since(t0);
  EXPECT_EQ(tok.vocab_size(), 4000);
  // Timing is printed, not asserted (speed belongs in benchmarks): about 1.5 s on one core here.

  t0 = std::chrono::steady_clock::now();
  const TextSplits s = build_text_datasets(docs, tok, {.seq_len = 128, .eval_fraction = 0.05});
  const double pack_s = seconds_since(t0);
  const std::int64_t tokens = static_cast<std::int64_t>(s.train.tokens.size() + s.eval.tokens.size());
  const double h_train = unigram_entropy(s.train), h_eval = unigram_entropy(s.eval);

  std::printf("fortunes: %zu documents, %zu bytes (load %.2f s); BPE 4000 trained in %.2f s; "
              "%lld tokens packed in %.2f s (%.2f bytes/token) into %lld train + %lld eval sequences of 128; "
              "unigram entropy %.3f nats (train), %.3f (eval)\n",
              docs.size(), bytes, load_s, train_s, static_cast<long long>(tokens), pack_s,
              static_cast<double>(bytes) / static_cast<double>(tokens), static_cast<long long>(s.train.size()),
              static_cast<long long>(s.eval.size()), h_train, h_eval);

  // Subwords, not bytes: English BPE with 4000 ids averages well over 2 bytes per token.
  EXPECT_GT(static_cast<double>(bytes) / static_cast<double>(tokens), 2.5);
  // A context-free predictor over ~4000 ids: between a few nats and log(4000) = 8.3.
  EXPECT_GT(h_train, 4.0);
  EXPECT_LT(h_train, std::log(4000.0));
  for (std::size_t i = 0; i < docs.size(); i += 97)
    ASSERT_EQ(tok.decode(tok.encode(docs[i])), normalize_text(docs[i])) << docs[i];
}

}  // namespace
}  // namespace laconic
