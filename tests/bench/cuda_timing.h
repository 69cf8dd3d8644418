// What the GPU benchmarks share: failing loudly on a CUDA error, and the median time of a
// repeated operation measured with events on the default stream (where every Laconic kernel and
// copy runs). Only included by cuda_*_bench.cpp, which are built only with CUDA.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

namespace laconic::bench {

// A benchmark has nothing to recover: print the runtime's message and exit 1.
inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "error: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Median milliseconds of fn over reps, after 3 untimed calls (sizing, first touch, uploads).
inline double median_ms(int reps, const std::function<void()>& fn) {
  for (int w = 0; w < 3; ++w) fn();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms(static_cast<std::size_t>(std::max(1, reps)));
  for (float& m : ms) {
    check(cudaEventRecord(start, 0), "cudaEventRecord");
    fn();
    check(cudaEventRecord(stop, 0), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&m, start, stop), "cudaEventElapsedTime");
  }
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  std::sort(ms.begin(), ms.end());
  return ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
}

}  // namespace laconic::bench
