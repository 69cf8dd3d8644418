// Flat parameter storage: every parameter of a model lives in one contiguous buffer and every
// gradient in another of the same layout, with named views (name, offset, shape, group).
// Averaging, optimizers, checksums and checkpoints work on the flat spans; layers address their
// tensors through the view index they got from add().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/device.h"

namespace laconic {

// Which optimizer treatment a tensor gets. Weights decay (and later get LARS/LAMB trust-ratio
// adaptation); biases and normalisation gains/shifts do not (Goyal et al. 2017; You et al. 2017).
enum class ParamGroup { decay, no_decay };

struct ParamView {
  std::string name;
  std::size_t offset = 0;  // in elements, into params() and grads()
  std::size_t numel = 0;
  std::vector<std::int64_t> shape;
  ParamGroup group = ParamGroup::decay;
};

class ParamStore {
 public:
  // Declares a tensor; only before finalize(). Returns its view index. InputError when the
  // element count overflows.
  std::size_t add(std::string name, std::vector<std::int64_t> shape, ParamGroup group);
  // Allocates the two flat buffers (zeroed) on the host. Called once, after the last add().
  // InputError when they would not fit in the machine's memory (the recipe's sizes are wrong).
  void finalize();
  bool finalized() const { return finalized_; }
  // Moves both buffers to device d (models initialise on the host, then move). Pointers and
  // spans taken before are invalid after a move. On cuda, param()/grad()/params()/grads() are
  // device pointers: only kernels and device copies may touch them.
  void to(Device d);
  Device device() const { return params_.device(); }

  float* param(std::size_t view) { return params_.data() + views_.at(view).offset; }
  const float* param(std::size_t view) const { return params_.data() + views_.at(view).offset; }
  float* grad(std::size_t view) { return grads_.data() + views_.at(view).offset; }
  const float* grad(std::size_t view) const { return grads_.data() + views_.at(view).offset; }

  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  std::span<const float> grads() const { return grads_.span(); }

  const std::vector<ParamView>& views() const { return views_; }
  const ParamView& view(std::size_t i) const { return views_.at(i); }
  std::size_t size() const { return total_; }  // elements

  void zero_grad();

 private:
  std::vector<ParamView> views_;
  DeviceArray<float> params_;
  DeviceArray<float> grads_;
  std::size_t total_ = 0;
  bool finalized_ = false;
};

}  // namespace laconic
