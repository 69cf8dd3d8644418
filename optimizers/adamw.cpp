#include "optimizers/adamw.h"

#include <cmath>
#include <sstream>

#include "core/check.h"
#include "optimizers/device_state.h"
#if defined(LACONIC_HAVE_CUDA)
#include "optimizers/cuda/fused.h"
#endif

namespace laconic {

void check(const AdamWOptions& o) {
  LC_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0, "beta1 ", o.beta1);
  LC_CHECK(o.beta2 >= 0.0 && o.beta2 < 1.0, "beta2 ", o.beta2);
  LC_CHECK(o.eps > 0.0, "eps ", o.eps);
  LC_CHECK(o.weight_decay >= 0.0, "weight_decay ", o.weight_decay);
}

AdamW::AdamW(AdamWOptions opts) : opts_(opts) { check(opts_); }

void AdamW::prepare(const ParamStore& store) { m_.prepare(store); }

AdamWStep::AdamWStep(const AdamWOptions& o, double lr, std::int64_t t)
    : b1(static_cast<float>(o.beta1)),
      one_minus_b1(static_cast<float>(1.0 - o.beta1)),
      b2(static_cast<float>(o.beta2)),
      one_minus_b2(static_cast<float>(1.0 - o.beta2)),
      step_size(static_cast<float>(lr / (1.0 - std::pow(o.beta1, static_cast<double>(t))))),
      bc2_sqrt(static_cast<float>(std::sqrt(1.0 - std::pow(o.beta2, static_cast<double>(t))))),
      eps(static_cast<float>(o.eps)),
      decay(static_cast<float>(1.0 - lr * o.weight_decay)) {}

void AdamWStep::update(float* w, const float* g, float* m, float* v, std::size_t n, bool decays) const {
  for (std::size_t i = 0; i < n; ++i) {
    if (decays) w[i] *= decay;
    m[i] = m[i] * b1 + one_minus_b1 * g[i];
    v[i] = v[i] * b2 + one_minus_b2 * g[i] * g[i];
    const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
    w[i] += -step_size * (m[i] / denom);
  }
}

void AdamW::step(ParamStore& store, double lr) {
  prepare(store);
  const AdamWStep c(opts_, lr, m_.steps.next());
  if (on_cuda(store)) {
#if defined(LACONIC_HAVE_CUDA)
    optim_cuda::adamw_step(store.params().data(), m_.exp_avg.data(), m_.exp_avg_sq.data(), store.grads().data(), m_.layout,
                           {c.b1, c.one_minus_b1, c.b2, c.one_minus_b2, c.step_size, c.bc2_sqrt, c.eps, c.decay});
#endif
    return;
  }
  for (const auto& view : store.views()) {
    const std::size_t o = view.offset;
    c.update(store.params().data() + o, store.grads().data() + o, m_.exp_avg.data() + o, m_.exp_avg_sq.data() + o,
             view.numel, view.group == ParamGroup::decay);
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
