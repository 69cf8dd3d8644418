// Flat parameter storage: every parameter of a model lives in one contiguous buffer and every
// gradient in another of the same layout, with named views (name, offset, shape, group).
// Averaging, optimizers, checksums and checkpoints work on the flat spans; layers address their
// tensors through the view index they got from add().
#pragma once

#include <algorithm>
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

// Where a store's gradients live when it holds no whole gradient buffer: ZeRO-2's staging
// (framework/sync/zero.h), which hands out a bucket's gradients while backward writes them.
class GradWindow {
 public:
  virtual ~GradWindow() = default;
  // The gradients of flat elements [offset, offset + n), which lie in one piece: writable,
  // zero at the piece's first use in a step.
  virtual float* at(std::size_t offset, std::size_t n) = 0;
  // Where the piece holding `offset` ends.
  virtual std::size_t piece_end(std::size_t offset) const = 0;
  virtual void zero() = 0;                  // a new step: no gradient written yet
  virtual std::uint64_t bytes() const = 0;  // what the window holds
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
  float* grad(std::size_t view) {
    const ParamView& v = views_.at(view);
    return window_ ? window_->at(v.offset, v.numel) : grads_.data() + v.offset;
  }
  const float* grad(std::size_t view) const { return grads().data() + views_.at(view).offset; }  // whole only

  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  // The whole gradient buffer: never with a window (a check fails naming it).
  std::span<float> grads() { return whole_grads().span(); }
  std::span<const float> grads() const { return const_cast<ParamStore*>(this)->whole_grads().span(); }
  // f(span) over the gradients of [lo, hi): one span, or one per window piece, in order.
  template <class F>
  void for_grads(std::size_t lo, std::size_t hi, F&& f) {
    if (!window_) return lo < hi ? f(grads_.span().subspan(lo, hi - lo)) : void();
    for (std::size_t at = lo; at < hi;) {
      const std::size_t end = std::min(hi, window_->piece_end(at));
      f(std::span<float>(window_->at(at, end - at), end - at));
      at = end;
    }
  }
  // Backward writes through `w` from now on and the whole buffer is freed (nullptr: it is back,
  // zeroed). Not owned; kept until replaced.
  void stage_grads(GradWindow* w);
  bool grads_staged() const { return window_ != nullptr; }
  std::uint64_t grad_bytes() const { return window_ ? window_->bytes() : grads_.size() * sizeof(float); }

  const std::vector<ParamView>& views() const { return views_; }
  const ParamView& view(std::size_t i) const { return views_.at(i); }
  std::size_t size() const { return total_; }  // elements

  void zero_grad();

 private:
  std::vector<ParamView> views_;
  DeviceArray<float> params_;
  DeviceArray<float>& whole_grads();
  DeviceArray<float> grads_;
  GradWindow* window_ = nullptr;
  std::size_t total_ = 0;
  bool finalized_ = false;
};

}  // namespace laconic
