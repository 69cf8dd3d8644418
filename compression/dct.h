// The orthonormal DCT-II of a buffer in chunks (DeMo's transform of the momentum): a buffer of n
// elements is cut into chunks of `chunk` elements from its start, the last one shorter when
// `chunk` does not divide n, and each chunk x of length L becomes
//   X_k = s_k * sum_{i<L} x_i cos(pi (i + 1/2) k / L),  s_0 = sqrt(1/L), s_k = sqrt(2/L),
// an orthonormal basis change: the inverse (DCT-III) is the transpose, and norms are kept, so
// removing coefficients removes exactly their energy. Bases are computed in double, stored in
// float; a transform is L^2 multiply-adds per chunk.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace laconic {

class ChunkDct {
 public:
  explicit ChunkDct(std::size_t chunk);
  // Builds the basis for the last chunk of a buffer of n elements (forward/inverse need it).
  void prepare(std::size_t n);
  // out = the chunked DCT-II of x (out.size() == x.size(); they may not alias).
  void forward(std::span<const float> x, std::span<float> out) const;
  // out = the inverse: x from its coefficients.
  void inverse(std::span<const float> coef, std::span<float> out) const;
  std::size_t chunk() const { return chunk_; }

 private:
  const std::vector<float>& basis(std::size_t length) const;  // row k, column i: s_k cos(...)
  std::size_t chunk_;
  std::vector<std::vector<float>> bases_;  // by length; empty until prepared
};

}  // namespace laconic
