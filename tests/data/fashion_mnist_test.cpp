#include "workloads/data/fashion_mnist.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

void put_be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
}

Bytes idx_images(std::uint32_t n, std::uint32_t rows, std::uint32_t cols, const Bytes& pixels,
                 std::uint32_t magic = 0x803) {
  Bytes b;
  put_be32(b, magic);
  put_be32(b, n);
  put_be32(b, rows);
  put_be32(b, cols);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}

Bytes idx_labels(std::uint32_t n, const Bytes& labels) {
  Bytes b;
  put_be32(b, 0x801);
  put_be32(b, n);
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

Bytes gzip(const Bytes& raw) {
  uLongf size = compressBound(raw.size()) + 64;
  Bytes out(size);
  z_stream z{};
  // windowBits 15 + 16: a gzip wrapper (header and CRC-32 trailer), as the shipped files have.
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = const_cast<unsigned char*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void write_file(const fs::path& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// 3 images of 2x3 whose pixels span 0..255, labels covering both ends of 0..9.
const Bytes kPixels = {0, 1, 2, 127, 128, 255, 10, 20, 30, 40, 50, 60, 255, 254, 253, 0, 0, 7};
const Bytes kLabels = {0, 9, 4};

class FashionMnistFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("laconic_data_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path images_gz() const { return dir_ / "train-images-idx3-ubyte.gz"; }
  fs::path labels_gz() const { return dir_ / "train-labels-idx1-ubyte.gz"; }
  void write_valid() {
    write_file(images_gz(), gzip(idx_images(3, 2, 3, kPixels)));
    write_file(labels_gz(), gzip(idx_labels(3, kLabels)));
  }

  // Loading the train split must throw an InputError: one line that names `file` and says `what`.
  void expect_error(const fs::path& file, const std::string& what) {
    try {
      load_fashion_mnist(dir_.string(), Split::train);
      ADD_FAILURE() << "no InputError; expected one naming " << file << " and saying '" << what << "'";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
      EXPECT_NE(msg.find(what), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }

  fs::path dir_;
};

float normalised(unsigned char p) { return (p / 255.0f - 0.2860f) / 0.3530f; }

TEST_F(FashionMnistFiles, ParsesGzipAndNormalises) {
  write_valid();
  const ImageDataset d = load_fashion_mnist(dir_.string(), Split::train);
  EXPECT_EQ(d.rows, 2);
  EXPECT_EQ(d.cols, 3);
  EXPECT_EQ(d.features(), 6);
  EXPECT_EQ(d.classes, 10);
  ASSERT_EQ(d.size(), 3);
  ASSERT_EQ(d.images.size(), kPixels.size());
  for (std::size_t i = 0; i < kPixels.size(); ++i) EXPECT_NEAR(d.images[i], normalised(kPixels[i]), 1e-6f) << i;
  EXPECT_NEAR(d.images[0], -0.2860f / 0.3530f, 1e-6f);         // black
  EXPECT_NEAR(d.images[5], (1.0f - 0.2860f) / 0.3530f, 1e-6f);  // white
  EXPECT_EQ(d.labels, (std::vector<std::int32_t>{0, 9, 4}));
}

TEST_F(FashionMnistFiles, ReadsUncompressedTestSplit) {
  write_file(dir_ / "t10k-images-idx3-ubyte", idx_images(3, 3, 2, kPixels));
  write_file(dir_ / "t10k-labels-idx1-ubyte", idx_labels(3, kLabels));
  const ImageDataset d = load_fashion_mnist(dir_.string(), Split::test);
  EXPECT_EQ(d.rows, 3);
  EXPECT_EQ(d.cols, 2);
  ASSERT_EQ(d.size(), 3);
  EXPECT_NEAR(d.images[17], normalised(7), 1e-6f);
  EXPECT_EQ(d.labels[1], 9);
  // The train split is absent from this directory.
  EXPECT_THROW(load_fashion_mnist(dir_.string(), Split::train), InputError);
}

TEST_F(FashionMnistFiles, MissingDirectory) {
  const fs::path missing = dir_ / "nowhere";
  try {
    load_fashion_mnist(missing.string(), Split::train);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(missing.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("apt-get install dataset-fashion-mnist"), std::string::npos) << msg;
  }
}

TEST_F(FashionMnistFiles, MissingFile) {
  write_file(images_gz(), gzip(idx_images(3, 2, 3, kPixels)));
  expect_error(labels_gz(), "no such file; install Debian's dataset-fashion-mnist");
}

TEST_F(FashionMnistFiles, BadMagic) {
  write_file(images_gz(), gzip(idx_images(3, 2, 3, kPixels, 0x801)));
  write_file(labels_gz(), gzip(idx_labels(3, kLabels)));
  expect_error(images_gz(), "bad magic number 0x00000801 (expected 0x00000803");
}

TEST_F(FashionMnistFiles, LabelsFileInPlaceOfImages) {
  write_file(images_gz(), gzip(idx_labels(3, kLabels)));
  write_file(labels_gz(), gzip(idx_labels(3, kLabels)));
  expect_error(images_gz(), "bad magic number");
}

TEST_F(FashionMnistFiles, MismatchedCounts) {
  write_file(images_gz(), gzip(idx_images(3, 2, 3, kPixels)));
  write_file(labels_gz(), gzip(idx_labels(2, {0, 1})));
  expect_error(labels_gz(), "2 labels but");
  expect_error(images_gz(), "has 3 images");
}

TEST_F(FashionMnistFiles, TruncatedData) {
  const Bytes short_pixels(kPixels.begin(), kPixels.end() - 4);
  write_file(images_gz(), gzip(idx_images(3, 2, 3, short_pixels)));
  write_file(labels_gz(), gzip(idx_labels(3, kLabels)));
  expect_error(images_gz(), "truncated: the header declares 18 bytes of data but the file holds 14");
}

TEST_F(FashionMnistFiles, TruncatedHeader) {
  const Bytes full = idx_images(3, 2, 3, kPixels);
  write_file(images_gz(), gzip(Bytes(full.begin(), full.begin() + 6)));
  write_file(labels_gz(), gzip(idx_labels(3, kLabels)));
  expect_error(images_gz(), "truncated header");
}

TEST_F(FashionMnistFiles, TruncatedGzipStream) {
  write_valid();
  // A large incompressible-ish payload so that cutting the .gz loses data, not just the trailer.
  Bytes pixels(3 * 64 * 64);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  const Bytes gz = gzip(idx_images(3, 64, 64, pixels));
  write_file(images_gz(), Bytes(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(gz.size() / 2)));
  expect_error(images_gz(), "truncated");
}

TEST_F(FashionMnistFiles, TrailingBytes) {
  Bytes labels = idx_labels(3, kLabels);
  labels.push_back(1);
  write_file(images_gz(), gzip(idx_images(3, 2, 3, kPixels)));
  write_file(labels_gz(), gzip(labels));
  expect_error(labels_gz(), "trailing bytes");
}

// Headers are checked against a limit and against what the file can hold before any data is
// read: an honest 2 million images took 6 GB as floats; a lying header, as much as it claimed.
TEST_F(FashionMnistFiles, DeclaredSizesAreBoundedBeforeReading) {
  write_file(images_gz(), gzip(idx_images(2000000, 28, 28, {})));
  write_file(labels_gz(), gzip(idx_labels(2000000, {})));
  expect_error(images_gz(), "the header declares 1568000000 bytes of data, more than the limit of 250000000 (318877 images of 28x28)");
  // Under the limit, but more than deflate (1032:1 at best) can pack into so small a file.
  write_file(images_gz(), gzip(idx_images(100000, 28, 28, kPixels)));
  write_file(labels_gz(), gzip(idx_labels(100000, kLabels)));
  expect_error(images_gz(), "the header declares 78400000 bytes of data, more than a gzip file of");
  // An uncompressed file holds exactly what it declares.
  fs::remove(images_gz());
  fs::remove(labels_gz());
  write_file(dir_ / "train-images-idx3-ubyte", idx_images(100000, 28, 28, kPixels));
  write_file(dir_ / "train-labels-idx1-ubyte", idx_labels(100000, kLabels));
  expect_error(dir_ / "train-images-idx3-ubyte", "truncated: the header declares 78400000 bytes of data but the file holds 18");
}

TEST_F(FashionMnistFiles, LabelOutOfRange) {
  write_file(images_gz(), gzip(idx_images(3, 2, 3, kPixels)));
  write_file(labels_gz(), gzip(idx_labels(3, {0, 1, 10})));
  expect_error(labels_gz(), "label 10 at index 2 is outside 0..9");
}

TEST_F(FashionMnistFiles, CorruptGzipChecksum) {
  write_valid();
  Bytes gz = gzip(idx_images(3, 2, 3, kPixels));
  gz[gz.size() - 8] ^= 0x5a;  // the CRC-32 of the trailer: the data inflate fine but fail the check
  write_file(images_gz(), gz);
  expect_error(images_gz(), "corrupt gzip data");
}

TEST_F(FashionMnistFiles, CorruptDeflateData) {
  write_valid();
  Bytes gz = gzip(idx_images(3, 2, 3, kPixels));
  for (std::size_t i = 10; i < gz.size() - 8; ++i) gz[i] = 0xff;  // the deflate blocks, header and trailer kept
  write_file(images_gz(), gz);
  expect_error(images_gz(), "corrupt gzip data");
}

// The real dataset, when Debian's dataset-fashion-mnist is installed.
class FashionMnistReal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kFashionMnistDir)) GTEST_SKIP() << kFashionMnistDir << " absent (apt-get install dataset-fashion-mnist)";
  }
};

void expect_balanced(const ImageDataset& d, std::int64_t n) {
  EXPECT_EQ(d.rows, 28);
  EXPECT_EQ(d.cols, 28);
  ASSERT_EQ(d.size(), n);
  ASSERT_EQ(static_cast<std::int64_t>(d.images.size()), n * 784);
  std::vector<std::int64_t> per_class(10, 0);
  for (std::int32_t l : d.labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, 10);
    ++per_class[static_cast<std::size_t>(l)];
  }
  // Fashion-MNIST is exactly balanced (Xiao et al. 2017, table 1).
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[static_cast<std::size_t>(c)], n / 10) << "class " << c;
}

TEST_F(FashionMnistReal, TrainStatistics) {
  const ImageDataset d = load_fashion_mnist(kFashionMnistDir, Split::train);
  expect_balanced(d, 60000);
  double sum = 0, sq = 0;
  for (float x : d.images) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double mean = sum / static_cast<double>(d.images.size());
  const double sd = std::sqrt(sq / static_cast<double>(d.images.size()) - mean * mean);
  // Back in [0, 1] pixel units these are the dataset's own statistics, which the constants round.
  std::printf("train pixels in [0,1]: mean %.5f std %.5f\n", kFashionMnistMean + mean * kFashionMnistStd,
              sd * kFashionMnistStd);
  EXPECT_NEAR(mean, 0.0, 2e-3);
  EXPECT_NEAR(sd, 1.0, 2e-3);
}

TEST_F(FashionMnistReal, TestSplit) { expect_balanced(load_fashion_mnist(kFashionMnistDir, Split::test), 10000); }

}  // namespace
}  // namespace laconic
