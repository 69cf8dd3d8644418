#include "workloads/data/fashion_mnist.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <utility>

#include "core/check.h"
#include "core/input.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

constexpr const char* kInstallHint =
    "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or set [data] path";

// The idx file and the data it declares: Fashion-MNIST's training images are 47 million bytes (and
// 26 MB gzipped); 250 million bytes of pixels become 1 GB of floats.
constexpr std::uint64_t kMaxIdxFileBytes = 1'000'000'000;
constexpr std::int64_t kMaxIdxBytes = 250'000'000;

// Big reads keep zlib's per-call overhead negligible: 70000 images inflate in ~0.3 s.
constexpr std::size_t kChunkBytes = std::size_t{1} << 20;
// A header is untrusted until the data behind it has been read, so never reserve more than this
// up front; a lying header then fails as "truncated" instead of as an enormous allocation.
constexpr std::size_t kMaxReserve = std::size_t{1} << 26;

// `name.gz` as Debian ships it, else the uncompressed `name`; the error names the .gz we wanted.
std::string locate(const fs::path& dir, const std::string& name) {
  const fs::path gz = dir / (name + ".gz");
  if (fs::is_regular_file(gz)) return gz.string();
  const fs::path raw = dir / name;
  if (fs::is_regular_file(raw)) return raw.string();
  if (!fs::is_directory(dir)) LC_INPUT_ERROR(dir.string(), ": no such directory; ", kInstallHint);
  LC_INPUT_ERROR(gz.string(), ": no such file; ", kInstallHint);
}

// One idx file (http://yann.lecun.com/exdb/mnist/, "file formats"): a big-endian magic
// 0x0000 08 NDIMS (0x08 = unsigned bytes), NDIMS big-endian uint32 sizes, then the bytes.
// gzread also reads uncompressed files as they are, so one reader serves both forms.
class IdxFile {
 public:
  explicit IdxFile(std::string path)
      : path_(std::move(path)), file_(path_, kMaxIdxFileBytes, "idx file"), f_(gzdopen(::dup(file_.fd()), "rb")) {
    if (f_ == nullptr) LC_INPUT_ERROR(path_, ": cannot open: ", std::strerror(errno));
    gzbuffer(f_, 1u << 18);
  }
  ~IdxFile() { gzclose(f_); }
  IdxFile(const IdxFile&) = delete;
  IdxFile& operator=(const IdxFile&) = delete;

  const std::string& path() const { return path_; }

  // Reads and checks the header; returns the `ndims` sizes.
  std::array<std::int64_t, 3> header(int ndims, const char* kind) {
    std::array<unsigned char, 4> word{};
    read_exact(word, "header");
    const std::uint32_t magic = be32(word);
    const std::uint32_t expected = 0x0800u | static_cast<std::uint32_t>(ndims);
    if (magic != expected) {
      char got[16], want[16];
      std::snprintf(got, sizeof got, "0x%08x", magic);
      std::snprintf(want, sizeof want, "0x%08x", expected);
      LC_INPUT_ERROR(path_, ": bad magic number ", got, " (expected ", want, ", an idx", ndims,
                     "-ubyte ", kind, " file)");
    }
    std::array<std::int64_t, 3> dims{};
    for (int d = 0; d < ndims; ++d) {
      read_exact(word, "header");
      dims[d] = be32(word);
    }
    return dims;
  }

  // Checks, before any data is read, that the header's `bytes` of data are plausible: at most
  // kMaxIdxBytes, and no more than the file can hold (raw: its size after the header; gzip:
  // deflate's best ratio, 1032:1, times its size). Trailing bytes are found by payload().
  void check_declared(std::int64_t bytes, std::int64_t header_bytes) const {
    if (bytes > kMaxIdxBytes)
      LC_INPUT_ERROR(path_, ": the header declares ", bytes, " bytes of data, more than the limit of ", kMaxIdxBytes,
                     " (", kMaxIdxBytes / 784, " images of 28x28)");
    const auto size = static_cast<std::int64_t>(file_.size());
    if (gzdirect(f_) == 1 && bytes > size - header_bytes)
      LC_INPUT_ERROR(path_, ": truncated: the header declares ", bytes, " bytes of data but the file holds ",
                     size - header_bytes);
    if (gzdirect(f_) == 0 && bytes > 1032 * size)
      LC_INPUT_ERROR(path_, ": the header declares ", bytes, " bytes of data, more than a gzip file of ", size,
                     " bytes can hold (deflate compresses at most 1032:1)");
  }

  // Streams exactly `bytes` bytes of data to sink(std::span<const unsigned char>), then checks
  // that the file ends there (reading to the end is also what makes zlib verify the CRC).
  template <typename Sink>
  void payload(std::int64_t bytes, Sink&& sink) {
    chunk_.resize(kChunkBytes);
    std::int64_t done = 0;
    while (done < bytes) {
      const auto want = static_cast<std::size_t>(std::min<std::int64_t>(bytes - done, kChunkBytes));
      const std::size_t got = read(chunk_.data(), want);
      if (got == 0)
        LC_INPUT_ERROR(path_, ": truncated: the header declares ", bytes, " bytes of data but the file holds ",
                       done);
      sink(std::span<const unsigned char>(chunk_.data(), got));
      done += static_cast<std::int64_t>(got);
    }
    unsigned char extra;
    if (read(&extra, 1) != 0)
      LC_INPUT_ERROR(path_, ": trailing bytes after the ", bytes, " bytes of data its header declares");
  }

 private:
  static std::uint32_t be32(const std::array<unsigned char, 4>& b) {
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
  }

  void read_exact(std::array<unsigned char, 4>& out, const char* what) {
    if (read(out.data(), out.size()) != out.size()) LC_INPUT_ERROR(path_, ": truncated ", what);
  }

  // Up to n bytes (n < 2^31); 0 at the end of the data. A gzip stream cut short reads as a
  // short file (zlib's Z_BUF_ERROR), so it is reported as truncated by the caller.
  std::size_t read(void* buf, std::size_t n) {
    std::size_t total = 0;
    auto* p = static_cast<unsigned char*>(buf);
    while (total < n) {
      const int got = gzread(f_, p + total, static_cast<unsigned>(n - total));
      int err = Z_OK;
      const char* msg = gzerror(f_, &err);
      if (err == Z_ERRNO) LC_INPUT_ERROR(path_, ": read error: ", std::strerror(errno));
      if (err != Z_OK && err != Z_BUF_ERROR) LC_INPUT_ERROR(path_, ": corrupt gzip data (zlib: ", msg, ")");
      if (got <= 0) break;
      total += static_cast<std::size_t>(got);
    }
    return total;
  }

  std::string path_;
  InputFile file_;  // the regular file behind f_, which reads a duplicate of its descriptor
  gzFile f_;
  std::vector<unsigned char> chunk_;
};

}  // namespace

ImageDataset load_fashion_mnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  IdxFile images(locate(dir, prefix + "-images-idx3-ubyte"));
  IdxFile labels(locate(dir, prefix + "-labels-idx1-ubyte"));

  const auto [n, rows, cols] = images.header(3, "image");
  const std::int64_t n_labels = labels.header(1, "label")[0];
  // 32767 keeps rows * cols (features per example) inside an int.
  if (rows <= 0 || cols <= 0 || rows > 32767 || cols > 32767)
    LC_INPUT_ERROR(images.path(), ": implausible image size ", rows, "x", cols);
  if (n != n_labels)
    LC_INPUT_ERROR(labels.path(), ": ", n_labels, " labels but ", images.path(), " has ", n, " images");

  ImageDataset d;
  d.rows = static_cast<int>(rows);
  d.cols = static_cast<int>(cols);

  // Normalise through a 256-entry table: one lookup per pixel instead of a divide.
  std::array<float, 256> lut{};
  for (int v = 0; v < 256; ++v) lut[v] = (static_cast<float>(v) / 255.0f - kFashionMnistMean) / kFashionMnistStd;
  const std::int64_t pixels = n * rows * cols;
  images.check_declared(pixels, 16);
  labels.check_declared(n, 8);
  d.images.reserve(static_cast<std::size_t>(std::min<std::int64_t>(pixels, kMaxReserve)));
  images.payload(pixels, [&](std::span<const unsigned char> bytes) {
    for (unsigned char b : bytes) d.images.push_back(lut[b]);
  });

  d.labels.reserve(static_cast<std::size_t>(std::min<std::int64_t>(n, kMaxReserve)));
  labels.payload(n, [&](std::span<const unsigned char> bytes) {
    for (unsigned char b : bytes) {
      if (b >= d.classes)
        LC_INPUT_ERROR(labels.path(), ": label ", int{b}, " at index ", d.labels.size(), " is outside 0..",
                       d.classes - 1);
      d.labels.push_back(b);
    }
  });
  return d;
}

}  // namespace laconic
