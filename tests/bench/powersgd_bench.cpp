// PowerSGD's local work on one 4096 x 4096 fp32 gradient at rank 4, world size 1 (so the P and
// Q all-reduces are no-ops and only computation is timed): M += error, P = M Q, orthogonalize,
// Q = M^T P, M <- P Q^T, error update. Beside it, the "three-pass memory floor": the method
// must read M for P, read it again for Q and write it (and the error) for P Q^T, so it cannot
// beat three passes over 64 MB; we time three memcpy's of the matrix in the same run.
// Run through tests/bench/powersgd.sh, which puts the PyTorch hook's ops beside it.
//
//   powersgd_bench [REPS]     (timed steps after one warm-up step; default 10)
//
// Rows: name, ms/step (mean and min over REPS) and the mean's ratio to the floor's mean. The
// per-pass rows time the same kernels one at a time (pure functions, no reducer).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "compression/powersgd.h"
#include "core/rng.h"

namespace {

using namespace laconic;

constexpr std::size_t kRows = 4096, kCols = 4096;
constexpr int kRank = 4;

struct Timing {
  double mean = 0, best = 0;
};

// Runs body REPS times after one untimed warm-up; `setup` (untimed) runs before each.
Timing time_it(int reps, const std::function<void()>& setup, const std::function<void()>& body) {
  setup();
  body();
  std::vector<double> secs;
  for (int r = 0; r < reps; ++r) {
    setup();
    const auto t0 = std::chrono::steady_clock::now();
    body();
    secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  Timing t;
  for (double s : secs) t.mean += s / reps;
  t.best = *std::min_element(secs.begin(), secs.end());
  return t;
}

void row(const char* what, Timing t, double floor_ms) {
  std::printf("%-8s %-34s %10.2f %10.2f %8.2fx\n", "laconic", what, t.mean * 1e3, t.best * 1e3,
              t.mean * 1e3 / floor_ms);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  const std::size_t n = kRows * kCols;
  std::vector<float> grad(n), data(n), copy(n);
  const auto key = rng::key({1, rng::kTest});
  for (std::size_t i = 0; i < n; ++i) grad[i] = 1e-3f * rng::normal(key, i);

  std::printf("%-8s %-34s %10s %10s %9s\n", "impl", "what (4096x4096 fp32, rank 4)", "ms/step", "min ms",
              "/floor");
  const Timing floor = time_it(
      reps, [] {},
      [&] {
        for (int pass = 0; pass < 3; ++pass) std::memcpy(pass % 2 ? data.data() : copy.data(), grad.data(), n * 4);
      });
  const double floor_ms = floor.mean * 1e3;
  row("three-pass floor (3 x memcpy 64 MB)", floor, floor_ms);

  // The reducer itself: one bucket, one tensor, compressed from step 0.
  BucketLayout layout;
  layout.size = n;
  layout.tensors.push_back(TensorShape{0, kRows, kCols});
  PowerSgdReducer red({.rank = kRank, .start_iter = 0});
  red.prepare(std::span(&layout, 1));
  std::int64_t step = 0;
  run_threads(1, [&](Communicator& comm) {
    const Timing t = time_it(
        reps, [&] { std::memcpy(data.data(), grad.data(), n * 4); },
        [&] { red.reduce(data, layout, step++, comm); });
    row("reduce (world size 1)", t, floor_ms);
  });

  // The passes one at a time, on the reducer's error (non-zero after the steps above).
  std::span<float> error;
  for (const StateTensor& s : red.state())
    if (s.name == "powersgd.error.0") error = s.data;
  std::vector<float> q(kCols * kRank), qt(kRank * kCols), p(kRows * kRank), scratch(kCols);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = rng::normal(key, n + i);
  const std::vector<float> err0(error.begin(), error.end());
  auto reset = [&] {
    std::memcpy(data.data(), grad.data(), n * 4);
    std::copy(err0.begin(), err0.end(), error.begin());
  };
  row("pass 1: M += error, P = M Q", time_it(reps, reset, [&] {
        powersgd::orthogonalize(q, kCols, kRank, 0.0f);
        powersgd::transpose(q, kCols, kRank, qt);
        powersgd::compute_p(data, error, kRows, kCols, qt, kRank, p);
      }),
      floor_ms);
  row("pass 2: orthogonalize P, Q = M^T P", time_it(reps, reset, [&] {
        powersgd::orthogonalize(p, kRows, kRank, 0.0f);
        powersgd::compute_qt(data, kRows, kCols, p, kRank, qt);
      }),
      floor_ms);
  row("pass 3: M = P Q^T, error = M - P Q^T", time_it(reps, reset, [&] {
        powersgd::decompress(data, error, kRows, kCols, p, qt, kRank, scratch);
      }),
      floor_ms);
  return 0;
}
