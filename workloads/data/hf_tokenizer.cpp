#include "workloads/data/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/check.h"

namespace laconic {
namespace {

// GPT-2's bytes_to_unicode (openai/gpt-2, src/encoder.py): the printable Latin-1 bytes
// ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves, every other byte b for the code point
// 256 + (its rank among those others), so that every token is printable text without spaces.
std::string byte_char(unsigned char b) {
  const auto printable = [](int c) { return (c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff); };
  int code = b;
  if (!printable(b)) {
    code = 256;
    for (int c = 0; c < b; ++c) code += printable(c) ? 0 : 1;
  }
  std::string utf8;  // code < 0x800: one or two bytes
  if (code < 0x80) {
    utf8.push_back(static_cast<char>(code));
  } else {
    utf8.push_back(static_cast<char>(0xc0 | (code >> 6)));
    utf8.push_back(static_cast<char>(0x80 | (code & 0x3f)));
  }
  return utf8;
}

std::string byte_level(const std::string& bytes) {
  std::string out;
  for (const char c : bytes) out += byte_char(static_cast<unsigned char>(c));
  return out;
}

}  // namespace

std::string hf_tokenizer_json(const Tokenizer& tok) {
  using Json = nlohmann::ordered_json;
  Json added = Json::array();
  Json vocab = Json::object();
  for (std::int32_t id = 0; id < kNumSpecialTokens; ++id) {
    added.push_back({{"id", id}, {"content", tok.token(id)}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
    vocab[tok.token(id)] = id;
  }
  for (std::int32_t id = kFirstByteToken; id < tok.vocab_size(); ++id) {
    const std::string s = byte_level(tok.token(id));
    if (vocab.contains(s))
      LC_INPUT_ERROR("tokenizer.json: tokens ", vocab[s].get<int>(), " and ", id,
                     " are the same bytes, which a Hugging Face vocabulary cannot hold");
    vocab[s] = id;
  }
  Json merges = Json::array();
  for (const auto& [left, right] : tok.merges()) merges.push_back(byte_level(tok.token(left)) + " " + byte_level(tok.token(right)));

  const Json split = {{"type", "Split"}, {"invert", false}};
  Json whitespace = split, punctuation = split;
  whitespace["pattern"] = {{"Regex", "[\\x09-\\x0d\\x20]+"}};
  whitespace["behavior"] = "Removed";
  // What is left after whitespace: words (ASCII letters and digits, and every non-ASCII
  // character) and single ASCII bytes of any other kind.
  punctuation["pattern"] = {{"Regex", "[\\x00-\\x2f\\x3a-\\x40\\x5b-\\x60\\x7b-\\x7f]"}};
  punctuation["behavior"] = "Isolated";
  const Json byte_level_step = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", false}};

  Json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = std::move(added);
  j["normalizer"] = tok.lowercase() ? Json{{"type", "Lowercase"}} : Json(nullptr);
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {whitespace, punctuation, byte_level_step}}};
  j["post_processor"] = nullptr;
  j["decoder"] = byte_level_step;
  j["model"] = {{"type", "BPE"},          {"dropout", nullptr},      {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},      {"byte_fallback", false},  {"ignore_merges", false},
                {"vocab", std::move(vocab)}, {"merges", std::move(merges)}};
  return j.dump(1);
}

}  // namespace laconic
