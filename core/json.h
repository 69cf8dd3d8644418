// JSON from files the user gives (a safetensors header, a run's summary.json and metrics.jsonl,
// a trace's meta.json), parsed with its nesting bounded.
//
// nlohmann's parser keeps its own stack, but dump() and comparisons recurse: a header nesting
// 10^6 arrays parses, then overflows the stack when printed. parse_json refuses nesting deeper
// than kMaxJsonDepth while parsing, so nothing later meets an unbounded depth. Error messages
// never echo the document: they name the key and the JSON type found (j.type_name()).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace laconic {

// Deeper than any file Laconic reads (safetensors: 3 levels; summaries: 2).
inline constexpr int kMaxJsonDepth = 64;

// The document in `text`; a syntax error or nesting deeper than kMaxJsonDepth is a one-line
// InputError that begins with `where`.
nlohmann::json parse_json(std::string_view text, const std::string& where);

}  // namespace laconic
