// The run directory: recipe.resolved.toml, metrics.jsonl, summary.json. Whole files are written
// atomically (core/output.h), so a crash never leaves a half-written summary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/output.h"  // write_file_atomic

namespace laconic {

// summary.json, a trace's meta.json, recipe.resolved.toml: a few KB each.
inline constexpr std::uint64_t kMaxRunFileBytes = 16'000'000;

// The whole file as text: a regular file of at most kMaxRunFileBytes. Throws InputError naming
// the path if it cannot be read.
std::string read_text(const std::string& path);

// Creates the directory (and parents). Throws InputError naming it if that fails.
void make_directories(const std::string& path);

// Whether `path` can be created (with its parents) and written in, found without leaving anything
// behind: its nearest existing ancestor must be a directory in which a directory can be made (a
// probe, removed at once; /proc or a read-only mount fail here, not at the first write). Throws
// InputError "PATH: cannot create WHAT: why" otherwise.
void check_writable_directory(const std::string& path, const std::string& what);

// Appends one line per record and flushes it, so `tail -f metrics.jsonl` follows a live run.
class JsonlWriter {
 public:
  JsonlWriter() = default;
  explicit JsonlWriter(const std::string& path, bool append = false);  // truncates unless append
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  ~JsonlWriter();
  void write_line(const std::string& line);
  bool open() const { return file_ != nullptr; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace laconic
