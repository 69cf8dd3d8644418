// Text helpers of the recipe code: TOML strings on one line, floats in their shortest round-trip
// form, lists joined, and "did you mean" suggestions.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/check.h"

namespace laconic::recipe_detail {

// A TOML basic string on one line: used both in to_toml() and in messages, which must stay one line.
// With quotes = false, only control characters are escaped (for names echoed in messages).
std::string escape(std::string_view s, bool quotes = true);
std::string quote(std::string_view s);
// A name the user wrote (a quoted TOML key may hold a newline), safe to echo in a one-line message.
std::string one_line(std::string_view s);

// Shortest text that reads back to the same value (std::to_chars guarantees the round trip), always
// spelled as a TOML float so that printing 2.0 does not turn a float key into an integer one.
template <std::floating_point T>
std::string format_float(T v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  LC_CHECK(res.ec == std::errc(), "to_chars failed");
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

template <typename Range, typename Fn>
std::string join(const Range& items, std::string_view sep, Fn&& fn) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += fn(item);
  }
  return out;
}

// The candidate nearest to `word`, if it is near enough to be a plausible typo.
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace laconic::recipe_detail
