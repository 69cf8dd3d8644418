// Fused causal attention (core/ops/attention_cpu.h) against the unfused kernels it replaces on CPU
// (nn::MultiHeadSelfAttention's two strided-batched GEMMs around the softmax, and their backward:
// four GEMMs and the softmax's), on THREADS threads (both: the fused kernel's heads, the GEMMs'), at gpt_fortunes' head size (6 heads of 32) and equal
// tokens per call (2048: 16 sequences of 128, 4 of 512, 2 of 1024), in the same run.
//
//   attention_bench [--threads N] [REPS] [T...]   (defaults: 1 thread; 10 timed calls per row;
//                                                  T = 128 512 1024)
//
// Columns: T, causal or not, forward and backward ms per call (mean over REPS after one untimed
// call) of each, unfused / fused, and the [B, H, T, T] buffers the unfused path keeps (probabilities
// and their gradient) that the fused one does not.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/ops/attention_cpu.h"
#include "core/ops/ops.h"
#include "core/rng.h"
#include "core/timer.h"

namespace {

using namespace laconic;

template <typename F>
double ms_per_call(int reps, F&& f) {
  f();  // untimed: first touch
  Stopwatch t;
  for (int r = 0; r < reps; ++r) f();
  return 1e3 * t.seconds() / reps;
}

void row(int threads, int reps, int seq, bool causal) {
  constexpr int kTokens = 2048, kHeads = 6, kD = 32;
  const int batch = std::max(1, kTokens / seq), bh = batch * kHeads;
  const std::size_t n = static_cast<std::size_t>(bh) * seq * kD, tt = static_cast<std::size_t>(seq) * seq;
  const std::int64_t td = static_cast<std::int64_t>(seq) * kD, stt = static_cast<std::int64_t>(tt);
  std::vector<float> q(n), k(n), v(n), out(n), dout(n), dq(n), dk(n), dv(n), mx(bh * seq), inv(bh * seq);
  std::uint64_t stream = 0;
  for (auto* x : {&q, &k, &v, &dout}) {
    const std::uint64_t key = rng::key({1, static_cast<std::uint64_t>(seq), ++stream});
    for (std::size_t i = 0; i < x->size(); ++i) (*x)[i] = rng::normal(key, i);
  }
  const ops::cpu::AttentionShape sh{bh, seq, kD, 1.0f / std::sqrt(static_cast<float>(kD)), causal, threads};
  std::vector<float> scratch(ops::cpu::attention_scratch_floats(sh)), p(bh * tt), dp(bh * tt);

  const double ff = ms_per_call(reps, [&] {
    ops::cpu::attention_forward(out.data(), mx.data(), inv.data(), q.data(), k.data(), v.data(), sh, scratch.data());
  });
  const double fb = ms_per_call(reps, [&] {
    ops::cpu::attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), mx.data(),
                                 inv.data(), sh, scratch.data());
  });
  const double uf = ms_per_call(reps, [&] {
    ops::cpu::gemm_strided_batched(p.data(), q.data(), k.data(), seq, seq, kD, false, true, sh.scale, 0.0f, bh, stt, td,
                                   td);
    if (causal)
      ops::cpu::softmax_causal_forward(p.data(), p.data(), bh * seq, seq);
    else
      ops::cpu::softmax_rows_forward(p.data(), p.data(), bh * seq, seq);
    ops::cpu::gemm_strided_batched(out.data(), p.data(), v.data(), seq, kD, seq, false, false, 1.0f, 0.0f, bh, td, stt,
                                   td);
  });
  const double ub = ms_per_call(reps, [&] {
    ops::cpu::gemm_strided_batched(dp.data(), dout.data(), v.data(), seq, seq, kD, false, true, 1.0f, 0.0f, bh, stt, td,
                                   td);
    ops::cpu::gemm_strided_batched(dv.data(), p.data(), dout.data(), seq, kD, seq, true, false, 1.0f, 0.0f, bh, td, stt,
                                   td);
    ops::cpu::softmax_rows_backward(dp.data(), dp.data(), p.data(), bh * seq, seq);
    ops::cpu::gemm_strided_batched(dq.data(), dp.data(), k.data(), seq, kD, seq, false, false, sh.scale, 0.0f, bh, td,
                                   stt, td);
    ops::cpu::gemm_strided_batched(dk.data(), dp.data(), q.data(), seq, kD, seq, true, false, sh.scale, 0.0f, bh, td,
                                   stt, td);
  });
  std::printf("%6d %-7s %10.2f %10.2f %12.2f %12.2f %10.2f %10.2f %10.2f %9.1f\n", seq, causal ? "causal" : "full", ff, fb,
              uf, ub, uf / ff, ub / fb, (uf + ub) / (ff + fb), 2.0 * bh * tt * sizeof(float) / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, first = 1;
  if (argc > 2 && std::string(argv[1]) == "--threads") {
    threads = std::atoi(argv[2]);
    first = 3;
  }
  const int reps = argc > first ? std::atoi(argv[first]) : 10;
  std::vector<int> seqs;
  for (int i = first + 1; i < argc; ++i) seqs.push_back(std::atoi(argv[i]));
  if (seqs.empty()) seqs = {128, 512, 1024};
  if (reps < 1 || threads < 1) {
    std::fprintf(stderr, "usage: attention_bench [--threads N >= 1] [REPS >= 1] [T...]\n");
    return 2;
  }
  ops::cpu::set_gemm_threads(threads);
  std::printf("# %d thread(s); 2048 tokens per call, 6 heads of 32; ms per call; GEMM: %s\n",
              threads, ops::cpu::gemm_library().c_str());
  std::printf("%6s %-7s %10s %10s %12s %12s %10s %10s %10s %9s\n", "T", "mask", "fused fwd", "fused bwd", "unfused fwd",
              "unfused bwd", "fwd x", "bwd x", "total x", "[T,T] MB");
  for (const int seq : seqs) {
    if (seq < 1) {
      std::fprintf(stderr, "attention_bench: T=%d, expected >= 1\n", seq);
      return 2;
    }
    for (const bool causal : {true, false}) row(threads, reps, seq, causal);
  }
  return 0;
}
