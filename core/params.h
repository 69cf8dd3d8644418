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

// Which tensors Muon orthogonalises (optimizers/muon.h): the 2-D weights that map features to
// features inside the network (every nn::Linear weight except a model's output head). Embedding
// tables, the output head and every 1-D tensor are `other` (AdamW under Muon): the split of
// Jordan et al.'s and Moonlight's reference implementations.
enum class ParamKind { other, hidden_matrix };

struct ParamView {
  std::string name;
  std::size_t offset = 0;  // in elements, into params() and grads()
  std::size_t numel = 0;
  std::vector<std::int64_t> shape;
  ParamGroup group = ParamGroup::decay;
  ParamKind kind = ParamKind::other;
};

class ParamStore {
 public:
  // Declares a tensor; only before finalize(). Returns its view index. InputError when the
  // element count overflows. A hidden_matrix has two dimensions.
  std::size_t add(std::string name, std::vector<std::int64_t> shape, ParamGroup group,
                  ParamKind kind = ParamKind::other);
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
