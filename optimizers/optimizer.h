// Optimizers update the flat parameter buffer from the flat gradient buffer, view by view, so
// that each tensor's group (decay / no_decay) can be honoured. State lives in flat buffers laid
// out like the parameters, exposed for checkpoints.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/state.h"

namespace laconic {

// Whole-tensor sums under sharded optimizer state (sync.shard, docs/sharding.md): a rank steps only
// its range of the flat buffers, so one tensor may be cut between two ranks. An optimizer that needs
// a per-tensor norm (LAMB's, LARS's trust ratios) writes its pieces' partial sums at their whole
// tensor's index and sum() adds every rank's: partial sums on the wire, never the tensors.
class TensorSums {
 public:
  virtual ~TensorSums() = default;
  virtual std::size_t tensors() const = 0;  // the whole model's tensors
  // The whole tensor that view v of the stepped store is (a piece of).
  virtual std::size_t tensor_of(std::size_t view) const = 0;
  // Adds `values` over the ranks sharing the model, in place; every rank gets the same bits.
  virtual void sum(std::span<double> values) = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update with learning rate lr; reads store.grads(), writes store.params().
  virtual void step(ParamStore& store, double lr) = 0;
  virtual std::string describe() const = 0;
  // Sizes every state buffer for `store` (zero-filled) unless it already has that size. step()
  // calls it; a checkpoint loader calls it on a fresh optimizer before writing into state(), so
  // that state() then exposes buffers of the right size. Stateless optimizers keep the default.
  virtual void prepare(const ParamStore& /*store*/) {}
  // Every buffer of state, for saving and loading (checkpoints write and read these in place).
  virtual std::vector<StateTensor> state() = 0;
  // Sharded state: step() then sees this rank's shard, and per-tensor quantities come whole
  // through `sums` (null: the store holds every tensor whole). Element-wise optimizers ignore it.
  virtual void set_tensor_sums(TensorSums* sums) { sums_ = sums; }

 protected:
  TensorSums* sums_ = nullptr;
};

}  // namespace laconic
