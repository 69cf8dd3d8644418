#include "framework/recipe/recipe_text.h"

#include <algorithm>
#include <cstdio>

namespace laconic::recipe_detail {
namespace {

// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string escape(std::string_view s, bool quotes) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '"': out += quotes ? "\\\"" : "\""; break;
      case '\\': out += quotes ? "\\\\" : "\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}
// Appended rather than "\"" + escape(s) + "\"", which GCC 12 flags with a false -Wrestrict
// (GCC bug 105329) once this is a function of its own.
std::string quote(std::string_view s) {
  std::string out(1, '"');
  out += escape(s);
  out += '"';
  return out;
}
std::string one_line(std::string_view s) { return escape(s, false); }

std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c);
    if (d < best_distance && d < std::max(word.size(), c.size())) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace laconic::recipe_detail
