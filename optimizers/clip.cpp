#include "optimizers/clip.h"

#include <cmath>

#include "core/check.h"
#include "optimizers/norms.h"
#if defined(LACONIC_HAVE_CUDA)
#include "optimizers/cuda/fused.h"
#endif

namespace laconic {

double global_grad_norm(std::span<const float> grads) { return l2_norm(grads); }

double clip_grad_norm(std::span<float> grads, double max_norm) {
  const double norm = global_grad_norm(grads);
  clip_to_norm(grads, norm, max_norm);
  return norm;
}

namespace {

// torch's clip_coef = max_norm / (norm + 1e-6), as the float the gradients are multiplied by;
// false when nothing is scaled (coef >= 1, or a non-finite norm: see clip.h).
bool clip_coefficient(double norm, double max_norm, float& c) {
  LC_CHECK(max_norm > 0.0, "max_norm ", max_norm);
  if (!std::isfinite(norm)) return false;
  const double coef = max_norm / (norm + 1e-6);
  if (!(coef < 1.0)) return false;
  c = static_cast<float>(coef);
  return true;
}

// A cuda span needs a build with CUDA.
void check_built_for(Device where) {
  LC_CHECK(where == Device::cpu || built_with_cuda(), "gradient clipping on ", name_of(where),
           " in a build without CUDA");
}

}  // namespace

void clip_to_norm(std::span<float> grads, double norm, double max_norm) {
  float c;
  if (!clip_coefficient(norm, max_norm, c)) return;
  for (float& g : grads) g *= c;
}

double global_grad_norm(std::span<const float> grads, Device where) {
  if (where == Device::cpu) return global_grad_norm(grads);
  check_built_for(where);
#if defined(LACONIC_HAVE_CUDA)
  return std::sqrt(optim_cuda::sum_squares(grads.data(), grads.size()));  // as l2_norm()
#else
  return 0.0;  // unreachable
#endif
}

double clip_grad_norm(std::span<float> grads, double max_norm, Device where) {
  const double norm = global_grad_norm(grads, where);
  clip_to_norm(grads, norm, max_norm, where);
  return norm;
}

void clip_to_norm(std::span<float> grads, double norm, double max_norm, Device where) {
  if (where == Device::cpu) return clip_to_norm(grads, norm, max_norm);
  check_built_for(where);
  float c;
  if (!clip_coefficient(norm, max_norm, c)) return;
#if defined(LACONIC_HAVE_CUDA)
  optim_cuda::scale(grads.data(), c, grads.size());
#endif
}

}  // namespace laconic
