// A named flat float buffer of algorithm state (optimizer moments, error-feedback residuals,
// PowerSGD's Q, ...). Whoever owns state exposes every buffer through a state() method returning
// these views, after sizing them; checkpoints write and read the views in place.
#pragma once

#include <span>
#include <string>

#include "core/device.h"

namespace laconic {

struct StateTensor {
  std::string name;
  std::span<float> data;
  Device device = Device::cpu;  // where `data` lives: checkpoints stage device tensors through the host
};

}  // namespace laconic
