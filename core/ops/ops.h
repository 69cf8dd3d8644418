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
// For a process whose OpenBLAS another library drives too (PyTorch under laconic.torch, whose
// GEMMs share the pool): takes OpenBLAS's present thread count as ours and changes nothing, now
// or at the first GEMM, so the threads stay the host's choice.
void keep_gemm_threads();
int gemm_threads();
// Which CPU GEMM runs: "openblas <core>" (the kernel OpenBLAS picked for this CPU, e.g. SkylakeX
// or Zen: results differ in the last bits between cores) or "eigen".
std::string gemm_library();
}  // namespace laconic::ops::cpu
