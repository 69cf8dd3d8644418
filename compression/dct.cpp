#include "compression/dct.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/check.h"

namespace laconic {

std::size_t dct_block_side(std::size_t n, std::size_t target) {
  LC_CHECK(n >= 1 && target >= 1, "DCT block of ", n, " elements for a target of ", target);
  for (std::size_t d = std::min(n, target);; --d)
    if (n % d == 0) return d;  // d = 1 always divides
}

ChunkDct::ChunkDct(std::size_t chunk) : chunk_(chunk), bases_(chunk + 1) {
  LC_CHECK(chunk >= 1, "DCT chunk ", chunk);
  build(chunk);
}

void ChunkDct::prepare(std::size_t n) {
  if (n > 0) build(n % chunk_ == 0 ? chunk_ : n % chunk_);
}

DctBlocks ChunkDct::prepare_2d(std::size_t rows, std::size_t cols) {
  const DctBlocks b{rows, cols, dct_block_side(rows, chunk_), dct_block_side(cols, chunk_)};
  build(b.h);
  build(b.w);
  return b;
}

void ChunkDct::build(std::size_t len) {
  std::vector<float>& b = bases_.at(len);
  if (!b.empty()) return;
  b.resize(len * len);
  const double l = static_cast<double>(len);
  for (std::size_t k = 0; k < len; ++k) {
    const double s = std::sqrt((k == 0 ? 1.0 : 2.0) / l);
    for (std::size_t i = 0; i < len; ++i)
      b[k * len + i] = static_cast<float>(s * std::cos(std::numbers::pi * (static_cast<double>(i) + 0.5) *
                                                       static_cast<double>(k) / l));
  }
}

const std::vector<float>& ChunkDct::basis(std::size_t length) const {
  const std::vector<float>& b = bases_.at(length);
  LC_CHECK(!b.empty(), "DCT basis of length ", length, " not prepared");
  return b;
}

void ChunkDct::forward(std::span<const float> x, std::span<float> out) const {
  LC_CHECK(out.size() == x.size(), "DCT output has ", out.size(), " elements, input ", x.size());
  for (std::size_t begin = 0; begin < x.size(); begin += chunk_) {
    const std::size_t len = std::min(chunk_, x.size() - begin);
    const float* b = basis(len).data();
    const float* v = x.data() + begin;
    for (std::size_t k = 0; k < len; ++k) {
      float acc = 0.0f;
      for (std::size_t i = 0; i < len; ++i) acc += b[k * len + i] * v[i];
      out[begin + k] = acc;
    }
  }
}

void ChunkDct::inverse(std::span<const float> coef, std::span<float> out) const {
  LC_CHECK(out.size() == coef.size(), "DCT output has ", out.size(), " elements, input ", coef.size());
  for (std::size_t begin = 0; begin < coef.size(); begin += chunk_) {
    const std::size_t len = std::min(chunk_, coef.size() - begin);
    const float* b = basis(len).data();
    const float* c = coef.data() + begin;
    float* o = out.data() + begin;
    for (std::size_t i = 0; i < len; ++i) o[i] = 0.0f;
    for (std::size_t k = 0; k < len; ++k) {
      if (c[k] == 0.0f) continue;  // sparse coefficients (DeMo's transmitted ones) cost k * L
      for (std::size_t i = 0; i < len; ++i) o[i] += b[k * len + i] * c[k];
    }
  }
}

// Per block X (h x w, row stride cols): T = X C_w^T (T[i][d] = sum_j X[i][j] C_w[d][j]), then
// Y = C_h T (Y[b][d] = sum_i C_h[b][i] T[i][d]).
void ChunkDct::forward_2d(std::span<const float> x, const DctBlocks& bl, std::span<float> out,
                          std::span<float> tmp) const {
  LC_CHECK(x.size() == bl.numel() && out.size() == bl.numel() && tmp.size() >= bl.block(),
           "2-D DCT of ", bl.rows, " x ", bl.cols, ": got ", x.size(), " in, ", out.size(), " out, ", tmp.size(),
           " scratch");
  const std::size_t h = bl.h, w = bl.w, bx_n = bl.cols / w;
  const float* ch = basis(h).data();
  const float* cw = basis(w).data();
  float* t = tmp.data();
  for (std::size_t by = 0; by < bl.rows / h; ++by)
    for (std::size_t bx = 0; bx < bx_n; ++bx) {
      const float* xb = x.data() + by * h * bl.cols + bx * w;
      for (std::size_t i = 0; i < h; ++i)
        for (std::size_t d = 0; d < w; ++d) {
          float acc = 0.0f;
          for (std::size_t j = 0; j < w; ++j) acc += xb[i * bl.cols + j] * cw[d * w + j];
          t[i * w + d] = acc;
        }
      float* y = out.data() + (by * bx_n + bx) * h * w;
      std::fill(y, y + h * w, 0.0f);
      for (std::size_t b = 0; b < h; ++b)
        for (std::size_t i = 0; i < h; ++i) {
          const float c = ch[b * h + i];
          for (std::size_t d = 0; d < w; ++d) y[b * w + d] += c * t[i * w + d];
        }
    }
}

// Per block Y: T = C_h^T Y (T[i][d] = sum_b C_h[b][i] Y[b][d], skipping zero Y), then
// X = T C_w (X[i][j] = sum_d T[i][d] C_w[d][j]).
void ChunkDct::inverse_2d(std::span<const float> coef, const DctBlocks& bl, std::span<float> out,
                          std::span<float> tmp) const {
  LC_CHECK(coef.size() == bl.numel() && out.size() == bl.numel() && tmp.size() >= bl.block(),
           "2-D inverse DCT of ", bl.rows, " x ", bl.cols, ": got ", coef.size(), " in, ", out.size(), " out, ",
           tmp.size(), " scratch");
  const std::size_t h = bl.h, w = bl.w, bx_n = bl.cols / w;
  const float* ch = basis(h).data();
  const float* cw = basis(w).data();
  float* t = tmp.data();
  for (std::size_t by = 0; by < bl.rows / h; ++by)
    for (std::size_t bx = 0; bx < bx_n; ++bx) {
      const float* y = coef.data() + (by * bx_n + bx) * h * w;
      std::fill(t, t + h * w, 0.0f);
      for (std::size_t b = 0; b < h; ++b)
        for (std::size_t d = 0; d < w; ++d) {
          const float c = y[b * w + d];
          if (c == 0.0f) continue;  // DeMo's transmitted coefficients are sparse
          for (std::size_t i = 0; i < h; ++i) t[i * w + d] += ch[b * h + i] * c;
        }
      float* xb = out.data() + by * h * bl.cols + bx * w;
      for (std::size_t i = 0; i < h; ++i) {
        float* row = xb + i * bl.cols;
        std::fill(row, row + w, 0.0f);
        for (std::size_t d = 0; d < w; ++d) {
          const float c = t[i * w + d];
          for (std::size_t j = 0; j < w; ++j) row[j] += c * cw[d * w + j];
        }
      }
    }
}

}  // namespace laconic
