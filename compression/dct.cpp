#include "compression/dct.h"

#include <cmath>
#include <numbers>

#include "framework/core/check.h"

namespace laconic {

ChunkDct::ChunkDct(std::size_t chunk) : chunk_(chunk), bases_(chunk + 1) {
  LC_CHECK(chunk >= 1, "DCT chunk ", chunk);
  prepare(chunk);
}

void ChunkDct::prepare(std::size_t n) {
  const std::size_t len = n % chunk_ == 0 ? chunk_ : n % chunk_;
  std::vector<float>& b = bases_[len];
  if (!b.empty() || n == 0) return;
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

}  // namespace laconic
