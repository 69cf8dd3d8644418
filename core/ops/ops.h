// CPU reference kernels (Eigen). The CPU kernel is the specification; ops/cuda has the same
// signatures (ops_decl.inc) and parity tests against these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace laconic::ops::cpu {
#include "core/ops/ops_decl.inc"

// Threads each CPU GEMM may use: OpenBLAS's thread count, which is process-wide (one pool per
// process, shared by every caller). 1 until set, so a program that never sets it runs its GEMMs
// in the calling thread. The trainer sets it from the cores this process may run on divided by
// the ranks it holds (gemm_threads_for). Without OpenBLAS (the Eigen fallback) it is recorded and
// has no effect. n >= 1.
void set_gemm_threads(int n);
int gemm_threads();
// Which CPU GEMM runs: "openblas <core>" (the kernel OpenBLAS picked for this CPU, e.g. SkylakeX
// or Zen: results differ in the last bits between cores) or "eigen".
std::string gemm_library();
}  // namespace laconic::ops::cpu
