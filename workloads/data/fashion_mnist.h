// Fashion-MNIST (Xiao, Rasul & Vollgraf 2017) from its idx files: 28x28 grey images of ten kinds
// of clothing, 60000 for training and 10000 for testing. The files are read as shipped by
// Debian's dataset-fashion-mnist (gzip-compressed) or uncompressed under the same names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace laconic {

// Images already normalised, labels as class ids; what the model and the batch gatherer read.
struct ImageDataset {
  int rows = 0;
  int cols = 0;
  int classes = 10;
  std::vector<float> images;          // size() * rows * cols, row-major, normalised
  std::vector<std::int32_t> labels;   // size(), each in [0, classes)

  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
  int features() const { return rows * cols; }
};

enum class Split { train, test };

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Per-pixel statistics of the 60000 training images after scaling to [0, 1] (the test
// FashionMnistReal.TrainStatistics recomputes them from the data). Test images use the same
// constants so that both splits see the same input transform.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// Reads {train,t10k}-images-idx3-ubyte[.gz] and {train,t10k}-labels-idx1-ubyte[.gz] from `dir`
// and normalises each pixel p to (p / 255 - kFashionMnistMean) / kFashionMnistStd.
// Throws InputError (one line naming the file) when a file is missing, is not an idx file of
// the right kind, is truncated or has trailing bytes, has corrupt gzip data, disagrees with its
// partner file on the number of examples, or holds a label outside 0..9.
ImageDataset load_fashion_mnist(const std::string& dir, Split split);

}  // namespace laconic
