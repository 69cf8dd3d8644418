// Global gradient-norm clipping over the flat gradient buffer (all tensors together), with
// torch.nn.utils.clip_grad_norm_ semantics (norm_type 2):
//   n = ||g||_2 over every element (accumulated in double)
//   c = max_norm / (n + 1e-6);  if c < 1: g *= c
// NVIDIA's fused LAMB clips the global gradient norm (to 1.0) before its step; the trainer calls
// clip_grad_norm() on the averaged gradients before Optimizer::step() for any optimizer.
#pragma once

#include <span>

#include "core/device.h"

namespace laconic {

// ||g||_2 of the whole buffer, accumulated in double.
double global_grad_norm(std::span<const float> grads);

// Scales grads in place so that their norm is at most ~max_norm (> 0); returns the norm before
// clipping. A non-finite norm leaves the gradients untouched (torch would multiply them by NaN)
// and is returned as is, for the caller's non-finite guard to act on.
double clip_grad_norm(std::span<float> grads, double max_norm);

// The same clipping when the caller already has the norm of `grads` (one pass fewer).
void clip_to_norm(std::span<float> grads, double norm, double max_norm);

// The same three on a span that lives on `where` (on cuda: device memory, e.g. a cuda
// ParamStore's grads(); fused kernels of optimizers/cuda/, the norm summed in double in a fixed
// order, so it equals the CPU's to double rounding and the scaling is the CPU's bit for bit).
// The norm comes back to the host: the cuda forms synchronise. Also the noise-scale estimator's
// per-worker |g_b|^2 on a device range. On cpu they are the functions above.
double global_grad_norm(std::span<const float> grads, Device where);
double clip_grad_norm(std::span<float> grads, double max_norm, Device where);
void clip_to_norm(std::span<float> grads, double norm, double max_norm, Device where);

}  // namespace laconic
