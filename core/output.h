// Writing a file whole: a temporary name, fsync, rename, so that a crash never leaves a
// half-written summary, checkpoint manifest or weights file behind.
#pragma once

#include <string>

namespace laconic {

// Writes `content` to `path` atomically. Throws Error naming the path on failure.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace laconic
