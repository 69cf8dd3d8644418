#include "core/input.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "core/units.h"

namespace laconic {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a file of another kind";
}

}  // namespace

InputFile::InputFile(std::string path, std::uint64_t max_bytes, std::string_view what) : path_(std::move(path)) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (on a regular file
  // it changes nothing). The type is checked on the open descriptor, so the file cannot be
  // swapped between the check and the reads.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) LC_INPUT_ERROR(path_, ": cannot open ", what, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string kind = kind_of(st.st_mode);
    ::close(fd_);
    LC_INPUT_ERROR(path_, ": ", kind, ", expected a regular file (", what, ")");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > max_bytes) {
    ::close(fd_);
    LC_INPUT_ERROR(path_, ": ", size_, " bytes, more than the limit of ", max_bytes, " (",
                   format_bytes(static_cast<double>(max_bytes)), ") for a ", what);
  }
}

InputFile::~InputFile() { ::close(fd_); }

void InputFile::read_at(std::uint64_t offset, void* out, std::size_t n) const {
  auto* p = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) LC_INPUT_ERROR(path_, ": read error: ", std::strerror(errno));
    if (got == 0)
      LC_INPUT_ERROR(path_, ": changed while being read: it ends at byte ", offset + done, ", it had ",
                     size_, " when opened");
    done += static_cast<std::size_t>(got);
  }
}

std::string InputFile::read_all() const {
  std::string text(size_, '\0');
  read_at(0, text.data(), text.size());
  return text;
}

std::string read_input_file(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
  return InputFile(path, max_bytes, what).read_all();
}

std::uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  LC_CHECK(pages > 0 && page > 0, "sysconf(_SC_PHYS_PAGES) failed");
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

std::uint64_t peak_rss_bytes() {
  rusage u{};
  LC_CHECK(::getrusage(RUSAGE_SELF, &u) == 0, "getrusage failed");
  return static_cast<std::uint64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace laconic
