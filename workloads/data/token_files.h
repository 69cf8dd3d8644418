// Pre-tokenized data files, as llm.c's data scripts (dev/data/*.py) write them and train_gpt2
// reads them: a header of 256 little-endian int32 (magic, version, token count, then zeros), then
// the tokens. Two kinds exist: magic 20240520 version 1 holds uint16 tokens (GPT-2's vocabulary,
// and any other below 65536); magic 20240801 version 7 holds uint32 tokens (LLaMA-3's). Files
// without a header, as nanoGPT's prepare.py writes them (raw uint16 tokens), are format u16.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "workloads/data/lm.h"

namespace laconic {

enum class TokenFormat { llmc, u16 };
inline constexpr std::array kTokenFormatNames{"llmc", "u16"};
constexpr std::span<const char* const> names(TokenFormat) { return kTokenFormatNames; }

inline constexpr std::int32_t kLlmcMagic = 20240520;       // uint16 tokens, version 1
inline constexpr std::int32_t kLlmcMagicU32 = 20240801;    // uint32 tokens, version 7
inline constexpr int kLlmcHeaderInts = 256;

// The files matching `pattern` (a glob(7) pattern, or one path), in sorted order. Throws
// InputError naming the pattern (and `key`, the recipe key it came from) when none matches.
std::vector<std::string> glob_files(const std::string& pattern, const std::string& key);

// The tokens of every file matching `pattern`, concatenated in sorted path order, as a stream of
// vocabulary `vocab`. Throws InputError with one line naming the file for: a header whose magic
// or version is not llm.c's (with the hint for headerless files), a file shorter than its header
// says (truncated) or longer, a u16 file of an odd size, and a token id >= vocab (naming the
// id, its index and data.vocab_size).
TokenStream read_token_files(const std::string& pattern, TokenFormat format, int vocab, const std::string& key);

// Writes `tokens` (each in [0, 65536)) as an llm.c version 1 file: to PATH.tmp, then renamed.
void write_token_file(const std::string& path, std::span<const std::int32_t> tokens);

// `trainer tokenize`: text in, llm.c token files out, with Laconic's BPE.
struct TokenizeOptions {
  std::vector<std::string> inputs;                  // text files or folders (load_text_corpus)
  std::vector<std::string> extensions = {".txt"};   // the files read inside a folder
  int vocab_size = 4000;                            // at most 65536 (the files hold uint16)
  bool lowercase = true;                            // TokenizerOptions::lowercase
  double eval_fraction = 0.05;                      // documents held out to val.bin (0: none)
  std::string out_dir;
};

struct TokenizeReport {
  std::int64_t documents = 0;
  std::int64_t train_tokens = 0, val_tokens = 0;
  int vocab = 0;                 // the tokenizer's size (below vocab_size when merges ran out)
  std::vector<std::string> read;  // per input, what was read and skipped (TextCorpusReport::describe)
  std::string train_file, val_file, tokenizer_file;  // val_file "" when eval_fraction is 0
};

// Reads every input, trains the tokenizer on all their documents, and writes OUT/train.bin,
// OUT/val.bin and OUT/tokenizer.txt (each to a temporary file, then renamed). The documents held
// out are chosen as the text loader chooses them (is_eval_document), each followed by [SEP].
// Throws InputError (one line) for bad options or inputs, before anything is written.
TokenizeReport tokenize_to_files(const TokenizeOptions& options);

}  // namespace laconic
