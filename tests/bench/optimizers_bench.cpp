// Parameters per second of one LAMB and one LARS step over ~25M parameters (BERT-large-like
// shapes: 24 x (1024 x 1024 weight + 1024 bias)); single-threaded, as the optimizers are.
// Run through tests/bench/optimizers.sh, which builds it and puts PyTorch beside it.
//
//   optimizers_bench [REPS]     (timed steps per optimizer after one warm-up step; default 5)
//
// One row per optimizer, Google-Benchmark-like: name, parameters, ms/step (mean and min over
// REPS), parameters/s from the mean. The warm-up step sizes the state (first-touch page faults),
// so the timed steps are the steady state of training.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/rng.h"
#include "optimizers/lamb.h"
#include "optimizers/lars.h"

namespace {

using namespace laconic;

constexpr int kLayers = 24;
constexpr std::int64_t kWidth = 1024;

std::unique_ptr<ParamStore> make_store() {
  auto s = std::make_unique<ParamStore>();
  for (int l = 0; l < kLayers; ++l) {
    s->add("layer" + std::to_string(l) + ".weight", {kWidth, kWidth}, ParamGroup::decay);
    s->add("layer" + std::to_string(l) + ".bias", {kWidth}, ParamGroup::no_decay);
  }
  s->finalize();
  const auto key = rng::key({1, rng::kTest});
  for (std::size_t i = 0; i < s->size(); ++i) {
    s->params()[i] = 0.02f * rng::normal(key, 2 * i);
    s->grads()[i] = 1e-3f * rng::normal(key, 2 * i + 1);
  }
  return s;
}

void bench(const char* name, Optimizer& opt, int reps) {
  auto store = make_store();
  opt.step(*store, 1e-3);  // warm-up: sizes and touches the state
  std::vector<double> secs;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.step(*store, 1e-3);
    secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  double mean = 0;
  for (double s : secs) mean += s / reps;
  const double best = *std::min_element(secs.begin(), secs.end());
  const auto n = static_cast<double>(store->size());
  std::printf("%-8s %-10s %10zu %12.2f %12.2f %14.1f\n", "laconic", name, store->size(), mean * 1e3,
              best * 1e3, n / mean / 1e6);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  std::printf("%-8s %-10s %10s %12s %12s %14s\n", "impl", "optimizer", "params", "ms/step", "min ms",
              "Mparams/s");
  Lamb lamb({});
  bench("lamb", lamb, reps);
  Lars lars({});
  bench("lars", lars, reps);
  return 0;
}
