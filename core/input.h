// Reading the files the user gives with bounded memory.
//
// A path from a recipe, a flag or a run directory may name anything: a directory, a FIFO (whose
// open blocks until a writer comes, and whose data may never end), /dev/zero, or a file far larger
// than its kind ever is. Every file Laconic reads from the user is opened through InputFile: a
// regular file of at most a limit its reader chooses, else an InputError naming the path, what
// was expected and the limit. Names read from files (tensors, JSON keys) are printed through
// printable() (check.h), so that a name holding a newline cannot turn a one-line error into two.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace laconic {

class InputFile {
 public:
  // Opens `path`, which must be a regular file of at most `max_bytes` bytes; `what` names the
  // kind of file in errors ("recipe", "safetensors file"):
  //   PATH: cannot open recipe: No such file or directory
  //   PATH: a FIFO, expected a regular file (recipe)
  //   PATH: 52428800 bytes, more than the limit of 1000000 (1.00 MB) for a recipe
  // The open never blocks.
  InputFile(std::string path, std::uint64_t max_bytes, std::string_view what);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  std::uint64_t size() const { return size_; }  // at the open
  int fd() const { return fd_; }

  // Exactly n bytes at `offset`; fewer (the file shrank since the open) is an InputError.
  void read_at(std::uint64_t offset, void* out, std::size_t n) const;
  // The whole file: size() bytes.
  std::string read_all() const;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

// The whole of `path`, checked as InputFile checks it.
std::string read_input_file(const std::string& path, std::uint64_t max_bytes, std::string_view what);

// This machine's physical memory: no input that must be held whole may be larger.
std::uint64_t physical_memory_bytes();

// The most resident memory this process has held so far (getrusage's ru_maxrss), in bytes.
std::uint64_t peak_rss_bytes();

}  // namespace laconic
