#include "optimizers/lamb.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/check.h"
#include "optimizers/device_state.h"
#if defined(LACONIC_HAVE_CUDA)
#include "optimizers/cuda/fused.h"
#endif
#include "optimizers/norms.h"

namespace laconic {
namespace {

// Per-step scalars of the update u, rounded to float once (apex divides by the bias corrections;
// we multiply by their float reciprocals, which differs by at most an ulp or so).
constexpr std::size_t kBlock = 512;  // elements per block of pass 1 (2 KiB of u on the stack)

struct UpdateCoefs {
  float inv_bc1, inv_bc2, eps, wd;
};

// u = m_hat / (sqrt(v_hat) + eps) + wd * w. Evaluated twice per element (once for ||u||, once to
// apply it) instead of storing u: no scratch buffer the size of the model, one less stream of
// memory traffic, and IEEE sqrt/div make both evaluations bitwise equal.
inline float lamb_update(float m, float v, float w, const UpdateCoefs& c) {
  return (m * c.inv_bc1) / (std::sqrt(v * c.inv_bc2) + c.eps) + c.wd * w;
}

}  // namespace

Lamb::Lamb(LambOptions opts) : opts_(opts) {
  LC_CHECK(opts_.beta1 >= 0.0 && opts_.beta1 < 1.0, "beta1 ", opts_.beta1);
  LC_CHECK(opts_.beta2 >= 0.0 && opts_.beta2 < 1.0, "beta2 ", opts_.beta2);
  LC_CHECK(opts_.eps > 0.0, "eps ", opts_.eps);
  LC_CHECK(opts_.weight_decay >= 0.0, "weight_decay ", opts_.weight_decay);
  LC_CHECK(opts_.clamp_min >= 0.0 && opts_.clamp_max >= 0.0, "clamp ", opts_.clamp_min, " ", opts_.clamp_max);
  LC_CHECK(opts_.clamp_min == 0.0 || opts_.clamp_max == 0.0 || opts_.clamp_min <= opts_.clamp_max,
           "clamp_min ", opts_.clamp_min, " > clamp_max ", opts_.clamp_max);
}

void Lamb::prepare(const ParamStore& store) { m_.prepare(store); }

void Lamb::step(ParamStore& store, double lr) {
  prepare(store);
  const auto t = static_cast<double>(m_.steps.next());
  const double bc1 = opts_.bias_correction ? 1.0 - std::pow(opts_.beta1, t) : 1.0;
  const double bc2 = opts_.bias_correction ? 1.0 - std::pow(opts_.beta2, t) : 1.0;
  const float b1 = static_cast<float>(opts_.beta1), one_minus_b1 = static_cast<float>(1.0 - opts_.beta1);
  const float b2 = static_cast<float>(opts_.beta2), one_minus_b2 = static_cast<float>(1.0 - opts_.beta2);
  if (on_cuda(store)) {
#if defined(LACONIC_HAVE_CUDA)
    // The floats of UpdateCoefs below (wd for decay tensors; the kernels use 0 for the others).
    optim_cuda::lamb_step(store.params().data(), m_.exp_avg.data(), m_.exp_avg_sq.data(), store.grads().data(), m_.layout,
                          {b1, one_minus_b1, b2, one_minus_b2, static_cast<float>(1.0 / bc1),
                           static_cast<float>(1.0 / bc2), static_cast<float>(opts_.eps),
                           static_cast<float>(opts_.weight_decay), adapts_decay_group(), lr, opts_.clamp_min,
                           opts_.clamp_max});
#endif
    return;
  }
  for (const auto& view : store.views()) {
    float* w = store.params().data() + view.offset;
    const float* g = store.grads().data() + view.offset;
    float* m = m_.exp_avg.data() + view.offset;
    float* v = m_.exp_avg_sq.data() + view.offset;
    const bool decay = view.group == ParamGroup::decay, adapt = decay && adapts_decay_group();
    const UpdateCoefs c{static_cast<float>(1.0 / bc1), static_cast<float>(1.0 / bc2),
                        static_cast<float>(opts_.eps),
                        decay ? static_cast<float>(opts_.weight_decay) : 0.0f};
    // Pass 1, in blocks that stay in L1: moments, then u into a stack buffer, then the block's
    // ||u||^2 and ||w||^2 (double, fixed order). The simple loops vectorise.
    double u_sq = 0.0, w_sq = 0.0;
    for (std::size_t lo = 0; lo < view.numel; lo += kBlock) {
      const std::size_t n = std::min(kBlock, view.numel - lo);
      for (std::size_t i = lo; i < lo + n; ++i) {
        m[i] = m[i] * b1 + one_minus_b1 * g[i];
        v[i] = v[i] * b2 + one_minus_b2 * g[i] * g[i];
      }
      if (!adapt) continue;
      float u[kBlock];
      for (std::size_t i = 0; i < n; ++i) u[i] = lamb_update(m[lo + i], v[lo + i], w[lo + i], c);
      u_sq += sum_squares({u, n});
      w_sq += sum_squares({w + lo, n});
    }
    double trust = 1.0;
    if (adapt && w_sq > 0.0 && u_sq > 0.0) {
      trust = std::sqrt(w_sq) / std::sqrt(u_sq);
      if (opts_.clamp_min > 0.0) trust = std::max(trust, opts_.clamp_min);
      if (opts_.clamp_max > 0.0) trust = std::min(trust, opts_.clamp_max);
    }
    // Pass 2: w = w - lr * trust * u.
    const float scale = static_cast<float>(lr * trust);
    for (std::size_t i = 0; i < view.numel; ++i) w[i] -= scale * lamb_update(m[i], v[i], w[i], c);
  }
}

std::string Lamb::describe() const {
  std::ostringstream os;
  os << "lamb(betas=(" << opts_.beta1 << ", " << opts_.beta2 << "), eps=" << opts_.eps
     << ", weight_decay=" << opts_.weight_decay << ", bias_correction=" << opts_.bias_correction;
  if (opts_.trust_without_decay) os << ", trust_without_decay";
  if (opts_.clamp_min > 0.0 || opts_.clamp_max > 0.0)
    os << ", trust_clamp=[" << opts_.clamp_min << ", " << opts_.clamp_max << "]";
  os << ")";
  return os.str();
}

std::vector<StateTensor> Lamb::state() { return m_.state(); }

}  // namespace laconic
