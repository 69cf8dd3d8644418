// The CPU's arithmetic peak, measured: the rate of back-to-back independent fused multiply-adds
// on the widest vectors the core has (AVX-512, else AVX2+FMA), and of AVX512-BF16 dot products
// (VDPBF16PS) where the core has them. What a GEMM could reach at most on this machine, so a step
// benchmark can say what fraction of it a step achieves (model FLOP utilisation) rather than only
// how it compares with another library on the same cores.
#pragma once

#include <string>

namespace laconic::ops::cpu {

struct CpuPeak {
  std::string isa;         // "avx512", "avx2" or "scalar": the fp32 probe's vectors
  double fp32_gflops = 0;  // per thread: 2 flops per lane per FMA
  double bf16_gflops = 0;  // per thread: 4 flops per fp32 lane per VDPBF16PS; 0 without AVX512-BF16
  int threads = 1;         // the probes ran on this many threads at once; *_total below sum them
  double fp32_total_gflops = 0;
  double bf16_total_gflops = 0;
};

// Runs each probe for about `seconds` (the best of several rounds) on `threads` threads at once
// (each its own probe, as ranks or GEMM threads would). threads >= 1, seconds > 0.
CpuPeak measure_cpu_peak(int threads = 1, double seconds = 0.2);

}  // namespace laconic::ops::cpu
