// Top-k selection throughput (compression/topk.h): k = 1% of 25M random normal floats (100 MB),
// single-threaded, beside a memcpy of the same buffer, the bandwidth bound any selection pass
// lives under. Run through tests/bench/topk.sh, which puts torch.topk beside it.
//
//   topk_bench [REPS] [N] [RATIO]     (defaults: 5 timed calls per row, 25'000'000, 0.01)
//
// Rows: memcpy; exact; exact with error feedback (acc = x + residual fused into the first pass,
// the residual carried from call to call as in training); sampled (1% sample); sampled with error
// feedback. Columns: ms per call (mean and min over REPS, after one untimed call that sizes and
// touches every buffer), GB/s of input (4n bytes over the mean), and that as a fraction of memcpy;
// `pairs` is what the last call selected (k = 1% of n for exact, around it for sampled).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "compression/topk.h"
#include "core/rng.h"

namespace {

using namespace laconic;

struct Timing {
  double mean = 0, best = 0;
};

Timing time_it(int reps, const std::function<void()>& fn) {
  fn();  // untimed: first touch, scratch sizing
  std::vector<double> secs;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  Timing t;
  for (double s : secs) t.mean += s / reps;
  t.best = *std::min_element(secs.begin(), secs.end());
  return t;
}

// `sent`: pairs selected by the last call (k for exact; around k for sampled).
void row(const char* op, std::size_t n, std::size_t sent, Timing t, double memcpy_gbs) {
  const double gbs = 4.0 * static_cast<double>(n) / t.mean / 1e9;
  std::printf("%-8s %-12s %10zu %8zu %10.2f %10.2f %8.2f %8.0f%%\n", "laconic", op, n, sent, t.mean * 1e3, t.best * 1e3,
              gbs, memcpy_gbs > 0 ? 100 * gbs / memcpy_gbs : 100.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const std::size_t n = argc > 2 ? static_cast<std::size_t>(std::atoll(argv[2])) : 25'000'000;
  const double ratio = argc > 3 ? std::atof(argv[3]) : 0.01;
  const std::size_t k = topk_count(n, ratio);
  const double fraction = 0.01;

  std::vector<float> x(n), copy(n), residual(n, 0.0f);
  const auto key = rng::key({1, rng::kTest});
  for (std::size_t i = 0; i < n; ++i) x[i] = rng::normal(key, i);
  std::vector<std::uint32_t> idx(topk_sampled_capacity(n, k));
  std::vector<float> val(idx.size());
  TopKScratch scratch;
  scratch.reserve(n, k, fraction);

  std::printf("%-8s %-12s %10s %8s %10s %10s %8s %9s\n", "impl", "op", "n", "pairs", "ms/call", "min ms", "GB/s",
              "%memcpy");
  const Timing mc = time_it(reps, [&] { std::memcpy(copy.data(), x.data(), 4 * n); });
  const double memcpy_gbs = 4.0 * static_cast<double>(n) / mc.mean / 1e9;
  row("memcpy", n, 0, mc, memcpy_gbs);
  std::size_t sent = 0;
  // Each row's timing is taken before its `sent` is read (argument order is unspecified).
  Timing t = time_it(reps, [&] { sent = topk_exact(x, {}, k, idx, val, scratch); });
  row("exact", n, sent, t, memcpy_gbs);
  t = time_it(reps, [&] { sent = topk_exact(x, residual, k, idx, val, scratch); });
  row("exact+ef", n, sent, t, memcpy_gbs);
  std::fill(residual.begin(), residual.end(), 0.0f);
  std::uint64_t seed = 0;
  t = time_it(reps, [&] { sent = topk_sampled(x, {}, k, fraction, ++seed, idx, val, scratch); });
  row("sampled", n, sent, t, memcpy_gbs);
  t = time_it(reps, [&] { sent = topk_sampled(x, residual, k, fraction, ++seed, idx, val, scratch); });
  row("sampled+ef", n, sent, t, memcpy_gbs);
  return 0;
}
