// Muon (Jordan et al. 2024, github.com/KellerJordan/Muon; Liu et al. 2025, "Muon is Scalable for
// LLM Training", arXiv 2502.16982, "Moonlight"): momentum orthogonalised per 2-D hidden weight
// matrix, AdamW for every other tensor.
//
// Which tensors: those the model declares ParamKind::hidden_matrix (core/params.h): every
// nn::Linear weight except a model's output head. Embedding tables, the output head (the MLP's
// classifier; the GPT's and BERT's heads are tied to the token embedding) and every 1-D tensor
// (biases, LayerNorm gains and shifts) get AdamW with optimizer.beta1/beta2/eps/weight_decay and
// the same learning rate, as Moonlight does (its scale below matches the two groups' update RMS).
//
// Per hidden matrix W [rows, cols] with gradient G and momentum buffer B (starting at 0), the
// reference's current form (muon.py's muon_update: buf.lerp_(grad, 1 - mu), grad.lerp_(buf, mu)):
//   B = mu * B + (1 - mu) * G
//   U = nesterov ? (1 - mu) * G + mu * B : B
//   O = NS5(U)
//   W = W * (1 - lr * wd) - lr * 0.2 * sqrt(max(rows, cols)) * O      (decoupled decay first)
// NS5 (newton_schulz below) normalises X = U / (||U||_F + 1e-7), works on X^T when rows > cols
// (so that X X^T is the smaller Gram matrix), and iterates `ns_steps` times the quintic
//   A = X X^T;  X = a X + (b A + c A A) X,   (a, b, c) = (3.4445, -4.7750, 2.0315),
// which drives every singular value of X towards 1 (into about [0.68, 1.13] after 5 steps), so O
// is about U's orthogonal factor. The lerp form's B is (1 - mu) times the B = mu B + G of SGD
// momentum (Moonlight's form); NS5 normalises U, so the two differ only through the 1e-7.
// The scale 0.2 * sqrt(max(rows, cols)) is Moonlight's: O's RMS is about 1/sqrt(max(rows, cols)),
// so the update's RMS is about 0.2, AdamW's typical update RMS, and the same lr and weight decay
// serve both groups. (Jordan's reference scales by sqrt(max(1, rows / cols)) instead and needs
// an lr of its own for the matrices.)
// The reference iterates in bf16 on the GPU; this runs in fp32, with ||U||_F^2 summed in double:
// on the host through the project's CPU GEMM (ops::cpu::gemm), on the GPU (a store on cuda)
// through cuBLAS (ops::cuda::gemm) with the momentum and the update as kernels of
// optimizers/cuda/fused.h and the AdamW group as AdamW's fused kernel over the other tensors. The
// two agree to the GEMMs' rounding (tests/cuda/test_optimizers_cuda.cpp, MuonMatchesCpu).
//
// State: "exp_avg" (Adam's m, and Muon's B at hidden matrices), "exp_avg_sq" (Adam's v; zero at
// hidden matrices) and "step" (Adam's bias correction), laid out like the parameters on the
// store's device: the state of AdamW, so checkpoints save and restore it the same way.
#pragma once

#include <string>
#include <vector>

#include "optimizers/adam_moments.h"
#include "optimizers/adamw.h"
#include "optimizers/optimizer.h"

namespace laconic {

// [optimizer.muon] (registered section; the AdamW group's options are optimizer.*).
struct MuonOptions {
  double momentum = 0.95;  // mu
  bool nesterov = true;
  int ns_steps = 5;

  bool operator==(const MuonOptions&) const = default;
};

// The quintic Newton-Schulz iteration's coefficients (Jordan et al.'s reference).
inline constexpr float kNewtonSchulzA = 3.4445f, kNewtonSchulzB = -4.7750f, kNewtonSchulzC = 2.0315f;

// NS5 of x [s, l] (row-major, s <= l): normalises x by ||x||_F + 1e-7, then `steps` iterations,
// ping-ponging between x and next [s, l]; a and b are [s, s] scratch, all on `device` (the GPU:
// cuBLAS's GEMMs, the norm summed in double there and brought back, one synchronisation).
// Returns whichever of x and next holds the result. Allocates nothing.
float* newton_schulz(float* x, float* next, float* a, float* b, int s, int l, int steps, Device device = Device::cpu);

class Muon final : public Optimizer {
 public:
  // adamw: the other tensors' options; its weight_decay is also the hidden matrices' decay.
  Muon(MuonOptions opts, AdamWOptions adamw);
  void step(ParamStore& store, double lr) override;
  std::string describe() const override;
  void prepare(const ParamStore& store) override;
  std::vector<StateTensor> state() override;

 private:
  MuonOptions opts_;
  AdamWOptions adamw_;
  AdamMoments m_;
  // NS5's buffers on the store's device, sized in prepare() for the largest hidden matrix:
  // x, next [s*l], a, b [s*s].
  DeviceArray<float> x_, next_, a_, b_;
  std::vector<ParamView> adam_views_;  // the AdamW group on the device (its fused layout: m_.layout)
  void step_cuda(ParamStore& store, double lr);
};

}  // namespace laconic
