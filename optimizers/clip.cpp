#include "optimizers/clip.h"

#include <cmath>

#include "framework/core/check.h"
#include "optimizers/norms.h"

namespace laconic {

double global_grad_norm(std::span<const float> grads) { return l2_norm(grads); }

double clip_grad_norm(std::span<float> grads, double max_norm) {
  const double norm = global_grad_norm(grads);
  clip_to_norm(grads, norm, max_norm);
  return norm;
}

void clip_to_norm(std::span<float> grads, double norm, double max_norm) {
  LC_CHECK(max_norm > 0.0, "max_norm ", max_norm);
  if (!std::isfinite(norm)) return;
  const double coef = max_norm / (norm + 1e-6);  // torch: clip_coef, applied when below 1
  if (coef < 1.0) {
    const float c = static_cast<float>(coef);
    for (float& g : grads) g *= c;
  }
}

}  // namespace laconic
