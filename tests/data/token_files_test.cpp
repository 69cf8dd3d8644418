// Token streams for the GPT: llm.c's .bin files (both header kinds, headerless uint16), every
// corruption case as a one-line error naming the file, globs, windows and their next-token
// targets, the unigram baseline, and `trainer tokenize`'s files decoding back to the corpus.
#include "workloads/data/token_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/check.h"
#include "workloads/data/lm.h"
#include "workloads/data/mlm.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

class TokenFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("laconic_tokens_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file of header ints (256, zero-padded) then raw bytes.
  std::string write_raw(const std::string& name, std::vector<std::int32_t> header, const std::string& body) {
    const fs::path p = dir_ / name;
    std::ofstream out(p, std::ios::binary);
    if (!header.empty()) {
      header.resize(kLlmcHeaderInts, 0);
      out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * 4));
    }
    out << body;
    return p.string();
  }
  template <typename T>
  static std::string bytes_of(const std::vector<T>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }

  void expect_error(const std::string& pattern, TokenFormat f, int vocab, const std::string& file, const std::string& what) {
    try {
      read_token_files(pattern, f, vocab, "data.train_path");
      ADD_FAILURE() << "no InputError for " << pattern;
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind(file, 0), 0u) << msg;  // starts with the file's name
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }

  fs::path dir_;
};

TEST_F(TokenFiles, RoundTripAndBothLlmcKindsAndHeaderless) {
  const std::vector<std::int32_t> ids = {3, 65535, 0, 7, 4000, 12};
  const std::string a = (dir_ / "a.bin").string();
  write_token_file(a, ids);
  EXPECT_FALSE(fs::exists(a + ".tmp"));
  EXPECT_EQ(fs::file_size(a), 256u * 4 + ids.size() * 2);
  EXPECT_EQ(read_token_files(a, TokenFormat::llmc, 65536, "k").tokens, ids);
  // LLaMA-3's kind: magic 20240801, version 7, uint32 tokens.
  const std::vector<std::uint32_t> wide = {100000, 5, 128255};
  write_raw("w.bin", {kLlmcMagicU32, 7, 3}, bytes_of(wide));
  EXPECT_EQ(read_token_files((dir_ / "w.bin").string(), TokenFormat::llmc, 128256, "k").tokens,
            (std::vector<std::int32_t>{100000, 5, 128255}));
  // nanoGPT's prepare.py: raw uint16, no header.
  write_raw("n.bin", {}, bytes_of(std::vector<std::uint16_t>{9, 8, 7}));
  EXPECT_EQ(read_token_files((dir_ / "n.bin").string(), TokenFormat::u16, 10, "k").tokens,
            (std::vector<std::int32_t>{9, 8, 7}));
}

TEST_F(TokenFiles, GlobConcatenatesInSortedOrder) {
  write_token_file((dir_ / "shard_001.bin").string(), std::vector<std::int32_t>{4, 5});
  write_token_file((dir_ / "shard_000.bin").string(), std::vector<std::int32_t>{1, 2, 3});
  write_token_file((dir_ / "val_000.bin").string(), std::vector<std::int32_t>{9, 9});
  EXPECT_EQ(read_token_files((dir_ / "shard_*.bin").string(), TokenFormat::llmc, 10, "k").tokens,
            (std::vector<std::int32_t>{1, 2, 3, 4, 5}));
  try {
    read_token_files((dir_ / "nothing_*.bin").string(), TokenFormat::llmc, 10, "data.val_path");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing_*.bin: data.val_path: no file matches"), std::string::npos) << e.what();
  }
}

TEST_F(TokenFiles, EveryCorruptionIsAOneLineErrorNamingTheFile) {
  const std::vector<std::uint16_t> body = {1, 2, 3, 4};
  const std::string bad_magic = write_raw("magic.bin", {12345, 1, 4}, bytes_of(body));
  expect_error(bad_magic, TokenFormat::llmc, 10, bad_magic, "not an llm.c token file: header magic 12345, expected 20240520");
  expect_error(bad_magic, TokenFormat::llmc, 10, bad_magic, "data.token_format = \"u16\"");
  const std::string bad_version = write_raw("version.bin", {kLlmcMagic, 3, 4}, bytes_of(body));
  expect_error(bad_version, TokenFormat::llmc, 10, bad_version, "llm.c header version 3 with magic 20240520, expected version 1");
  const std::string truncated = write_raw("trunc.bin", {kLlmcMagic, 1, 6}, bytes_of(body));
  expect_error(truncated, TokenFormat::llmc, 10, truncated, "header says 6 tokens (12 bytes) but the file holds 8 bytes after the header (truncated)");
  const std::string longer = write_raw("long.bin", {kLlmcMagic, 1, 3}, bytes_of(body));
  expect_error(longer, TokenFormat::llmc, 10, longer, "(trailing bytes)");
  const std::string tiny = write_raw("tiny.bin", {}, "abc");
  expect_error(tiny, TokenFormat::llmc, 10, tiny, "3 bytes, shorter than llm.c's header of 1024 bytes");
  expect_error(tiny, TokenFormat::u16, 10, tiny, "3 bytes, not a whole number of uint16 tokens");
  const std::string big = write_raw("big.bin", {kLlmcMagic, 1, 4}, bytes_of(std::vector<std::uint16_t>{1, 2, 50256, 4}));
  expect_error(big, TokenFormat::llmc, 4000, big,
               "token 50256 at index 2 is outside the model's vocabulary [0, 4000): set data.vocab_size");
  const std::string negative = write_raw("neg.bin", {kLlmcMagic, 1, -1}, "");
  expect_error(negative, TokenFormat::llmc, 10, negative, "token count -1 is negative");
}

TEST(LmSource, WindowsShareOneBoundaryTokenAndTargetsAreTheNextTokens) {
  auto s = std::make_shared<TokenStream>();
  s->vocab = 20;
  for (int i = 0; i < 10; ++i) s->tokens.push_back(i + 5);  // 5..14
  const LmSource src(s, 3);
  EXPECT_EQ(src.size(), 3);  // (10 - 1) / 3
  Batch b;
  const std::int64_t idx[] = {2, 0};
  src.fill(b, idx, 0);
  EXPECT_EQ(b.size, 2);
  EXPECT_EQ(b.seq_len, 3);
  EXPECT_EQ(b.tokens, (std::vector<std::int32_t>{11, 12, 13, 5, 6, 7}));
  EXPECT_EQ(b.targets, (std::vector<std::int32_t>{12, 13, 14, 6, 7, 8}));
  // The baseline: targets of the 3 windows are tokens 1..9, all distinct: ln 9.
  EXPECT_NEAR(unigram_entropy(*s, 3), std::log(9.0), 1e-12);
  s->tokens = {1, 2, 2, 2, 3};  // targets 2, 2, 2, 3 (seq 2: two windows)
  EXPECT_NEAR(unigram_entropy(*s, 2), -(0.75 * std::log(0.75) + 0.25 * std::log(0.25)), 1e-12);
}

TEST_F(TokenFiles, TokenizeWritesFilesThatDecodeBackToTheCorpus) {
  {
    std::ofstream(dir_ / "a.txt") << "the cat sat on the mat\n\nthe dog sat on the log\n";
    std::ofstream(dir_ / "b.txt") << "a cat and a dog\n\nsat on a mat\n\none more line here\n";
    std::ofstream(dir_ / "skip.md") << "never read\n";
  }
  TokenizeOptions o;
  o.inputs = {dir_.string()};
  o.vocab_size = 300;
  o.eval_fraction = 0.2;  // documents 4 (0-based) of 5 is held out
  o.out_dir = (dir_ / "out").string();
  const TokenizeReport r = tokenize_to_files(o);
  EXPECT_EQ(r.documents, 5);
  EXPECT_LE(r.vocab, 300);
  const Tokenizer tok = Tokenizer::load(r.tokenizer_file);
  const TokenStream train = read_token_files(r.train_file, TokenFormat::llmc, r.vocab, "k");
  const TokenStream val = read_token_files(r.val_file, TokenFormat::llmc, r.vocab, "k");
  EXPECT_EQ(static_cast<std::int64_t>(train.tokens.size()), r.train_tokens);
  EXPECT_EQ(tok.decode(train.tokens),
            "the cat sat on the mat [SEP] the dog sat on the log [SEP] a cat and a dog [SEP] sat on a mat [SEP]");
  EXPECT_EQ(tok.decode(val.tokens), "one more line here [SEP]");
  // Tokenizing again (the output folder inside the input one) reads the same corpus: out/ is skipped.
  EXPECT_EQ(tokenize_to_files(o).documents, 5);
  o.vocab_size = 70000;
  EXPECT_THROW(tokenize_to_files(o), InputError);
}

}  // namespace
}  // namespace laconic
