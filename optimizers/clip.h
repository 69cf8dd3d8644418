// Global gradient-norm clipping over the flat gradient buffer (all tensors together), with
// torch.nn.utils.clip_grad_norm_ semantics (norm_type 2):
//   n = ||g||_2 over every element (accumulated in double)
//   c = max_norm / (n + 1e-6);  if c < 1: g *= c
// NVIDIA's fused LAMB clips the global gradient norm (to 1.0) before its step; the trainer calls
// clip_grad_norm() on the averaged gradients before Optimizer::step() for any optimizer.
#pragma once

#include <span>

namespace laconic {

// ||g||_2 of the whole buffer, accumulated in double.
double global_grad_norm(std::span<const float> grads);

// Scales grads in place so that their norm is at most ~max_norm (> 0); returns the norm before
// clipping. A non-finite norm leaves the gradients untouched (torch would multiply them by NaN)
// and is returned as is, for the caller's non-finite guard to act on.
double clip_grad_norm(std::span<float> grads, double max_norm);

// The same clipping when the caller already has the norm of `grads` (one pass fewer).
void clip_to_norm(std::span<float> grads, double norm, double max_norm);

}  // namespace laconic
