#include "workloads/data/tokenizer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <queue>
#include <sstream>
#include <thread>

#include "core/check.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

// Bump when pre-tokenisation, training or the file layout changes: it is part of every
// fingerprint, so caches written by an older build are retrained instead of silently reused.
// 2: the lowercase option and the checksum of the merges in the header.
constexpr const char* kFormat = "laconic-bpe 2";

constexpr const char* kSpecialNames[kNumSpecialTokens] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

constexpr std::int32_t kSpaceToken = kFirstByteToken + ' ';

bool is_word_byte(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80; }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
char lower(unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); }

// Calls f(word) for each pre-token of text (see tokenizer.h); `word` is a scratch buffer, so a
// pass over a corpus allocates only while it grows.
template <typename F>
void for_each_word(std::string_view text, bool lowercase, std::string& word, F&& f) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (is_space(c)) {
      ++i;
    } else if (is_word_byte(c)) {
      word.clear();
      for (; i < text.size() && is_word_byte(static_cast<unsigned char>(text[i])); ++i)
        word.push_back(lowercase ? lower(static_cast<unsigned char>(text[i])) : text[i]);
      f(std::string_view(word));
    } else {
      f(text.substr(i, 1));
      ++i;
    }
  }
}

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (std::uint64_t{static_cast<std::uint32_t>(left)} << 32) | static_cast<std::uint32_t>(right);
}
std::int32_t left_of(std::uint64_t key) { return static_cast<std::int32_t>(key >> 32); }
std::int32_t right_of(std::uint64_t key) { return static_cast<std::int32_t>(key & 0xffffffffu); }

// Replaces each non-overlapping (left, right), scanning left to right, by `merged` in s[0, n);
// returns the new length. Training and encoding share it, so they segment alike.
std::size_t merge_in_place(std::int32_t* s, std::size_t n, std::int32_t left, std::int32_t right, std::int32_t merged) {
  std::size_t w = 0;
  for (std::size_t r = 0; r < n;) {
    if (r + 1 < n && s[r] == left && s[r + 1] == right) {
      s[w++] = merged;
      r += 2;
    } else {
      s[w++] = s[r++];
    }
  }
  return w;
}

// FNV-1a, 64-bit (Fowler, Noll & Vo): a content hash, not a security measure.
class Fnv1a {
 public:
  void bytes(std::string_view s) {
    for (const char c : s) h_ = (h_ ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes(std::string_view(reinterpret_cast<const char*>(&v) + i, 1));
  }
  std::uint64_t value() const { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ULL;
};

// What the header's "checksum" line holds: FNV-1a over the merges' ids, in order.
std::uint64_t merges_checksum(const std::vector<std::pair<std::int32_t, std::int32_t>>& merges) {
  Fnv1a h;
  for (const auto& [left, right] : merges) h.u64(pair_key(left, right));
  return h.value();
}

std::string hex16(std::uint64_t v) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(v));
  return hex;
}

// Printable ASCII as is, everything else (space included) as \xHH: one token per whitespace-free field.
std::string escape(std::string_view bytes) {
  std::string out;
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c > 0x20 && c < 0x7f && c != '\\') {
      out.push_back(ch);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

// The BPE learner's state: distinct words with their frequencies, the frequency of every adjacent
// symbol pair summed over them, and which words hold each pair. A merge rewrites only the words
// that hold its pair and adjusts the counts of the pairs in them, so a merge costs time in
// proportion to the words it touches, not to the corpus.
class PairCounter {
 public:
  PairCounter(std::vector<std::vector<std::int32_t>> words, std::vector<std::int64_t> freqs)
      : words_(std::move(words)), freqs_(std::move(freqs)) {
    for (std::size_t w = 0; w < words_.size(); ++w) count_pairs(static_cast<std::int32_t>(w), +1, -1);
    for (const auto& [key, count] : counts_) heap_.push({count, key});
    touched_.clear();
  }

  // The most frequent pair (ties: smallest key) if it occurs at least min_count times.
  bool best(std::int64_t min_count, std::uint64_t& key) {
    while (!heap_.empty()) {
      const Candidate top = heap_.top();
      const auto it = counts_.find(top.key);
      if (it != counts_.end() && it->second == top.count) {
        key = top.key;
        return top.count >= min_count;
      }
      heap_.pop();  // stale: the count changed after this entry was pushed
    }
    return false;
  }

  void merge(std::uint64_t key, std::int32_t merged) {
    const auto it = where_.find(key);
    if (it == where_.end()) return;
    std::vector<std::int32_t> holders = std::move(it->second);
    where_.erase(it);
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    for (const std::int32_t w : holders) {
      auto& s = words_[static_cast<std::size_t>(w)];
      count_pairs(w, -1, -1);
      s.resize(merge_in_place(s.data(), s.size(), left_of(key), right_of(key), merged));
      count_pairs(w, +1, merged);
    }
    // Lazy deletion: push the new count of every pair that changed; best() skips entries whose
    // count is no longer current.
    for (const std::uint64_t k : touched_) {
      const auto c = counts_.find(k);
      if (c != counts_.end()) heap_.push({c->second, k});
    }
    touched_.clear();
  }

 private:
  struct Candidate {
    std::int64_t count;
    std::uint64_t key;
    // priority_queue pops the largest: highest count first, then the smallest (left, right).
    bool operator<(const Candidate& o) const { return count != o.count ? count < o.count : key > o.key; }
  };

  // Adds sign * freq(w) to the count of each adjacent pair of word w. Pairs that involve `fresh`
  // (a symbol just made) are new to this word, so w is recorded as one of their holders; any
  // other pair of w was already adjacent before the merge and w is on its list.
  void count_pairs(std::int32_t w, int sign, std::int32_t fresh) {
    const auto& s = words_[static_cast<std::size_t>(w)];
    const std::int64_t delta = sign * freqs_[static_cast<std::size_t>(w)];
    for (std::size_t i = 0; i + 1 < s.size(); ++i) {
      const std::uint64_t k = pair_key(s[i], s[i + 1]);
      auto& c = counts_[k];
      c += delta;
      if (c == 0) counts_.erase(k);
      touched_.push_back(k);
      if (sign > 0 && (fresh < 0 || s[i] == fresh || s[i + 1] == fresh)) where_[k].push_back(w);
    }
  }

  std::vector<std::vector<std::int32_t>> words_;  // symbols of each distinct word
  std::vector<std::int64_t> freqs_;               // its number of occurrences
  std::unordered_map<std::uint64_t, std::int64_t> counts_;               // pair -> occurrences (> 0)
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> where_;  // pair -> words (may repeat or be stale)
  std::priority_queue<Candidate> heap_;
  std::vector<std::uint64_t> touched_;
};

}  // namespace

std::vector<std::string> pretokenize(std::string_view text, bool lowercase) {
  std::vector<std::string> words;
  std::string scratch;
  for_each_word(text, lowercase, scratch, [&](std::string_view w) { words.emplace_back(w); });
  return words;
}

std::string normalize_text(std::string_view text, bool lowercase) {
  std::string out;
  std::string scratch;
  for_each_word(text, lowercase, scratch, [&](std::string_view w) {
    if (!out.empty()) out.push_back(' ');
    out.append(w);
  });
  return out;
}

Tokenizer::Tokenizer(std::uint64_t source_hash, bool lowercase) : source_hash_(source_hash), lowercase_(lowercase) {
  for (const char* name : kSpecialNames) vocab_.emplace_back(name);
  for (int b = 0; b < 256; ++b) vocab_.emplace_back(1, static_cast<char>(b));
}

void Tokenizer::add_merge(std::int32_t left, std::int32_t right) {
  const auto id = static_cast<std::int32_t>(vocab_.size());
  merged_id_.emplace(pair_key(left, right), id);
  merges_.emplace_back(left, right);
  vocab_.push_back(vocab_[static_cast<std::size_t>(left)] + vocab_[static_cast<std::size_t>(right)]);
}

std::uint64_t Tokenizer::fingerprint(std::span<const std::string> documents, const TokenizerOptions& options) {
  Fnv1a h;
  h.bytes(kFormat);
  h.u64(static_cast<std::uint64_t>(options.vocab_size));
  h.u64(static_cast<std::uint64_t>(options.min_pair_count));
  h.u64(options.lowercase ? 1 : 0);
  h.u64(documents.size());
  // Lengths delimit the documents, so ["ab", "c"] and ["a", "bc"] differ.
  for (const std::string& d : documents) {
    h.u64(d.size());
    h.bytes(d);
  }
  return h.value();
}

Tokenizer Tokenizer::train(std::span<const std::string> documents, const TokenizerOptions& options) {
  if (options.vocab_size < kFirstMergeToken)
    LC_INPUT_ERROR("tokenizer vocab_size ", options.vocab_size, " is below ", kFirstMergeToken,
                   " (5 special tokens + 256 byte tokens)");
  if (options.min_pair_count < 1) LC_INPUT_ERROR("tokenizer min_pair_count ", options.min_pair_count, " must be >= 1");

  // The table of distinct words, in sorted order so that everything after is independent of
  // hash-map iteration order.
  std::unordered_map<std::string, std::int64_t> table;
  std::string scratch;
  for (const std::string& doc : documents)
    for_each_word(doc, options.lowercase, scratch, [&](std::string_view w) { ++table[std::string(w)]; });
  std::vector<std::pair<std::string, std::int64_t>> sorted(table.begin(), table.end());
  table.clear();
  std::sort(sorted.begin(), sorted.end());

  std::vector<std::vector<std::int32_t>> words;
  std::vector<std::int64_t> freqs;
  words.reserve(sorted.size());
  freqs.reserve(sorted.size());
  for (const auto& [w, n] : sorted) {
    std::vector<std::int32_t> s{kSpaceToken};
    for (const char c : w) s.push_back(kFirstByteToken + static_cast<unsigned char>(c));
    words.push_back(std::move(s));
    freqs.push_back(n);
  }

  Tokenizer tok(fingerprint(documents, options), options.lowercase);
  PairCounter pairs(std::move(words), std::move(freqs));
  std::uint64_t key = 0;
  while (tok.vocab_size() < options.vocab_size && pairs.best(options.min_pair_count, key)) {
    pairs.merge(key, tok.vocab_size());
    tok.add_merge(left_of(key), right_of(key));
  }
  return tok;
}

void Tokenizer::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  const std::size_t begin = out.size();
  out.push_back(kSpaceToken);
  for (const char c : word) out.push_back(kFirstByteToken + static_cast<unsigned char>(c));
  // Apply the earliest-learnt merge present until none applies: the order training applied them,
  // so a training word is segmented exactly as training left it.
  for (;;) {
    std::int32_t best = std::numeric_limits<std::int32_t>::max();
    for (std::size_t i = begin; i + 1 < out.size(); ++i) {
      const auto it = merged_id_.find(pair_key(out[i], out[i + 1]));
      if (it != merged_id_.end()) best = std::min(best, it->second);
    }
    if (best == std::numeric_limits<std::int32_t>::max()) return;
    const auto [left, right] = merges_[static_cast<std::size_t>(best - kFirstMergeToken)];
    out.resize(begin + merge_in_place(out.data() + begin, out.size() - begin, left, right, best));
  }
}

void Tokenizer::encode_append(std::string_view text, std::vector<std::int32_t>& out) const {
  std::string scratch;
  for_each_word(text, lowercase_, scratch, [&](std::string_view w) { encode_word(w, out); });
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  encode_append(text, ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (const std::int32_t id : ids) {
    LC_CHECK(id >= 0 && id < vocab_size(), "token id ", id, " outside a vocabulary of ", vocab_size());
    if (id < kNumSpecialTokens) out.push_back(' ');
    out += vocab_[static_cast<std::size_t>(id)];
  }
  if (!out.empty() && out.front() == ' ') out.erase(0, 1);
  return out;
}

void Tokenizer::save(const std::string& path) const {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  // A name unique to this process and thread: ranks sharing a run folder may save at once.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) LC_INPUT_ERROR(tmp, ": cannot write: ", std::strerror(errno));
    out << kFormat << "\nfingerprint " << hex16(source_hash_) << "\nlowercase " << (lowercase_ ? 1 : 0)
        << "\nmerges " << merges_.size() << "\nchecksum " << hex16(merges_checksum(merges_)) << "\n";
    for (std::size_t r = 0; r < merges_.size(); ++r)
      out << merges_[r].first << ' ' << merges_[r].second << ' '
          << escape(vocab_[static_cast<std::size_t>(kFirstMergeToken) + r]) << '\n';
    out.flush();
    if (!out) LC_INPUT_ERROR(tmp, ": write error: ", std::strerror(errno));
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    LC_INPUT_ERROR(path, ": cannot write: ", ec.message());
  }
}

Tokenizer Tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) LC_INPUT_ERROR(path, ": cannot open tokenizer file: ", std::strerror(errno));
  std::string line;
  int line_no = 0;
  auto next = [&](const char* what) {
    ++line_no;
    if (!std::getline(in, line)) LC_INPUT_ERROR(path, ":", line_no, ": file ends where ", what, " was expected");
  };
  auto fail = [&](const auto&... what) {
    LC_INPUT_ERROR(path, ":", line_no, ": expected ", what..., " (a tokenizer file written by Tokenizer::save), got '",
                   line.substr(0, 60), "'");
  };

  next("the header");
  if (line != kFormat) fail("the header '", kFormat, "'");
  next("the fingerprint");
  unsigned long long hash = 0;
  char tail = 0;
  if (std::sscanf(line.c_str(), "fingerprint %16llx%c", &hash, &tail) != 1) fail("'fingerprint' and 16 hex digits");
  next("the lowercase option");
  int lowercase = -1;
  if (std::sscanf(line.c_str(), "lowercase %d%c", &lowercase, &tail) != 1 || (lowercase != 0 && lowercase != 1))
    fail("'lowercase' and 0 or 1");
  next("the merge count");
  long long count = -1;
  if (std::sscanf(line.c_str(), "merges %lld%c", &count, &tail) != 1 || count < 0 ||
      count > std::numeric_limits<std::int32_t>::max() - kFirstMergeToken)
    fail("'merges' and a count");
  next("the checksum");
  unsigned long long checksum = 0;
  if (std::sscanf(line.c_str(), "checksum %16llx%c", &checksum, &tail) != 1) fail("'checksum' and 16 hex digits");
  const int checksum_line = line_no;

  Tokenizer tok(hash, lowercase == 1);
  for (long long r = 0; r < count; ++r) {
    next("a merge");
    std::istringstream fields(line);
    long long left = -1, right = -1;
    std::string token, extra;
    if (!(fields >> left >> right >> token) || (fields >> extra)) fail("a merge 'LEFT RIGHT TOKEN'");
    const std::int32_t n = tok.vocab_size();
    if (left < kFirstByteToken || left >= n || right < kFirstByteToken || right >= n)
      fail("ids in ", kFirstByteToken, "..", n - 1, " (byte tokens or earlier merges)");
    if (tok.merged_id_.contains(pair_key(static_cast<std::int32_t>(left), static_cast<std::int32_t>(right))))
      fail("a pair not merged before");
    if (escape(tok.vocab_[left] + tok.vocab_[right]) != token)
      fail("TOKEN to be the concatenation of tokens ", left, " and ", right, ", '",
           escape(tok.vocab_[left] + tok.vocab_[right]), "'");
    tok.add_merge(static_cast<std::int32_t>(left), static_cast<std::int32_t>(right));
  }
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty()) fail("the end of the file after ", count, " merges");
  }
  if (merges_checksum(tok.merges_) != checksum)
    LC_INPUT_ERROR(path, ":", checksum_line, ": expected the ", count, " merges to have checksum ", hex16(checksum),
                   ", they have ", hex16(merges_checksum(tok.merges_)), " (the file was cut short or edited)");
  return tok;
}

std::string Tokenizer::cache_path(const std::string& dir, std::span<const std::string> documents,
                                  const TokenizerOptions& options) {
  return (fs::path(dir) / ("tokenizer-" + std::to_string(options.vocab_size) + "-" + hex16(fingerprint(documents, options)) +
                           ".txt")).string();
}

Tokenizer Tokenizer::load_or_train(const std::string& cache_path, std::span<const std::string> documents,
                                   const TokenizerOptions& options, std::string* note) {
  std::error_code ec;
  if (fs::exists(cache_path, ec)) {
    constexpr const char* kHint = "; delete it to train the tokenizer again";
    Tokenizer cached = [&] {
      try {
        return load(cache_path);
      } catch (const InputError& e) {
        throw InputError(std::string("tokenizer cache ") + e.what() + kHint);
      }
    }();
    const std::uint64_t want = fingerprint(documents, options);
    if (cached.source_hash() != want)
      LC_INPUT_ERROR(cache_path, ": tokenizer cache with fingerprint ", hex16(cached.source_hash()), ", expected ",
                     hex16(want), " (that of this corpus and options, as its name says)", kHint);
    if (note) *note = "tokenizer loaded from " + cache_path;
    return cached;
  }
  Tokenizer tok = train(documents, options);
  tok.save(cache_path);
  if (note) *note = "tokenizer trained and saved to " + cache_path;
  return tok;
}

}  // namespace laconic
