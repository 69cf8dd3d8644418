#include "optimizers/sgd.h"

#include <sstream>

#include "core/check.h"
#include "optimizers/device_state.h"
#if defined(LACONIC_HAVE_CUDA)
#include "optimizers/cuda/fused.h"
#endif

namespace laconic {

Sgd::Sgd(SgdOptions opts) : opts_(opts) {
  LC_CHECK(opts_.momentum >= 0.0 && opts_.momentum < 1.0, "momentum ", opts_.momentum);
  LC_CHECK(!opts_.nesterov || opts_.momentum > 0.0, "Nesterov momentum needs momentum > 0");
  LC_CHECK(opts_.weight_decay >= 0.0, "weight_decay ", opts_.weight_decay);
}

void Sgd::prepare(const ParamStore& store) {
  if (opts_.momentum > 0.0) prepare_state(momentum_, store);
  if (on_cuda(store)) layout_.prepare(store);
}

void Sgd::step(ParamStore& store, double lr) {
  prepare(store);
  const float mu = static_cast<float>(opts_.momentum);
  const float step_lr = static_cast<float>(lr);
  if (on_cuda(store)) {
#if defined(LACONIC_HAVE_CUDA)
    optim_cuda::sgd_step(store.params().data(), momentum_.empty() ? nullptr : momentum_.data(),
                         store.grads().data(), layout_,
                         {step_lr, mu, static_cast<float>(opts_.weight_decay), opts_.nesterov});
#endif
    return;
  }
  for (const auto& v : store.views()) {
    float* w = store.params().data() + v.offset;
    const float* grad = store.grads().data() + v.offset;
    float* b = momentum_.empty() ? nullptr : momentum_.data() + v.offset;
    const float wd = v.group == ParamGroup::decay ? static_cast<float>(opts_.weight_decay) : 0.0f;
    for (std::size_t i = 0; i < v.numel; ++i) {
      float g = grad[i] + wd * w[i];
      if (b) {
        b[i] = mu * b[i] + g;
        g = opts_.nesterov ? g + mu * b[i] : b[i];
      }
      w[i] -= step_lr * g;
    }
  }
}

std::string Sgd::describe() const {
  std::ostringstream os;
  os << "sgd(momentum=" << opts_.momentum << (opts_.nesterov ? ", nesterov" : "")
     << ", weight_decay=" << opts_.weight_decay << ")";
  return os.str();
}

std::vector<StateTensor> Sgd::state() {
  if (opts_.momentum == 0.0) return {};
  return {StateTensor{"momentum", momentum_.span(), momentum_.device()}};
}

}  // namespace laconic
