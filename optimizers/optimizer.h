// Optimizers update the flat parameter buffer from the flat gradient buffer, view by view, so
// that each tensor's group (decay / no_decay) can be honoured. State lives in flat buffers laid
// out like the parameters, exposed for checkpoints.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/state.h"

namespace laconic {

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
};

}  // namespace laconic
