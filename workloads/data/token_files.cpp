#include "workloads/data/token_files.h"

#include <glob.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/check.h"
#include "core/input.h"
#include "workloads/data/text_corpus.h"

namespace laconic {
namespace {

static_assert(std::endian::native == std::endian::little, "token files are little-endian; this reader assumes a little-endian host");

// A token file is held whole, then as int32 tokens: one larger than the machine's memory cannot be.
std::string read_bytes(const std::string& path) { return read_input_file(path, physical_memory_bytes(), "token file"); }

template <typename T>
void append_tokens(const std::string& path, const char* data, std::size_t count, int vocab, std::vector<std::int32_t>& out) {
  const std::size_t first = out.size();
  out.resize(first + count);
  for (std::size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));
    if (static_cast<std::uint64_t>(v) >= static_cast<std::uint64_t>(vocab))
      LC_INPUT_ERROR(path, ": token ", static_cast<std::uint64_t>(v), " at index ", i,
                     " is outside the model's vocabulary [0, ", vocab, "): set data.vocab_size to the tokenizer's size");
    out[first + i] = static_cast<std::int32_t>(v);
  }
}

void read_llmc(const std::string& path, const std::string& bytes, int vocab, std::vector<std::int32_t>& out) {
  constexpr std::size_t header_bytes = kLlmcHeaderInts * sizeof(std::int32_t);
  if (bytes.size() < header_bytes)
    LC_INPUT_ERROR(path, ": ", bytes.size(), " bytes, shorter than llm.c's header of ", header_bytes,
                   " bytes (for headerless uint16 files, as nanoGPT's prepare.py writes, set data.token_format = \"u16\")");
  std::int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof header);
  const std::int32_t magic = header[0], version = header[1];
  std::size_t width = 0;
  if (magic == kLlmcMagic && version == 1) width = 2;
  if (magic == kLlmcMagicU32 && version == 7) width = 4;
  if (width == 0) {
    if (magic == kLlmcMagic || magic == kLlmcMagicU32)
      LC_INPUT_ERROR(path, ": llm.c header version ", version, " with magic ", magic, ", expected version ",
                     magic == kLlmcMagic ? 1 : 7);
    LC_INPUT_ERROR(path, ": not an llm.c token file: header magic ", magic, ", expected ", kLlmcMagic, " or ", kLlmcMagicU32,
                   " (for headerless uint16 files, as nanoGPT's prepare.py writes, set data.token_format = \"u16\")");
  }
  if (header[2] < 0) LC_INPUT_ERROR(path, ": llm.c header token count ", header[2], " is negative");
  const auto count = static_cast<std::size_t>(header[2]);
  const std::size_t payload = bytes.size() - header_bytes;
  if (payload != count * width)
    LC_INPUT_ERROR(path, ": header says ", count, " tokens (", count * width, " bytes) but the file holds ", payload,
                   " bytes after the header (", payload < count * width ? "truncated" : "trailing bytes", ")");
  if (width == 2)
    append_tokens<std::uint16_t>(path, bytes.data() + header_bytes, count, vocab, out);
  else
    append_tokens<std::uint32_t>(path, bytes.data() + header_bytes, count, vocab, out);
}

}  // namespace

std::vector<std::string> glob_files(const std::string& pattern, const std::string& key) {
  if (pattern.empty()) LC_INPUT_ERROR(key, ": expected a file or glob pattern, got \"\"");
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  const std::unique_ptr<glob_t, void (*)(glob_t*)> guard(&g, ::globfree);
  if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0)) LC_INPUT_ERROR(pattern, ": ", key, ": no file matches");
  if (rc != 0) LC_INPUT_ERROR(pattern, ": ", key, ": cannot expand the pattern (", rc == GLOB_NOSPACE ? "out of memory" : "read error", ")");
  std::vector<std::string> files;
  for (std::size_t i = 0; i < g.gl_pathc; ++i)
    if (std::filesystem::is_regular_file(g.gl_pathv[i])) files.emplace_back(g.gl_pathv[i]);
  if (files.empty()) LC_INPUT_ERROR(pattern, ": ", key, ": matches no regular file");
  std::sort(files.begin(), files.end());
  return files;
}

TokenStream read_token_files(const std::string& pattern, TokenFormat format, int vocab, const std::string& key) {
  TokenStream s;
  s.vocab = vocab;
  for (const std::string& path : glob_files(pattern, key)) {
    const std::string bytes = read_bytes(path);
    if (format == TokenFormat::llmc) {
      read_llmc(path, bytes, vocab, s.tokens);
    } else {
      if (bytes.size() % 2 != 0)
        LC_INPUT_ERROR(path, ": ", bytes.size(), " bytes, not a whole number of uint16 tokens (data.token_format = \"u16\")");
      append_tokens<std::uint16_t>(path, bytes.data(), bytes.size() / 2, vocab, s.tokens);
    }
  }
  if (s.tokens.size() < 2) LC_INPUT_ERROR(pattern, ": ", key, ": ", s.tokens.size(), " tokens in all, too few for one window");
  return s;
}

void write_token_file(const std::string& path, std::span<const std::int32_t> tokens) {
  LC_CHECK(tokens.size() <= 0x7fffffffu, path, ": ", tokens.size(), " tokens do not fit llm.c's int32 count");
  std::vector<std::int32_t> header(kLlmcHeaderInts, 0);
  header[0] = kLlmcMagic;
  header[1] = 1;
  header[2] = static_cast<std::int32_t>(tokens.size());
  std::vector<std::uint16_t> body(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    LC_CHECK(tokens[i] >= 0 && tokens[i] < 65536, path, ": token ", tokens[i], " does not fit uint16");
    body[i] = static_cast<std::uint16_t>(tokens[i]);
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) LC_INPUT_ERROR(tmp, ": cannot write: ", std::strerror(errno));
    out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * 4));
    out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size() * 2));
    if (!out) LC_INPUT_ERROR(tmp, ": write error: ", std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) LC_INPUT_ERROR(path, ": cannot rename ", tmp, ": ", ec.message());
}

TokenizeReport tokenize_to_files(const TokenizeOptions& o) {
  if (o.inputs.empty()) LC_INPUT_ERROR("tokenize: --input: expected at least one text file or folder");
  if (o.out_dir.empty()) LC_INPUT_ERROR("tokenize: --out: expected the folder to write the token files to");
  if (o.vocab_size < kFirstMergeToken || o.vocab_size > 65536)
    LC_INPUT_ERROR("tokenize: --vocab-size: expected ", kFirstMergeToken, " to 65536 (the files hold uint16 ids), got ",
                   o.vocab_size);
  if (!(o.eval_fraction >= 0 && o.eval_fraction < 1))
    LC_INPUT_ERROR("tokenize: --eval-fraction: expected a number in [0, 1), got ", o.eval_fraction);
  TextCorpusOptions co;
  co.extensions = o.extensions;
  co.exclude = {o.out_dir};
  co.extensions_key = "--extensions";
  std::vector<std::string> docs;
  std::vector<std::string> read;
  for (const std::string& input : o.inputs) {
    TextCorpusReport report;
    std::vector<std::string> more = load_text_corpus(input, co, &report);
    read.push_back(report.describe(input));
    docs.insert(docs.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  TokenizerOptions to;
  to.vocab_size = o.vocab_size;
  to.lowercase = o.lowercase;
  const Tokenizer tok = Tokenizer::train(docs, to);
  const LmSplits splits = build_lm_streams(docs, tok, o.eval_fraction);
  if (o.eval_fraction > 0 && splits.eval.tokens.empty())
    LC_INPUT_ERROR("tokenize: ", docs.size(), " documents are too few to hold out --eval-fraction ", o.eval_fraction,
                   " of them (use --eval-fraction 0 for no val.bin)");

  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) LC_INPUT_ERROR(o.out_dir, ": cannot create the folder: ", ec.message());
  const std::filesystem::path out(o.out_dir);
  TokenizeReport r;
  r.documents = static_cast<std::int64_t>(docs.size());
  r.read = std::move(read);
  r.vocab = tok.vocab_size();
  r.train_file = (out / "train.bin").string();
  r.tokenizer_file = (out / "tokenizer.txt").string();
  write_token_file(r.train_file, splits.train.tokens);
  r.train_tokens = static_cast<std::int64_t>(splits.train.tokens.size());
  if (o.eval_fraction > 0) {
    r.val_file = (out / "val.bin").string();
    write_token_file(r.val_file, splits.eval.tokens);
    r.val_tokens = static_cast<std::int64_t>(splits.eval.tokens.size());
  }
  tok.save(r.tokenizer_file);
  return r;
}

}  // namespace laconic
