#include "framework/train/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/check.h"
#include "core/input.h"

namespace laconic {

std::string read_text(const std::string& path) { return read_input_file(path, kMaxRunFileBytes, "run file"); }

void make_directories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) LC_INPUT_ERROR(path, ": cannot create run directory: ", ec.message());
}

void check_writable_directory(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path at = fs::absolute(path, ec);
  if (ec) LC_INPUT_ERROR(path, ": cannot create ", what, ": ", ec.message());
  while (!fs::exists(at, ec) && at.has_relative_path()) at = at.parent_path();
  if (!fs::is_directory(at, ec))
    LC_INPUT_ERROR(path, ": cannot create ", what, ": ", std::strerror(ENOTDIR), " (", at.string(), " is not a directory)");
  const fs::path probe = at / (".laconic-probe-" + std::to_string(::getpid()));
  if (::mkdir(probe.c_str(), 0700) != 0)
    LC_INPUT_ERROR(path, ": cannot create ", what, ": ", std::strerror(errno), " (in ", at.string(), ")");
  ::rmdir(probe.c_str());
}

JsonlWriter::JsonlWriter(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
}

JsonlWriter::~JsonlWriter() {
  if (file_) std::fclose(file_);
}

void JsonlWriter::write_line(const std::string& line) {
  if (!file_) return;
  if (std::fputs(line.c_str(), file_) < 0 || std::fputc('\n', file_) < 0 || std::fflush(file_) != 0)
    throw Error(path_ + ": write failed: " + std::strerror(errno));
}

}  // namespace laconic
