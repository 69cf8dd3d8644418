#include "optimizers/lars.h"

#include <sstream>

#include "core/check.h"
#include "optimizers/device_state.h"
#if defined(LACONIC_HAVE_CUDA)
#include "optimizers/cuda/fused.h"
#endif
#include "optimizers/norms.h"

namespace laconic {

Lars::Lars(LarsOptions opts) : opts_(opts) {
  LC_CHECK(opts_.momentum >= 0.0 && opts_.momentum < 1.0, "momentum ", opts_.momentum);
  LC_CHECK(opts_.eta > 0.0, "eta ", opts_.eta);
  LC_CHECK(opts_.weight_decay >= 0.0, "weight_decay ", opts_.weight_decay);
  LC_CHECK(opts_.eps >= 0.0, "eps ", opts_.eps);
}

void Lars::prepare(const ParamStore& store) {
  prepare_state(momentum_, store);
  if (on_cuda(store)) layout_.prepare(store);
}

double Lars::trust_ratio(std::span<const float> w, std::span<const float> g) const {
  const double w_norm = l2_norm(w), g_norm = l2_norm(g);
  if (w_norm == 0.0 || g_norm == 0.0) return 1.0;
  return opts_.eta * w_norm / (g_norm + opts_.weight_decay * w_norm + opts_.eps);
}

void Lars::step(ParamStore& store, double lr) {
  prepare(store);
  const float mu = static_cast<float>(opts_.momentum);
  if (on_cuda(store)) {
#if defined(LACONIC_HAVE_CUDA)
    optim_cuda::lars_step(store.params().data(), momentum_.data(), store.grads().data(), layout_,
                          {mu, static_cast<float>(opts_.weight_decay), lr, opts_.eta, opts_.weight_decay, opts_.eps});
#endif
    return;
  }
  for (const auto& view : store.views()) {
    std::span<float> w = store.params().subspan(view.offset, view.numel);
    std::span<const float> g = store.grads().subspan(view.offset, view.numel);
    float* m = momentum_.data() + view.offset;
    const bool adapt = view.group == ParamGroup::decay;
    const float wd = adapt ? static_cast<float>(opts_.weight_decay) : 0.0f;
    const float scale = static_cast<float>(lr * (adapt ? trust_ratio(w, g) : 1.0));
    for (std::size_t i = 0; i < view.numel; ++i) {
      m[i] = mu * m[i] + scale * (g[i] + wd * w[i]);
      w[i] -= m[i];
    }
  }
}

std::string Lars::describe() const {
  std::ostringstream os;
  os << "lars(momentum=" << opts_.momentum << ", eta=" << opts_.eta
     << ", weight_decay=" << opts_.weight_decay << ", eps=" << opts_.eps << ")";
  return os.str();
}

std::vector<StateTensor> Lars::state() { return {{"momentum", momentum_.span(), momentum_.device()}}; }

}  // namespace laconic
