// A trainable model over flat parameters. forward() caches what backward() needs in buffers the
// model owns (grown on first use, reused after: no allocation in the step loop).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "framework/core/batch.h"
#include "framework/core/params.h"
#include "framework/core/step.h"

namespace laconic {

struct ForwardResult {
  float loss = 0.0f;         // mean loss over counted examples
  std::int64_t counted = 0;  // examples (or tokens) not ignored
  std::int64_t correct = 0;  // argmax == target among the counted
};

class Model {
 public:
  virtual ~Model() = default;
  virtual ParamStore& params() = 0;
  // Deterministic initialisation from the seed (same seed -> same parameters bit for bit).
  virtual void init(std::uint64_t seed) = 0;
  virtual ForwardResult forward(const Batch& batch, const ForwardOptions& opts) = 0;
  // Accumulates (+=) the gradient of the last forward()'s mean loss into params().grads().
  virtual void backward() = 0;
  // Training FLOPs per example (forward + backward), for throughput and MFU.
  virtual double flops_per_example() const = 0;
  virtual std::string describe() const = 0;
};

}  // namespace laconic
