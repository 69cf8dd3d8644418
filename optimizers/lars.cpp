#include "optimizers/lars.h"

#include <cmath>
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
  return trust_from(l2_norm(w), l2_norm(g));
}

double Lars::trust_from(double w_norm, double g_norm) const {
  if (w_norm == 0.0 || g_norm == 0.0) return 1.0;
  return opts_.eta * w_norm / (g_norm + opts_.weight_decay * w_norm + opts_.eps);
}

void Lars::step(ParamStore& store, double lr) {
  prepare(store);
  if (on_cuda(store)) {
#if defined(LACONIC_HAVE_CUDA)
    const float mu = static_cast<float>(opts_.momentum);
    optim_cuda::lars_step(store.params().data(), momentum_.data(), store.grads().data(), layout_,
                          {mu, static_cast<float>(opts_.weight_decay), lr, opts_.eta, opts_.weight_decay, opts_.eps});
#endif
    return;
  }
  const auto& views = store.views();
  if (!sums_) {
    for (std::size_t i = 0; i < views.size(); ++i) {
      const ParamView& v = views[i];
      const bool adapt = v.group == ParamGroup::decay;
      apply(store, i, lr * (adapt ? trust_ratio(store.params().subspan(v.offset, v.numel),
                                                store.grads().subspan(v.offset, v.numel))
                                  : 1.0));
    }
    return;
  }
  // Sharded: every piece's partial ||w||^2 and ||g||^2, one exchange, then the updates.
  norms_.assign(2 * sums_->tensors(), 0.0);
  for (std::size_t i = 0; i < views.size(); ++i) {
    const ParamView& v = views[i];
    if (v.group != ParamGroup::decay) continue;
    norms_[2 * sums_->tensor_of(i)] += sum_squares(store.params().subspan(v.offset, v.numel));
    norms_[2 * sums_->tensor_of(i) + 1] += sum_squares(store.grads().subspan(v.offset, v.numel));
  }
  sums_->sum(norms_);
  for (std::size_t i = 0; i < views.size(); ++i) {
    const std::size_t t = sums_->tensor_of(i);
    const bool adapt = views[i].group == ParamGroup::decay;
    apply(store, i, lr * (adapt ? trust_from(std::sqrt(norms_[2 * t]), std::sqrt(norms_[2 * t + 1])) : 1.0));
  }
}

// m = mu * m + scale * (g + wd * w);  w = w - m, over view i.
void Lars::apply(ParamStore& store, std::size_t i, double scale) {
  const ParamView& view = store.view(i);
  float* w = store.params().data() + view.offset;
  const float* g = store.grads().data() + view.offset;
  float* m = momentum_.data() + view.offset;
  const float mu = static_cast<float>(opts_.momentum), s = static_cast<float>(scale);
  const float wd = view.group == ParamGroup::decay ? static_cast<float>(opts_.weight_decay) : 0.0f;
  for (std::size_t j = 0; j < view.numel; ++j) {
    m[j] = mu * m[j] + s * (g[j] + wd * w[j]);
    w[j] -= m[j];
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
