// One micro-batch as the model sees it. Buffers are reused across steps (resized only when the
// batch grows), so filling a batch allocates nothing in the step loop.
#pragma once

#include <cstdint>
#include <vector>

namespace laconic {

struct Batch {
  int size = 0;      // examples in this batch
  int features = 0;  // floats per example in `inputs` (dense inputs, e.g. 784 pixels)
  std::vector<float> inputs;           // size * features, row-major
  std::vector<std::int32_t> targets;   // size class labels (or token ids; -1 = ignore)
};

}  // namespace laconic
