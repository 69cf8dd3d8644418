// The reducers' CUDA kernels (compression/cuda/) over 25M floats (100 MB, about BERT-large's
// gradient), against a device-to-device cudaMemcpy of the same buffer measured in the same run:
//   memcpy         cudaMemcpy D2D of the 25M floats: moves 2 x 100 MB (read + write)
//   bf16 cast      to_bf16: read 4n, write 2n bytes
//   1-bit encode   onebit_encode with error feedback: the scale pass reads x and the residual
//                  (8n), the pack pass reads them again and writes the residual and the bits
//                  (12n + n/8); at least 12n + n/8 must move (one pass is impossible: the scale
//                  needs all of acc before the first residual can be written)
//   1-bit decode   onebit_decode: read n/8, write 4n
//   top-k 1%       topk_exact with error feedback: the fused histogram pass (12n), two refine
//                  passes (4n each; skipped when the threshold is resolved early, counted anyway),
//                  the tile count (4n) and the emit pass (4n, plus 12k for the k indices, values
//                  and zeroed residual entries): 28n + 12k; at least 12n + 8k must move
// Each row: median of REPS timed repetitions (cudaEvents around each, after 3 warm-ups), the
// bytes its passes move, GB/s over those, and that as a fraction of memcpy's GB/s; for top-k and
// 1-bit encode also the GB/s over the minimum bytes (what a single ideal pass would need).
//
//   cuda_reducers_bench [REPS] [FLOATS]     (defaults 20, 25000000)
//
// Target: >= 60% of memcpy's bandwidth for the memory-bound rows. Without a device (or in a
// build without CUDA) it prints "no CUDA device" and exits 0.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"

#if defined(LACONIC_HAVE_CUDA)
#include <cuda_runtime.h>

#include "compression/cuda/reducers_cuda.h"
#include "compression/topk.h"
#include "tests/bench/cuda_timing.h"
#endif

#if defined(LACONIC_HAVE_CUDA)
namespace {

using namespace laconic;
using bench::check;
using bench::median_ms;

// Gradient-like values (as tests/bench/onebit_bench.cpp): smooth, several magnitudes.
std::vector<float> gradient(std::size_t n, float scale) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i)
    g[i] = scale * std::sin(static_cast<float>(i % 100003) * 0.37f) * static_cast<float>(1 + (i * 2654435761u) % 5);
  return g;
}

void row(const char* name, double ms, double bytes, double copy_gbs, double min_bytes = 0) {
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf("%-14s %9.3f %11.1f %9.1f %8.0f%%", name, ms, bytes / 1e6, gbs, 100 * gbs / copy_gbs);
  if (min_bytes > 0) {
    const double min_gbs = min_bytes / (ms * 1e-3) / 1e9;
    std::printf("   min %.1f MB: %.1f GB/s = %.0f%% of memcpy", min_bytes / 1e6, min_gbs, 100 * min_gbs / copy_gbs);
  }
  std::printf("\n");
}

int run(int reps, std::size_t n) {
  namespace rc = reducers_cuda;
  const double fn = static_cast<double>(n);
  DeviceArray<float> x(Device::cuda, n), residual(Device::cuda, n), out(Device::cuda, n);
  x.upload(gradient(n, 1e-3f));
  residual.upload(gradient(n, 1e-4f));
  int dev = 0;
  cudaDeviceProp prop{};
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  std::printf("# %s, %d SMs; %zu floats (%.1f MB), median of %d\n", prop.name, prop.multiProcessorCount, n, 4 * fn / 1e6,
              reps);
  std::printf("%-14s %9s %11s %9s %9s\n", "row", "ms", "MB moved", "GB/s", "of copy");

  const double copy_ms = median_ms(reps, [&] {
    check(cudaMemcpyAsync(out.data(), x.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, 0), "memcpy");
  });
  const double copy_gbs = 8 * fn / (copy_ms * 1e-3) / 1e9;
  row("memcpy", copy_ms, 8 * fn, copy_gbs);

  DeviceArray<std::uint16_t> half(Device::cuda, n);
  row("bf16 cast", median_ms(reps, [&] { rc::to_bf16(half.data(), x.data(), n); }), 6 * fn, copy_gbs);

  const std::size_t bits_bytes = (n + 7) / 8;
  DeviceArray<std::uint8_t> block(Device::cuda, 4 + bits_bytes);
  DeviceArray<double> scratch(Device::cuda, rc::onebit_scratch_doubles());
  const double packed = static_cast<double>(bits_bytes);
  row("1-bit encode",
      median_ms(reps,
                [&] {
                  rc::onebit_encode(block.data(), block.data() + 4, bits_bytes, residual.data(), x.data(), n, false,
                                    scratch.data());
                }),
      20 * fn + packed, copy_gbs, 12 * fn + packed);
  row("1-bit decode",
      median_ms(reps, [&] { rc::onebit_decode(out.data(), n, block.data() + 4, block.data(), 1.0f, false); }),
      4 * fn + packed, copy_gbs);

  const std::size_t k = topk_count(n, 0.01);
  DeviceArray<std::uint32_t> indices(Device::cuda, k);
  DeviceArray<float> values(Device::cuda, k);
  rc::TopKScratch topk_scratch;
  topk_scratch.reserve(n);
  const double fk = static_cast<double>(k);
  row("top-k 1% + ef",
      median_ms(reps,
                [&] { rc::topk_exact(indices.data(), values.data(), residual.data(), x.data(), n, k, topk_scratch); }),
      28 * fn + 12 * fk, copy_gbs, 12 * fn + 8 * fk);
  check(cudaDeviceSynchronize(), "final synchronize");
  return 0;
}

}  // namespace
#endif

int main(int argc, char** argv) {
  if (!laconic::cuda_available()) {
    std::printf("no CUDA device\n");
    return 0;
  }
#if defined(LACONIC_HAVE_CUDA)
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const std::size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 25000000;
  if (reps < 1 || n < 1) {
    std::fprintf(stderr, "usage: cuda_reducers_bench [REPS >= 1] [FLOATS >= 1]\n");
    return 2;
  }
  return run(reps, n);
#else
  (void)argc, (void)argv;
  return 0;
#endif
}
