// Fused multi-tensor CUDA kernels of the optimizers and of gradient clipping, over the flat
// buffers of a ParamStore on the device (all pointers are device pointers, 16-byte aligned as
// cudaMalloc returns them). Each optimizer is one launch over the whole buffer (LARS and LAMB:
// three, for the per-tensor trust ratios), driven by a FusedLayout (optimizers/fused_layout.h).
//
// The CPU loops of optimizers/*.cpp are the specification: the per-step scalars below are the
// floats (and doubles) those loops use, computed there once, and every kernel evaluates the same
// expression in the same order with round-to-nearest intrinsics (no fma contraction), so the
// elementwise results are the CPU's bit for bit; norms are summed in double in another fixed
// order (trust ratios and clipping coefficients agree to double rounding).
//
// Everything runs on the legacy default stream and returns without synchronising, except the
// norm, which returns a host double. Launch errors throw laconic::Error.
// Plain C++ (no CUDA headers), built only with LACONIC_HAVE_CUDA.
#pragma once

#include <cstddef>

#include "optimizers/fused_layout.h"

namespace laconic::optim_cuda {

// sgd.cpp: g = grad + wd * w; b = mu * b + g; d = nesterov ? g + mu * b : b; w -= lr * d.
struct SgdCoefs {
  float lr, mu, wd;  // wd applies to decay tensors only
  bool nesterov;
};
// w, b: [n] updated in place (b = nullptr without momentum); g: [n].
void sgd_step(float* w, float* b, const float* g, const FusedLayout& layout, const SgdCoefs& c);

// adamw.cpp: the floats of AdamW::step.
struct AdamWCoefs {
  float b1, one_minus_b1, b2, one_minus_b2, step_size, bc2_sqrt, eps, decay;
};
// w, m, v: [n] in place; g: [n].
void adamw_step(float* w, float* m, float* v, const float* g, const FusedLayout& layout, const AdamWCoefs& c);

// lars.cpp: per decay tensor trust = eta ||w|| / (||g|| + wd ||w|| + eps) (1 when a norm is 0),
// scale = float(lr * trust) (float(lr) for no_decay); m = mu m + scale (g + wd w); w -= m.
struct LarsCoefs {
  float mu, wd;               // the floats of the update (wd: decay tensors only)
  double lr, eta, wd_d, eps;  // the doubles of the trust ratio
};
// w, m: [n] in place; g: [n]. Uses layout's scratch (hence non-const).
void lars_step(float* w, float* m, const float* g, FusedLayout& layout, const LarsCoefs& c);

// lamb.cpp: moments, then u = (m inv_bc1) / (sqrt(v inv_bc2) + eps) + wd w, per decay tensor
// (when `adapt`; else trust 1) trust = ||w|| / ||u|| (1 when either is 0; clamped to
// [clamp_min, clamp_max] where > 0), w -= float(lr * trust) u.
struct LambCoefs {
  float b1, one_minus_b1, b2, one_minus_b2, inv_bc1, inv_bc2, eps, wd;  // wd: decay tensors only
  bool adapt;  // decay tensors get a trust ratio (Lamb::adapts_decay_group)
  double lr, clamp_min, clamp_max;
};
// w, m, v: [n] in place; g: [n]. Uses layout's scratch.
void lamb_step(float* w, float* m, float* v, const float* g, FusedLayout& layout, const LambCoefs& c);

// sum_i x_i^2 in double over x: [n] (any float alignment), in a fixed order that depends only on
// n and x's alignment: deterministic. Synchronises (the result comes back to the host).
double sum_squares(const float* x, std::size_t n);

// x: [n] *= c (any float alignment).
void scale(float* x, float c, std::size_t n);

// muon.cpp, one hidden matrix [rows, cols] (row-major) with momentum m and gradient g:
// m = mu m + (1 - mu) g; u = nesterov ? (1 - mu) g + mu m : m, written to x as [rows, cols], or as
// its transpose [cols, rows] when `transpose`.
void muon_momentum(float* m, float* x, const float* g, int rows, int cols, float mu, float one_minus_mu, bool nesterov,
                   bool transpose);
// w = w decay - step o, o read as [rows, cols] or, `transpose`, from its transpose [cols, rows].
void muon_apply(float* w, const float* o, int rows, int cols, float decay, float step, bool transpose);

}  // namespace laconic::optim_cuda
