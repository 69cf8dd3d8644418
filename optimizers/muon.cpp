#include "optimizers/muon.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "core/ops/ops.h"
#include "optimizers/device_state.h"
#include "optimizers/norms.h"

namespace laconic {

float* newton_schulz(float* x, float* next, float* a, float* b, int s, int l, int steps) {
  const std::size_t sl = static_cast<std::size_t>(s) * static_cast<std::size_t>(l);
  const std::size_t ss = static_cast<std::size_t>(s) * static_cast<std::size_t>(s);
  const float inv_norm = static_cast<float>(1.0 / (std::sqrt(sum_squares({x, sl})) + 1e-7));
  for (std::size_t i = 0; i < sl; ++i) x[i] *= inv_norm;
  for (int k = 0; k < steps; ++k) {
    ops::cpu::gemm(a, x, x, s, s, l, false, true, 1.0f, 0.0f);                 // A = X X^T
    ops::cpu::gemm(b, a, a, s, s, s, false, false, kNewtonSchulzC, 0.0f);      // c A A
    for (std::size_t i = 0; i < ss; ++i) b[i] += kNewtonSchulzB * a[i];        //   + b A
    std::copy(x, x + sl, next);
    ops::cpu::gemm(next, b, x, s, l, s, false, false, 1.0f, kNewtonSchulzA);   // a X + B X
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
  if (store.device() != Device::cpu)
    LC_INPUT_ERROR("optimizer.name = \"muon\" runs on the host only (no CUDA kernels yet): use device = \"cpu\"");
  m_.prepare(store);
  std::size_t sl = 0, ss = 0;
  for (const auto& view : store.views()) {
    if (view.kind != ParamKind::hidden_matrix) continue;
    const auto s = static_cast<std::size_t>(std::min(view.shape[0], view.shape[1]));
    sl = std::max(sl, view.numel);
    ss = std::max(ss, s * s);
  }
  if (x_.size() < sl) x_.resize(sl), next_.resize(sl);
  if (a_.size() < ss) a_.resize(ss), b_.resize(ss);
}

void Muon::step(ParamStore& store, double lr) {
  prepare(store);
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
        x_[tall ? static_cast<std::size_t>(c) * rows + r : i] = u;
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
