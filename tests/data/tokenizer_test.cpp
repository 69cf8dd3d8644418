#include "workloads/data/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/rng.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;
using Docs = std::vector<std::string>;

// 300 documents of English-like text: words drawn with Zipf-like weights (word k about 1/(k+1)),
// mixed case, punctuation and a few UTF-8 words, so BPE has frequent and rare pairs to learn.
Docs sample_corpus(int n_docs = 300) {
  static const char* kWords[] = {"the", "of", "and", "to", "a", "in", "is", "you", "that", "it", "he", "was",
                                 "for", "on", "are", "as", "with", "his", "they", "I", "at", "be", "this",
                                 "have", "from", "or", "one", "had", "by", "word", "but", "not", "what", "all",
                                 "Were", "WHEN", "your", "can", "said", "there", "use", "an", "each", "which",
                                 "she", "do", "how", "their", "if", "will", "up", "other", "about", "out",
                                 "many", "then", "them", "these", "so", "some", "her", "would", "make", "like",
                                 "caf\xc3\xa9", "na\xc3\xafve", "2024", "don't", "e-mail", "(sic)", "...", "!"};
  constexpr int kN = sizeof kWords / sizeof kWords[0];
  Docs docs;
  for (int d = 0; d < n_docs; ++d) {
    std::string doc;
    for (int w = 0; w < 25; ++w) {
      const std::uint64_t key = rng::key({7, static_cast<std::uint64_t>(d), static_cast<std::uint64_t>(w)});
      // Zipf-like: u^3 concentrates mass on small indices.
      const float u = rng::uniform(key, 0);
      const int k = static_cast<int>(u * u * u * kN);
      if (!doc.empty()) doc += (w % 9 == 8) ? "\n" : " ";
      doc += kWords[k];
    }
    docs.push_back(doc);
  }
  return docs;
}

TEST(Pretokenize, WordsLowercasedPunctuationAlone) {
  EXPECT_EQ(pretokenize("Don't panic!  42nd CAF\xc3\x89..."),
            (Docs{"don", "'", "t", "panic", "!", "42nd", "caf\xc3\x89", ".", ".", "."}));
  EXPECT_EQ(normalize_text(" Hello,\tWorld! "), "hello , world !");
  EXPECT_TRUE(pretokenize(" \n ").empty());
  // data.lowercase = false: ASCII case is kept (and non-ASCII bytes are never touched).
  EXPECT_EQ(pretokenize("Don't CAF\xc3\x89", false), (Docs{"Don", "'", "t", "CAF\xc3\x89"}));
}

// The lowercase option decides what encode() sees, is part of the fingerprint (a cache of the
// other setting is not reused) and survives save/load.
TEST(Tokenizer, LowercaseIsAnOptionRecordedInTheFingerprint) {
  const Docs docs = sample_corpus(50);
  const Tokenizer folded = Tokenizer::train(docs, {.vocab_size = 300});
  const Tokenizer cased = Tokenizer::train(docs, {.vocab_size = 300, .lowercase = false});
  EXPECT_TRUE(folded.lowercase());
  EXPECT_FALSE(cased.lowercase());
  EXPECT_NE(Tokenizer::fingerprint(docs, {.vocab_size = 300}), Tokenizer::fingerprint(docs, {.vocab_size = 300, .lowercase = false}));
  EXPECT_EQ(folded.encode("WHEN When when"), folded.encode("when when when"));
  EXPECT_NE(cased.encode("WHEN"), cased.encode("when"));
  EXPECT_EQ(cased.decode(cased.encode("Were WHEN")), "Were WHEN");
  const std::string file = (fs::temp_directory_path() / ("laconic_tok_case_" + std::to_string(::getpid()))).string();
  cased.save(file);
  const Tokenizer back = Tokenizer::load(file);
  fs::remove(file);
  EXPECT_FALSE(back.lowercase());
  EXPECT_EQ(back.encode("Were WHEN"), cased.encode("Were WHEN"));
}

TEST(Tokenizer, SpecialAndByteIdsAreFixed) {
  const Tokenizer tok = Tokenizer::train(sample_corpus(20), {.vocab_size = 300});
  EXPECT_EQ(tok.token(kPad), "[PAD]");
  EXPECT_EQ(tok.token(kUnk), "[UNK]");
  EXPECT_EQ(tok.token(kCls), "[CLS]");
  EXPECT_EQ(tok.token(kSep), "[SEP]");
  EXPECT_EQ(tok.token(kMask), "[MASK]");
  EXPECT_EQ(tok.token(kFirstByteToken + 'a'), "a");
  EXPECT_EQ(tok.token(kFirstByteToken + 255), std::string(1, '\xff'));
  EXPECT_EQ(kFirstMergeToken, 261);
}

TEST(Tokenizer, VocabSizeIsRespected) {
  const Docs docs = sample_corpus();
  for (int v : {261, 262, 300, 400}) {
    const Tokenizer tok = Tokenizer::train(docs, {.vocab_size = v});
    EXPECT_EQ(tok.vocab_size(), v);
    EXPECT_EQ(static_cast<int>(tok.merges().size()), v - kFirstMergeToken);
    for (const std::string& d : docs)
      for (const std::int32_t id : tok.encode(d)) ASSERT_TRUE(id >= kFirstByteToken && id < v) << id;
  }
  // A corpus with few distinct pairs runs out of merges: fewer ids, never more.
  const Tokenizer small = Tokenizer::train(Docs{"ab ab ab"}, {.vocab_size = 4000});
  EXPECT_EQ(small.vocab_size(), kFirstMergeToken + 2);  // " a", then " ab"
  EXPECT_THROW(Tokenizer::train(docs, {.vocab_size = 260}), InputError);
}

TEST(Tokenizer, MostFrequentPairFirstTiesToSmallestIds) {
  // Pairs: (' ',x) and (x,y) 5 times, (' ',a) and (a,b) 3 times. (' ',x) wins the tie at 5
  // because ' ' has the smaller id; then " x"+"y" (5) beats everything at 3.
  const Tokenizer tok = Tokenizer::train(Docs{"xy xy xy ab xy ab", "ab xy"}, {.vocab_size = 265});
  ASSERT_EQ(tok.merges().size(), 4u);
  EXPECT_EQ(tok.token(kFirstMergeToken + 0), " x");
  EXPECT_EQ(tok.token(kFirstMergeToken + 1), " xy");
  EXPECT_EQ(tok.token(kFirstMergeToken + 2), " a");
  EXPECT_EQ(tok.token(kFirstMergeToken + 3), " ab");
  EXPECT_EQ(tok.encode("XY ab Xy"), (std::vector<std::int32_t>{kFirstMergeToken + 1, kFirstMergeToken + 3,
                                                               kFirstMergeToken + 1}));
}

TEST(Tokenizer, TrainingIsDeterministic) {
  const Docs docs = sample_corpus();
  const Docs copy(docs.begin(), docs.end());
  const Tokenizer a = Tokenizer::train(docs, {.vocab_size = 500});
  const Tokenizer b = Tokenizer::train(copy, {.vocab_size = 500});
  EXPECT_EQ(a.merges(), b.merges());
  EXPECT_EQ(a.source_hash(), b.source_hash());
  for (int id = 0; id < a.vocab_size(); ++id) ASSERT_EQ(a.token(id), b.token(id));
}

TEST(Tokenizer, RoundTripAndCompression) {
  const Docs docs = sample_corpus();
  const Tokenizer tok = Tokenizer::train(docs, {.vocab_size = 400});
  std::size_t symbols = 0, tokens = 0;
  for (const std::string& d : docs) {
    const auto ids = tok.encode(d);
    EXPECT_EQ(tok.decode(ids), normalize_text(d));
    for (const std::string& w : pretokenize(d)) symbols += 1 + w.size();  // word-start space + bytes
    tokens += ids.size();
  }
  // The merges are used: most words of this corpus become one token.
  EXPECT_LT(static_cast<double>(tokens), 0.4 * static_cast<double>(symbols)) << tokens << " / " << symbols;
  // Text never seen in training (unseen bytes included) still round-trips: the base is bytes.
  const std::string unseen = "Zebras \xe2\x82\xac 9 {quux} \x01";
  EXPECT_EQ(tok.decode(tok.encode(unseen)), normalize_text(unseen));
  EXPECT_EQ(tok.decode(std::vector<std::int32_t>{kCls, kFirstMergeToken, kMask, kSep}),
            "[CLS]" + tok.token(kFirstMergeToken) + " [MASK] [SEP]");
}

class TokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("laconic_tok_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path() const { return (dir_ / "tokenizer.txt").string(); }
  std::string read() const {
    std::ifstream in(path());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void write(const std::string& text) const { std::ofstream(path(), std::ios::trunc) << text; }

  // Tokenizer::load must throw an InputError: one line naming the file and saying `what`.
  void expect_load_error(const std::string& what) const {
    try {
      Tokenizer::load(path());
      ADD_FAILURE() << "no InputError; expected '" << what << "'";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path()), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }

  fs::path dir_;
};

TEST_F(TokenizerFiles, SaveLoadGivesIdenticalEncodings) {
  const Docs docs = sample_corpus();
  const Tokenizer tok = Tokenizer::train(docs, {.vocab_size = 400});
  tok.save(path());
  const Tokenizer back = Tokenizer::load(path());
  EXPECT_EQ(back.merges(), tok.merges());
  EXPECT_EQ(back.source_hash(), tok.source_hash());
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  for (const std::string& d : docs) ASSERT_EQ(back.encode(d), tok.encode(d));
  // Only the file itself is left behind (the temporary was renamed over it).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(TokenizerFiles, CorruptFilesAreInputErrors) {
  expect_load_error("cannot open");
  Tokenizer::train(sample_corpus(), {.vocab_size = 300}).save(path());
  const std::string good = read();

  write("not a tokenizer\n");
  expect_load_error(":1: expected the header");

  // Where line n (1-based) starts. The header is 5 lines; merges start on line 6.
  const auto line_start = [&](int n) {
    std::size_t at = 0;
    for (int line = 1; line < n; ++line) at = good.find('\n', at) + 1;
    return at;
  };

  // Cut after 10 of the 39 merges.
  write(good.substr(0, line_start(16)));
  expect_load_error(":16: file ends where a merge was expected");

  // Cut to 3 merges with the count edited to match: the checksum of the merges tells (this file
  // loaded as a 264-token vocabulary where 300 were trained).
  const std::size_t count_line = line_start(4);
  write(good.substr(0, count_line) + "merges 3" + good.substr(good.find('\n', count_line), line_start(9) - good.find('\n', count_line)));
  expect_load_error(":5: expected the 3 merges to have checksum");

  // A merge line whose token is not the concatenation of its pair.
  const std::size_t line6 = line_start(6);
  const std::size_t end6 = good.find('\n', line6);
  write(good.substr(0, line6) + "5 6 zz" + good.substr(end6));
  expect_load_error(":6: expected TOKEN to be the concatenation");

  // An id that does not exist yet (merges may only use earlier ids).
  write(good.substr(0, line6) + "5 100000 x" + good.substr(end6));
  expect_load_error(":6: expected ids in 5..260");

  write(good + "trailing\n");
  expect_load_error("expected the end of the file");

  write(good);
  EXPECT_NO_THROW(Tokenizer::load(path()));
}

// Caches of other corpora or options live beside each other: the file name carries the vocabulary
// size and the fingerprint (today's runs/ held one tokenizer-4000.txt, replaced by every corpus).
TEST(TokenizerCache, PathIsKeyedByCorpusAndOptions) {
  const Docs docs = sample_corpus(20);
  const TokenizerOptions opts{.vocab_size = 300};
  const std::string p = Tokenizer::cache_path("runs", docs, opts);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(Tokenizer::fingerprint(docs, opts)));
  EXPECT_EQ(p, std::string("runs/tokenizer-300-") + hex + ".txt");
  EXPECT_EQ(Tokenizer::cache_path("runs", docs, opts), p);
  EXPECT_NE(Tokenizer::cache_path("runs", sample_corpus(21), opts), p);
  EXPECT_NE(Tokenizer::cache_path("runs", docs, {.vocab_size = 301}), p);
}

TEST_F(TokenizerFiles, FingerprintDetectsStaleCaches) {
  Docs docs = sample_corpus(50);
  const TokenizerOptions opts{.vocab_size = 300};
  const std::uint64_t h = Tokenizer::fingerprint(docs, opts);
  EXPECT_EQ(Tokenizer::train(docs, opts).source_hash(), h);
  EXPECT_NE(Tokenizer::fingerprint(docs, {.vocab_size = 301}), h);
  EXPECT_NE(Tokenizer::fingerprint(docs, {.vocab_size = 300, .min_pair_count = 3}), h);
  EXPECT_NE(Tokenizer::fingerprint(Docs{"ab", "c"}, opts), Tokenizer::fingerprint(Docs{"a", "bc"}, opts));

  std::string note;
  const Tokenizer first = Tokenizer::load_or_train(path(), docs, opts, &note);
  EXPECT_NE(note.find("trained and saved"), std::string::npos) << note;
  const Tokenizer cached = Tokenizer::load_or_train(path(), docs, opts, &note);
  EXPECT_NE(note.find("loaded from"), std::string::npos) << note;
  EXPECT_EQ(cached.merges(), first.merges());
  const std::string good = read();

  // The cache's name carries the fingerprint, so a file there of another corpus or options, or
  // one that does not load, was damaged: an error naming it, not a model on another vocabulary.
  const auto expect_cache_error = [&](const Docs& d, const std::string& what) {
    try {
      Tokenizer::load_or_train(path(), d, opts, &note);
      ADD_FAILURE() << "no InputError; expected '" << what << "'";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path()), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_NE(msg.find("delete it to train the tokenizer again"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  };
  docs.back() += " a changed ending";
  expect_cache_error(docs, "tokenizer cache with fingerprint");
  write("garbage\n");
  expect_cache_error(docs, ":1: expected the header");
  const std::string cut = good.substr(0, good.rfind('\n', good.size() / 2) + 1);  // whole lines
  write(cut);
  expect_cache_error(docs, "file ends where a merge was expected");
  EXPECT_EQ(read(), cut);  // left as it was, for the user to look at
}

}  // namespace
}  // namespace laconic
