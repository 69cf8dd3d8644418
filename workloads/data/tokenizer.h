// A deterministic byte-level BPE subword tokenizer (Sennrich, Haddow & Birch 2016, "Neural
// machine translation of rare words with subword units"; byte-level base alphabet as in GPT-2,
// Radford et al. 2019, section 2.2), trained on the corpus it will encode.
//
// Pre-tokenisation splits text into words, which merges never cross:
//  - a word is a maximal run of ASCII letters, ASCII digits and bytes >= 0x80 (so UTF-8 letters
//    stay inside their word), with A-Z lowercased unless TokenizerOptions::lowercase is false
//    (only ASCII: other letters keep their case);
//  - every other non-whitespace byte (punctuation, symbols) is a word of its own;
//  - whitespace only separates.
// "Don't panic!" -> ["don", "'", "t", "panic", "!"]. Each word is then spelt as a space byte
// followed by its bytes (" don"), GPT-2's trick that marks word starts without doubling the
// alphabet, so decode() can put the spaces back: decode(encode(t)) == normalize_text(t).
//
// Ids: the special tokens [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, then the 256 bytes (id 5 + b),
// then one id per merge in the order learnt. Every byte has an id, so [UNK] never appears in an
// encoding; it is reserved so that the special ids stay fixed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace laconic {

enum SpecialToken : std::int32_t { kPad = 0, kUnk = 1, kCls = 2, kSep = 3, kMask = 4 };
inline constexpr std::int32_t kNumSpecialTokens = 5;
inline constexpr std::int32_t kFirstByteToken = kNumSpecialTokens;
inline constexpr std::int32_t kFirstMergeToken = kFirstByteToken + 256;

struct TokenizerOptions {
  int vocab_size = 4000;    // the most ids, special and byte tokens included (>= kFirstMergeToken)
  int min_pair_count = 2;   // stop early when the most frequent pair occurs fewer times
  bool lowercase = true;    // A-Z -> a-z before splitting (recipe data.lowercase)
};

// The words of `text` as described above, each without its leading space.
std::vector<std::string> pretokenize(std::string_view text, bool lowercase = true);
// The words of `text` joined by single spaces: what decode(encode(text)) gives back.
std::string normalize_text(std::string_view text, bool lowercase = true);

class Tokenizer {
 public:
  // Learns merges from the words of `documents` until options.vocab_size ids exist or no pair
  // occurs min_pair_count times. Pairs are counted over the table of distinct words weighted by
  // their frequency and updated only in the words a merge touches, so the fortunes corpus trains
  // in about a second. Ties go to the smallest (left id, right id): identical input, identical
  // merges. Throws InputError when vocab_size is below kFirstMergeToken.
  static Tokenizer train(std::span<const std::string> documents, const TokenizerOptions& options = {});

  // Content hash of the documents and options: what a cached tokenizer must have been trained on.
  static std::uint64_t fingerprint(std::span<const std::string> documents, const TokenizerOptions& options);

  // A small text file: a header with the fingerprint, the lowercase option, the merge count and
  // a checksum of the merges, then one merge per line as "LEFT RIGHT TOKEN" (ids, then the merged
  // bytes with non-printing ones as \xHH, for people; load() checks it). Written to a temporary
  // file and renamed, so a reader never sees half a file.
  void save(const std::string& path) const;
  // Throws InputError naming the file (and the line) when it is missing or not such a file, or
  // when its merges do not match the count and checksum of its header (a file cut short or edited).
  static Tokenizer load(const std::string& path);

  // Where the cache of the tokenizer of (documents, options) lives under `dir`:
  // DIR/tokenizer-<vocab_size>-<16 hex digits of the fingerprint>.txt, so that caches of other
  // corpora or options sit beside it instead of replacing it.
  static std::string cache_path(const std::string& dir, std::span<const std::string> documents,
                                const TokenizerOptions& options);
  // The tokenizer cached at `cache_path` when there is one; otherwise one trained now and saved
  // there. `note`, when given, says which happened (for the run log). A cache that does not load
  // (cut short, edited) or whose fingerprint is not that of (documents, options) is an InputError
  // naming it: the path carries the fingerprint, so either means the file was damaged, and a
  // model trained on it would silently get another vocabulary.
  static Tokenizer load_or_train(const std::string& cache_path, std::span<const std::string> documents,
                                 const TokenizerOptions& options, std::string* note = nullptr);

  std::vector<std::int32_t> encode(std::string_view text) const;
  // Appends the ids of `text` to `out` (encodes a corpus without a vector per document).
  void encode_append(std::string_view text, std::vector<std::int32_t>& out) const;
  // Token bytes concatenated, special tokens written as " [NAME]", leading space dropped.
  std::string decode(std::span<const std::int32_t> ids) const;

  int vocab_size() const { return static_cast<int>(vocab_.size()); }
  std::uint64_t source_hash() const { return source_hash_; }
  bool lowercase() const { return lowercase_; }
  // The bytes of a token (with the word-start space), or the name of a special token.
  const std::string& token(std::int32_t id) const { return vocab_.at(static_cast<std::size_t>(id)); }
  // Merge r made token kFirstMergeToken + r from the pair (left, right).
  const std::vector<std::pair<std::int32_t, std::int32_t>>& merges() const { return merges_; }

 private:
  Tokenizer(std::uint64_t source_hash, bool lowercase);
  void add_merge(std::int32_t left, std::int32_t right);  // appends the next id
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;

  std::uint64_t source_hash_ = 0;
  bool lowercase_ = true;
  std::vector<std::string> vocab_;                                // id -> bytes
  std::vector<std::pair<std::int32_t, std::int32_t>> merges_;     // in the order learnt
  std::unordered_map<std::uint64_t, std::int32_t> merged_id_;     // pair_key(left, right) -> id
};

}  // namespace laconic
