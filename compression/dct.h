// The orthonormal DCT-II (DeMo's transform of the momentum), of length-L pieces
//   X_k = s_k * sum_{i<L} x_i cos(pi (i + 1/2) k / L),  s_0 = sqrt(1/L), s_k = sqrt(2/L),
// an orthonormal basis change: the inverse (DCT-III) is the transpose, and norms are kept, so
// removing coefficients removes exactly their energy. Bases are computed in double, stored in
// float; a transform is L multiply-adds per element and dimension. Two cuttings:
//   1-D chunks (forward/inverse): a buffer of n elements in chunks of `chunk` from its start, the
//     last one shorter when `chunk` does not divide n.
//   2-D blocks (forward_2d/inverse_2d), the reference's (bloc97/DeMo TransformDCT): a rows x cols
//     matrix in blocks of h x w, h the largest divisor of rows that is at most `chunk` (rows itself
//     when rows < chunk; so 1 for a prime rows > chunk), w likewise for cols; each block X becomes
//     C_h X C_w^T (C_L: the DCT-II matrix), stored block-major: block (by, bx) at
//     (by * cols / w + bx) * h * w, its coefficient (b, d) at b * w + d. A vector of n is the
//     1 x n matrix: chunks of w = the largest divisor of n up to `chunk`, in order.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace laconic {

// The largest divisor of n that is at most `target` (n itself when n < target): the reference's
// _get_smaller_split, the side of a DCT block along a dimension of n.
std::size_t dct_block_side(std::size_t n, std::size_t target);

// A rows x cols matrix cut into h x w blocks (dct_block_side of each dimension).
struct DctBlocks {
  std::size_t rows = 0, cols = 0, h = 1, w = 1;
  std::size_t block() const { return h * w; }
  std::size_t numel() const { return rows * cols; }
};

class ChunkDct {
 public:
  explicit ChunkDct(std::size_t chunk);
  // Builds the basis for the last chunk of a buffer of n elements (forward/inverse need it).
  void prepare(std::size_t n);
  // The blocks of a rows x cols matrix, with their bases built (forward_2d/inverse_2d need them).
  DctBlocks prepare_2d(std::size_t rows, std::size_t cols);
  // out = the chunked DCT-II of x (out.size() == x.size(); they may not alias).
  void forward(std::span<const float> x, std::span<float> out) const;
  // out = the inverse: x from its coefficients.
  void inverse(std::span<const float> coef, std::span<float> out) const;
  // out (block-major) = the 2-D DCT-II of every block of x (row-major rows x cols); tmp: at least
  // b.block() floats. None may alias.
  void forward_2d(std::span<const float> x, const DctBlocks& b, std::span<float> out, std::span<float> tmp) const;
  // out (row-major) = the inverse of coef (block-major); zero coefficients cost nothing.
  void inverse_2d(std::span<const float> coef, const DctBlocks& b, std::span<float> out, std::span<float> tmp) const;
  std::size_t chunk() const { return chunk_; }

 private:
  const std::vector<float>& basis(std::size_t length) const;  // row k, column i: s_k cos(...)
  void build(std::size_t length);
  std::size_t chunk_;
  std::vector<std::vector<float>> bases_;  // by length; empty until prepared
};

}  // namespace laconic
