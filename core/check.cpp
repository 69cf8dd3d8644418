#include "core/check.h"

#include <cstring>

namespace laconic {

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  for (const char c : s.substr(0, max)) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (b >= 0x20 && b < 0x7f) out += c;
    else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
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
