#include "core/ops/cpu_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/timer.h"

namespace laconic::ops::cpu {
namespace {

// Twelve independent accumulators: enough to cover the FMA latency (4 cycles) on two ports.
constexpr int kChains = 12;
constexpr long kBlock = 1 << 14;  // iterations between clock reads

// The lanes' sum through memory (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized in its header).
__attribute__((target("avx512f"))) float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

// Each probe returns flops per second and writes its accumulators' sum to `sink`, so the loop is
// not dead code; the multiplier below 1 keeps every value finite and normal.
__attribute__((target("avx512f"))) double probe_avx512(double seconds, float* sink) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-3f);
  long iters = 0;
  const Stopwatch clock;
  double t = 0;
  while (t < seconds) {
    for (long r = 0; r < kBlock; ++r)
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    iters += kBlock;
    t = clock.seconds();
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink = lane_sum(s);
  return static_cast<double>(iters) * kChains * 16 * 2 / t;
}

__attribute__((target("avx512f,avx512bf16"))) double probe_bf16(double seconds, float* sink) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  const __m512 half = _mm512_set1_ps(1e-3f);
  const __m512bh a = _mm512_cvtne2ps_pbh(half, half), b = _mm512_cvtne2ps_pbh(half, half);
  long iters = 0;
  const Stopwatch clock;
  double t = 0;
  while (t < seconds) {
    for (long r = 0; r < kBlock; ++r)
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    iters += kBlock;
    t = clock.seconds();
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  *sink = lane_sum(s);
  return static_cast<double>(iters) * kChains * 16 * 4 / t;
}

__attribute__((target("avx2,fma"))) double probe_avx2(double seconds, float* sink) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-3f);
  long iters = 0;
  const Stopwatch clock;
  double t = 0;
  while (t < seconds) {
    for (long r = 0; r < kBlock; ++r)
#pragma GCC unroll 12
      for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
    iters += kBlock;
    t = clock.seconds();
  }
  float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_storeu_ps(out, s);
  *sink = out[0];
  return static_cast<double>(iters) * kChains * 8 * 2 / t;
}

// The best of three rounds on each of `threads` threads started together: per-thread mean, sum.
template <class Probe>
std::pair<double, double> run(Probe probe, int threads, double seconds) {
  double best_each = 0, best_total = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<double> rate(threads);
    std::vector<float> sink(threads);
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back([&, t] { rate[t] = probe(seconds, &sink[t]); });
    rate[0] = probe(seconds, &sink[0]);
    for (auto& th : pool) th.join();
    double total = 0;
    for (double r : rate) total += r;
    best_total = std::max(best_total, total);
    best_each = std::max(best_each, total / threads);
  }
  return {best_each / 1e9, best_total / 1e9};
}

}  // namespace

CpuPeak measure_cpu_peak(int threads, double seconds) {
  LC_CHECK(threads >= 1 && seconds > 0, "measure_cpu_peak: expected threads >= 1 and seconds > 0, got ", threads,
           " and ", seconds);
  CpuPeak p;
  p.threads = threads;
  __builtin_cpu_init();
  const double each = seconds / 3;
  if (__builtin_cpu_supports("avx512f")) {
    p.isa = "avx512";
    std::tie(p.fp32_gflops, p.fp32_total_gflops) = run(probe_avx512, threads, each);
    if (__builtin_cpu_supports("avx512bf16"))
      std::tie(p.bf16_gflops, p.bf16_total_gflops) = run(probe_bf16, threads, each);
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.isa = "avx2";
    std::tie(p.fp32_gflops, p.fp32_total_gflops) = run(probe_avx2, threads, each);
  } else {
    p.isa = "scalar";
  }
  return p;
}

}  // namespace laconic::ops::cpu
