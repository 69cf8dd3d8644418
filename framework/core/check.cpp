#include "framework/core/check.h"

#include <cstring>

namespace laconic {

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace laconic

namespace laconic::detail {

void throw_check(const char* file, int line, const char* cond, const std::string& msg) {
  const char* base = std::strrchr(file, '/');
  std::string text = concat(base ? base + 1 : file, ":", line, ": check `", cond, "` failed");
  if (!msg.empty()) text += ": " + msg;
  throw Error(text);
}

}  // namespace laconic::detail
