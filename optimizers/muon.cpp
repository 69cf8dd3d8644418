#include "optimizers/muon.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/ops/dispatch.h"
#include "core/ops/ops.h"
#include "optimizers/device_state.h"
#include "optimizers/norms.h"

#if defined(LACONIC_HAVE_CUDA)
#include "optimizers/cuda/fused.h"
#endif

namespace laconic {

float* newton_schulz(float* x, float* next, float* a, float* b, int s, int l, int steps, Device device) {
  const std::size_t sl = static_cast<std::size_t>(s) * static_cast<std::size_t>(l);
  const std::size_t ss = static_cast<std::size_t>(s) * static_cast<std::size_t>(s);
  const ops::Kernels& k = ops::kernels(device);
  double sq = 0;
  if (device == Device::cpu) sq = sum_squares({x, sl});
#if defined(LACONIC_HAVE_CUDA)
  else sq = optim_cuda::sum_squares(x, sl);
#endif
  k.scale(x, static_cast<float>(1.0 / (std::sqrt(sq) + 1e-7)), sl);
  for (int it = 0; it < steps; ++it) {
    k.gemm(a, x, x, s, s, l, false, true, 1.0f, 0.0f);                 // A = X X^T
    k.gemm(b, a, a, s, s, s, false, false, kNewtonSchulzC, 0.0f);      // c A A
    k.axpy(b, kNewtonSchulzB, a, ss);                                  //   + b A
    copy_bytes(next, device, x, device, sl * sizeof(float));
    k.gemm(next, b, x, s, l, s, false, false, 1.0f, kNewtonSchulzA);   // a X + B X
    std::swap(x, next);
  }
  return x;
}

Muon::Muon(MuonOptions opts, AdamWOptions adamw) : opts_(opts), adamw_(adamw) {
  LC_CHECK(opts_.momentum >= 0.0 && opts_.momentum < 1.0, "momentum ", opts_.momentum);
  LC_CHECK(opts_.ns_steps >= 1, "ns_steps ", opts_.ns_steps);
  check(adamw_);
}

void Muon::prepare(const ParamStore& store) {
  prepare_state(m_.exp_avg, store);
  prepare_state(m_.exp_avg_sq, store);
  std::size_t sl = 0, ss = 0;
  for (const auto& view : store.views()) {
    if (view.kind != ParamKind::hidden_matrix) continue;
    const auto s = static_cast<std::size_t>(std::min(view.shape[0], view.shape[1]));
    sl = std::max(sl, view.numel);
    ss = std::max(ss, s * s);
  }
  if (on_cuda(store)) {
    if (adam_views_.empty())  // the first step on the device (a store's layout never changes)
      for (const auto& view : store.views())
        if (view.kind != ParamKind::hidden_matrix) adam_views_.push_back(view);
    m_.layout.prepare(store, adam_views_);
  }
  const auto sized = [&](DeviceArray<float>& buf, std::size_t n) {
    if (buf.size() < n || buf.device() != store.device()) buf = DeviceArray<float>(store.device(), n);
  };
  sized(x_, sl), sized(next_, sl), sized(a_, ss), sized(b_, ss);
}

void Muon::step_cuda(ParamStore& store, double lr) {
#if defined(LACONIC_HAVE_CUDA)
  const AdamWStep c(adamw_, lr, m_.steps.next());
  optim_cuda::adamw_step(store.params().data(), m_.exp_avg.data(), m_.exp_avg_sq.data(), store.grads().data(), m_.layout,
                         {c.b1, c.one_minus_b1, c.b2, c.one_minus_b2, c.step_size, c.bc2_sqrt, c.eps, c.decay});
  const float mu = static_cast<float>(opts_.momentum), one_minus_mu = static_cast<float>(1.0 - opts_.momentum);
  for (const auto& view : store.views()) {
    if (view.kind != ParamKind::hidden_matrix) continue;
    const int rows = static_cast<int>(view.shape[0]), cols = static_cast<int>(view.shape[1]);
    const bool tall = rows > cols;
    optim_cuda::muon_momentum(m_.exp_avg.data() + view.offset, x_.data(), store.grads().data() + view.offset, rows, cols,
                              mu, one_minus_mu, opts_.nesterov, tall);
    const float* o = newton_schulz(x_.data(), next_.data(), a_.data(), b_.data(), std::min(rows, cols),
                                   std::max(rows, cols), opts_.ns_steps, Device::cuda);
    const float decay = view.group == ParamGroup::decay ? static_cast<float>(1.0 - lr * adamw_.weight_decay) : 1.0f;
    const float step = static_cast<float>(lr * 0.2 * std::sqrt(static_cast<double>(std::max(rows, cols))));
    optim_cuda::muon_apply(store.params().data() + view.offset, o, rows, cols, decay, step, tall);
  }
#else
  (void)store, (void)lr;
#endif
}

void Muon::step(ParamStore& store, double lr) {
  prepare(store);
  if (on_cuda(store)) return step_cuda(store, lr);
  const AdamWStep adam(adamw_, lr, m_.steps.next());
  const float mu = static_cast<float>(opts_.momentum), one_minus_mu = static_cast<float>(1.0 - opts_.momentum);
  for (const auto& view : store.views()) {
    float* w = store.params().data() + view.offset;
    const float* g = store.grads().data() + view.offset;
    float* m = m_.exp_avg.data() + view.offset;
    const bool decays = view.group == ParamGroup::decay;
    if (view.kind != ParamKind::hidden_matrix) {
      adam.update(w, g, m, m_.exp_avg_sq.data() + view.offset, view.numel, decays);
      continue;
    }
    // X [s, l] = U, or U^T when rows > cols.
    const int rows = static_cast<int>(view.shape[0]), cols = static_cast<int>(view.shape[1]);
    const bool tall = rows > cols;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * cols + c;
        m[i] = mu * m[i] + one_minus_mu * g[i];
        const float u = opts_.nesterov ? one_minus_mu * g[i] + mu * m[i] : m[i];
        x_.data()[tall ? static_cast<std::size_t>(c) * rows + r : i] = u;
      }
    const float* o = newton_schulz(x_.data(), next_.data(), a_.data(), b_.data(), std::min(rows, cols),
                                   std::max(rows, cols), opts_.ns_steps);
    const float decay = decays ? static_cast<float>(1.0 - lr * adamw_.weight_decay) : 1.0f;
    const float step = static_cast<float>(lr * 0.2 * std::sqrt(static_cast<double>(std::max(rows, cols))));
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const std::size_t i = static_cast<std::size_t>(r) * cols + c;
        w[i] = w[i] * decay - step * o[tall ? static_cast<std::size_t>(c) * rows + r : i];
      }
  }
}

std::string Muon::describe() const {
  std::ostringstream os;
  os << "muon(momentum=" << opts_.momentum << (opts_.nesterov ? ", nesterov" : "") << ", ns_steps=" << opts_.ns_steps
     << ", scale=0.2*sqrt(max(rows, cols)), weight_decay=" << adamw_.weight_decay << "; adamw for the rest: betas=("
     << adamw_.beta1 << ", " << adamw_.beta2 << "), eps=" << adamw_.eps << ")";
  return os.str();
}

std::vector<StateTensor> Muon::state() { return m_.state(); }

}  // namespace laconic
