#include "optimizers/adamw.h"

#include <cmath>
#include <sstream>

#include "core/check.h"
#include "optimizers/device_state.h"
#if defined(LACONIC_HAVE_CUDA)
#include "optimizers/cuda/fused.h"
#endif

namespace laconic {

AdamW::AdamW(AdamWOptions opts) : opts_(opts) {
  LC_CHECK(opts_.beta1 >= 0.0 && opts_.beta1 < 1.0, "beta1 ", opts_.beta1);
  LC_CHECK(opts_.beta2 >= 0.0 && opts_.beta2 < 1.0, "beta2 ", opts_.beta2);
  LC_CHECK(opts_.eps > 0.0, "eps ", opts_.eps);
  LC_CHECK(opts_.weight_decay >= 0.0, "weight_decay ", opts_.weight_decay);
}

void AdamW::prepare(const ParamStore& store) { m_.prepare(store); }

void AdamW::step(ParamStore& store, double lr) {
  prepare(store);
  const auto t = static_cast<double>(m_.steps.next());
  // Scalars are formed in double and rounded to float once, as torch does with Python scalars.
  const float b1 = static_cast<float>(opts_.beta1), one_minus_b1 = static_cast<float>(1.0 - opts_.beta1);
  const float b2 = static_cast<float>(opts_.beta2), one_minus_b2 = static_cast<float>(1.0 - opts_.beta2);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(opts_.beta1, t)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(opts_.beta2, t)));
  const float eps = static_cast<float>(opts_.eps);
  const float decay = static_cast<float>(1.0 - lr * opts_.weight_decay);
  if (on_cuda(store)) {
#if defined(LACONIC_HAVE_CUDA)
    optim_cuda::adamw_step(store.params().data(), m_.exp_avg.data(), m_.exp_avg_sq.data(), store.grads().data(), m_.layout,
                           {b1, one_minus_b1, b2, one_minus_b2, step_size, bc2_sqrt, eps, decay});
#endif
    return;
  }
  for (const auto& view : store.views()) {
    float* w = store.params().data() + view.offset;
    const float* g = store.grads().data() + view.offset;
    float* m = m_.exp_avg.data() + view.offset;
    float* v = m_.exp_avg_sq.data() + view.offset;
    const bool decays = view.group == ParamGroup::decay;
    for (std::size_t i = 0; i < view.numel; ++i) {
      if (decays) w[i] *= decay;
      m[i] = m[i] * b1 + one_minus_b1 * g[i];
      v[i] = v[i] * b2 + one_minus_b2 * g[i] * g[i];
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      w[i] += -step_size * (m[i] / denom);
    }
  }
}

std::string AdamW::describe() const {
  std::ostringstream os;
  os << "adamw(betas=(" << opts_.beta1 << ", " << opts_.beta2 << "), eps=" << opts_.eps
     << ", weight_decay=" << opts_.weight_decay << ")";
  return os.str();
}

std::vector<StateTensor> AdamW::state() { return m_.state(); }

}  // namespace laconic
