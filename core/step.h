// Where in a run a forward pass happens: what stochastic layers (dropout) key their randomness
// on, so masks are a pure function of (seed, rank, step) and replay exactly on resume.
#pragma once

#include <cstdint>

namespace laconic {

struct ForwardOptions {
  bool train = true;         // dropout on/off
  std::uint64_t seed = 0;
  int rank = 0;
  std::int64_t step = 0;     // micro-step index (step * grad_accum + micro)
};

}  // namespace laconic
