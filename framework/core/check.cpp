#include "framework/core/check.h"

#include <cstring>

namespace laconic::detail {

void throw_check(const char* file, int line, const char* cond, const std::string& msg) {
  const char* base = std::strrchr(file, '/');
  std::string text = concat(base ? base + 1 : file, ":", line, ": check `", cond, "` failed");
  if (!msg.empty()) text += ": " + msg;
  throw Error(text);
}

}  // namespace laconic::detail
