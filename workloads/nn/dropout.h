// Inverted dropout (Srivastava et al. 2014) with a counter-based mask: the mask is a pure function
// of (seed, rank, step, layer), regenerated in backward instead of stored, and identical on any
// device that implements rng::uniform.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "core/params.h"
#include "core/step.h"

namespace laconic::nn {

struct DropoutOptions {
  int features = 0;
  float p = 0.0f;             // drop probability, in [0, 1)
  std::uint64_t layer_id = 0; // distinguishes the masks of different dropout layers in one model
};

class Dropout {
 public:
  // Runs on the device of `store` (the model's; the layer has no parameters of its own).
  Dropout(const ParamStore& store, const DropoutOptions& opts);

  // key = rng::key({seed, rank, step, rng::kDropout, layer_id}).
  std::uint64_t key(const ForwardOptions& step) const;

  // Whether forward() with `step` masks (training with p > 0), or is the identity.
  bool active(const ForwardOptions& step) const { return step.train && opts_.p > 0.0f; }
  // x: [rows, features] -> y. Outside training (or with p == 0) this is the identity and returns
  // x itself without copying; otherwise y is owned by the layer.
  const float* forward(const float* x, int rows, const ForwardOptions& step);
  // dy -> dx with the same mask and scale (or dy itself when forward was the identity).
  const float* backward(const float* dy);

 private:
  const ParamStore* store_;
  DropoutOptions opts_;
  bool active_ = false;  // whether the last forward applied a mask
  std::uint64_t key_ = 0;
  std::size_t n_ = 0;
  DeviceArray<float> y_;
  DeviceArray<float> dx_;
};

}  // namespace laconic::nn
