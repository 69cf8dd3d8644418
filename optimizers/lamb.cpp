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

constexpr std::size_t kBlock = 512;  // elements per block of pass 1 (2 KiB of u on the stack)

// u = m_hat / (sqrt(v_hat) + eps) + wd * w. Evaluated twice per element (once for ||u||, once to
// apply it) instead of storing u: no scratch buffer the size of the model, one less stream of
// memory traffic, and IEEE sqrt/div make both evaluations bitwise equal.
inline float lamb_update(float m, float v, float w, const Lamb::UpdateCoefs& c) {
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
  const MomentCoefs k{b1, one_minus_b1, b2, one_minus_b2};
  const UpdateCoefs c{static_cast<float>(1.0 / bc1), static_cast<float>(1.0 / bc2), static_cast<float>(opts_.eps), 0.0f};
  const auto& views = store.views();
  // Unsharded, each tensor's two passes run back to back (it stays in cache); sharded, every
  // piece's norms first, then one exchange of the partial sums, then the updates.
  if (sums_) norms_.assign(2 * sums_->tensors(), 0.0);
  for (std::size_t i = 0; i < views.size(); ++i) {
    const Piece p = piece(store, i, c);
    const auto [w_sq, u_sq] = moments(p, k);
    if (sums_) {
      norms_[2 * sums_->tensor_of(i)] += w_sq;
      norms_[2 * sums_->tensor_of(i) + 1] += u_sq;
    } else {
      apply(p, lr * trust(p.adapt, w_sq, u_sq));
    }
  }
  if (!sums_) return;
  sums_->sum(norms_);
  for (std::size_t i = 0; i < views.size(); ++i) {
    const Piece p = piece(store, i, c);
    const std::size_t t = sums_->tensor_of(i);
    apply(p, lr * trust(p.adapt, norms_[2 * t], norms_[2 * t + 1]));
  }
}

Lamb::Piece Lamb::piece(ParamStore& store, std::size_t i, UpdateCoefs c) {
  const ParamView& view = store.view(i);
  const bool decay = view.group == ParamGroup::decay;
  if (decay) c.wd = static_cast<float>(opts_.weight_decay);
  return {store.params().data() + view.offset, store.grads().data() + view.offset, m_.exp_avg.data() + view.offset,
          m_.exp_avg_sq.data() + view.offset, view.numel, decay && adapts_decay_group(), c};
}

// Pass 1, in blocks that stay in L1: moments, then u into a stack buffer, then the block's ||u||^2
// and ||w||^2 (double, fixed order; only where adapted). The simple loops vectorise.
std::pair<double, double> Lamb::moments(const Piece& p, const MomentCoefs& k) {
  double u_sq = 0.0, w_sq = 0.0;
  for (std::size_t lo = 0; lo < p.n; lo += kBlock) {
    const std::size_t n = std::min(kBlock, p.n - lo);
    for (std::size_t i = lo; i < lo + n; ++i) {
      p.m[i] = p.m[i] * k.b1 + k.one_minus_b1 * p.g[i];
      p.v[i] = p.v[i] * k.b2 + k.one_minus_b2 * p.g[i] * p.g[i];
    }
    if (!p.adapt) continue;
    float u[kBlock];
    for (std::size_t i = 0; i < n; ++i) u[i] = lamb_update(p.m[lo + i], p.v[lo + i], p.w[lo + i], p.c);
    u_sq += sum_squares({u, n});
    w_sq += sum_squares({p.w + lo, n});
  }
  return {w_sq, u_sq};
}

// Pass 2: w = w - lr * trust * u.
void Lamb::apply(const Piece& p, double scale) {
  const auto f = static_cast<float>(scale);
  for (std::size_t i = 0; i < p.n; ++i) p.w[i] -= f * lamb_update(p.m[i], p.v[i], p.w[i], p.c);
}

double Lamb::trust(bool adapt, double w_sq, double u_sq) const {
  if (!adapt || w_sq <= 0.0 || u_sq <= 0.0) return 1.0;
  double t = std::sqrt(w_sq) / std::sqrt(u_sq);
  if (opts_.clamp_min > 0.0) t = std::max(t, opts_.clamp_min);
  if (opts_.clamp_max > 0.0) t = std::min(t, opts_.clamp_max);
  return t;
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
