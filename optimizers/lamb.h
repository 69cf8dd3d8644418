// LAMB (You et al., "Large Batch Optimization for Deep Learning", ICLR 2020), with NVIDIA apex
// FusedLAMB semantics (adam_w_mode, grad_averaging on, use_nvlamb off). With t the step count:
//   m = b1 * m + (1 - b1) * g;   v = b2 * v + (1 - b2) * g * g
//   m_hat = m / (1 - b1^t);      v_hat = v / (1 - b2^t)      (both divisors 1 without bias_correction)
//   u = m_hat / (sqrt(v_hat) + eps) + wd * w
//   trust = ||w|| / ||u||   (norms per tensor, in double; 1 when either is 0)
//   trust = clamp(trust, clamp_min, clamp_max)                 (each bound only when > 0; apex has none)
//   w = w - lr * trust * u
// Which tensors are adapted (trust ratio; the others take trust 1): apex's rule by default, the
// decay group's tensors when weight_decay > 0. Without use_nvlamb apex adapts only groups whose
// decay is non-zero: no_decay tensors (biases, norm parameters), which apex puts in a group with
// weight_decay 0, never; and at weight_decay = 0 no tensor, so the step is Adam's. The paper (and
// apex's use_nvlamb) adapts every layer whatever its decay: trust_without_decay = true adapts
// the decay group at weight_decay = 0 too (no_decay tensors stay at trust 1 either way).
// Global gradient-norm clipping (apex: to 1.0, before the step) is clip_grad_norm() in clip.h,
// called by the trainer on the averaged gradients.
// State: "exp_avg", "exp_avg_sq" (laid out like the parameters) and "step" (one element).
#pragma once

#include <utility>
#include <vector>

#include "core/device.h"
#include "optimizers/adam_moments.h"
#include "optimizers/optimizer.h"

namespace laconic {

struct LambOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0.01;  // decay group only
  bool bias_correction = true;
  double clamp_min = 0.0;  // lower bound on the trust ratio; 0 = off
  double clamp_max = 0.0;  // upper bound on the trust ratio; 0 = off (others use 10)
  bool trust_without_decay = false;  // adapt the decay group at weight_decay = 0 too (the paper)
};

class Lamb final : public Optimizer {
 public:
  explicit Lamb(LambOptions opts);
  void step(ParamStore& store, double lr) override;
  std::string describe() const override;
  void prepare(const ParamStore& store) override;
  std::vector<StateTensor> state() override;

 // Per-step scalars of u, rounded to float once (apex divides by the bias corrections; we multiply
  // by their float reciprocals, which differs by at most an ulp or so).
  struct UpdateCoefs {
    float inv_bc1, inv_bc2, eps, wd;
  };

 private:
  struct MomentCoefs {
    float b1, one_minus_b1, b2, one_minus_b2;
  };
  // One tensor (or, sharded, this rank's piece of it) and its coefficients.
  struct Piece {
    float* w;
    const float* g;
    float* m;
    float* v;
    std::size_t n;
    bool adapt;
    UpdateCoefs c;
  };
  Piece piece(ParamStore& store, std::size_t view, UpdateCoefs c);
  static std::pair<double, double> moments(const Piece& p, const MomentCoefs& k);  // (||w||^2, ||u||^2)
  static void apply(const Piece& p, double scale);
  double trust(bool adapt, double w_sq, double u_sq) const;
  // Whether the decay group's tensors get a trust ratio (see above).
  bool adapts_decay_group() const { return opts_.weight_decay != 0.0 || opts_.trust_without_decay; }

  LambOptions opts_;
  AdamMoments m_;
  std::vector<double> norms_;  // sharded: (||w||^2, ||u||^2) per whole tensor, summed over ranks
};

}  // namespace laconic
