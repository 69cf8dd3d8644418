// 1-bit compression throughput over 25M floats (100 MB, about BERT-large's gradient), in one run:
//   memcpy         the same 100 MB copied: the bandwidth the codec is measured against
//   encode+ef      onebit_encode with error feedback (scale pass + sign/residual pass)
//   decode         onebit_decode of the packed bits back to 25M floats
//   encode+decode  the two together: a value's local cost in one compression round
//   reduce N=1     OneBitReducer at world size 1: both phases, collectives as local copies
// all single-threaded, each repetition timing every row in turn (so load from other work on the
// machine falls on all rows alike); then, on N thread ranks (default 4), the 1-bit reduce beside
// the dense fp32 ring all-reduce of the same buffer.
// Run through tests/bench/onebit.sh.
//
//   onebit_bench [REPS] [FLOATS] [RANKS]     (defaults 5, 25000000, 4)
//
// Rows: name, MB of fp32 input, ms (mean and min over REPS), GB/s of input from the min (the
// least disturbed repetition), and that as a fraction of memcpy's GB/s. One untimed warm-up
// repetition first touches every buffer and sizes the reducer's state.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "compression/onebit.h"

namespace {

using namespace laconic;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<float> gradient(std::size_t n, int rank) {
  std::vector<float> g(n);
  for (std::size_t i = 0; i < n; ++i)
    g[i] = 1e-3f * std::sin(static_cast<float>(i % 100003) * 0.37f + static_cast<float>(rank)) *
           static_cast<float>(1 + (i * 2654435761u) % 5);
  return g;
}

struct Row {
  std::string name;
  std::vector<double> secs;
  double min() const { return *std::min_element(secs.begin(), secs.end()); }
  double mean() const {
    double m = 0;
    for (double s : secs) m += s / static_cast<double>(secs.size());
    return m;
  }
};

void print(const Row& r, std::size_t n, double memcpy_gbs) {
  const double mb = 4.0 * static_cast<double>(n) / 1e6, gbs = mb / 1e3 / r.min();
  std::printf("%-18s %8.1f %10.2f %10.2f %8.2f %9.0f%%\n", r.name.c_str(), mb, r.mean() * 1e3, r.min() * 1e3,
              gbs, 100 * gbs / memcpy_gbs);
}

// Times fn on `ranks` thread ranks, REPS times after one warm-up: each repetition starts at a
// barrier and lasts until the slowest rank is done (a second barrier), as seen by rank 0.
Row time_ranks(const std::string& name, int ranks, int reps,
               const std::function<void(Communicator&, std::vector<float>&, std::int64_t)>& fn,
               std::size_t n) {
  Row row{name, {}};
  run_threads(ranks, [&](Communicator& comm) {
    std::vector<float> data = gradient(n, comm.rank());
    for (int r = 0; r <= reps; ++r) {
      comm.barrier();
      const auto t0 = Clock::now();
      fn(comm, data, r);
      comm.barrier();
      if (comm.rank() == 0 && r > 0) row.secs.push_back(seconds_since(t0));
    }
  });
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const std::size_t n = argc > 2 ? static_cast<std::size_t>(std::atoll(argv[2])) : 25'000'000;
  const int ranks = argc > 3 ? std::max(2, std::atoi(argv[3])) : 4;

  const std::vector<float> x = gradient(n, 0);
  std::vector<float> copy(n), error(n, 0.0f), out(n), data(n);
  std::vector<std::uint8_t> bits(onebit_packed_bytes(n));
  OneBitReducer reducer;
  const BucketLayout layout = flat_bucket(n);
  reducer.prepare(std::span(&layout, 1));

  Row rows[5] = {
      {"memcpy", {}}, {"encode+ef", {}}, {"decode", {}}, {"encode+decode", {}}, {"reduce N=1", {}}};
  float scale = 0;
  run_threads(1, [&](Communicator& comm) {  // the calling thread: all rows single-threaded
    for (int r = 0; r <= reps; ++r) {
      auto t0 = Clock::now();
      std::memcpy(copy.data(), x.data(), n * sizeof(float));
      const double t_copy = seconds_since(t0);
      t0 = Clock::now();
      scale = onebit_encode(x, error, bits, OneBitOptions::Scale::l2);
      const double t_encode = seconds_since(t0);
      t0 = Clock::now();
      onebit_decode(bits, scale, out);
      const double t_decode = seconds_since(t0);
      std::memcpy(data.data(), x.data(), n * sizeof(float));  // untimed: the reducer works in place
      t0 = Clock::now();
      reducer.reduce(data, layout, r, comm);
      const double t_reduce = seconds_since(t0);
      if (r == 0) continue;
      rows[0].secs.push_back(t_copy);
      rows[1].secs.push_back(t_encode);
      rows[2].secs.push_back(t_decode);
      rows[3].secs.push_back(t_encode + t_decode);
      rows[4].secs.push_back(t_reduce);
    }
  });
  const double memcpy_gbs = 4.0 * static_cast<double>(n) / 1e9 / rows[0].min();

  std::printf("# %zu floats (%.1f MB) -> %zu bytes of signs + 4 of scale per round; REPS=%d; scale %.3g\n", n,
              4.0 * static_cast<double>(n) / 1e6, bits.size(), reps, static_cast<double>(scale));
  std::printf("%-18s %8s %10s %10s %8s %10s\n", "row", "MB", "ms mean", "ms min", "GB/s", "of memcpy");
  for (const Row& r : rows) print(r, n, memcpy_gbs);
  std::fflush(stdout);

  // The whole algorithm on thread ranks beside the dense ring all-reduce (input GB/s per rank).
  const auto dense_reduce = [](Communicator& comm, std::vector<float>& d, std::int64_t) {
    comm.all_reduce(d, ReduceOp::avg);
  };
  const Row dense = time_ranks("dense ring N=" + std::to_string(ranks), ranks, reps, dense_reduce, n);
  std::vector<OneBitReducer> per_rank(static_cast<std::size_t>(ranks));
  for (auto& red : per_rank) red.prepare(std::span(&layout, 1));
  const Row onebit = time_ranks(
      "1-bit N=" + std::to_string(ranks), ranks, reps,
      [&](Communicator& comm, std::vector<float>& d, std::int64_t step) {
        per_rank[static_cast<std::size_t>(comm.rank())].reduce(d, layout, step, comm);
      },
      n);
  print(dense, n, memcpy_gbs);
  print(onebit, n, memcpy_gbs);
  std::printf("# 1-bit vs dense at N=%d: %.2fx the time (min)\n", ranks, onebit.min() / dense.min());
  return 0;
}
