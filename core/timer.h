// Wall-clock stopwatch for metrics (compute_s, comm_s, wall_s).
#pragma once

#include <chrono>

namespace laconic {

class Stopwatch {
 public:
  Stopwatch() : start_(clock::now()) {}
  void reset() { start_ = clock::now(); }
  double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point start_;
};

}  // namespace laconic
