// CPU reference kernels (Eigen). The CPU kernel is the specification; ops/cuda has the same
// signatures (ops_decl.inc) and parity tests against these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace laconic::ops::cpu {
#include "core/ops/ops_decl.inc"

// Threads each CPU GEMM may use. With oneDNN (the default) each calling thread runs its GEMMs on
// an OpenMP team of its own of this many threads, so ranks that share a process never share (or
// wait for) one pool; with OpenBLAS it is OpenBLAS's process-wide count (one pool, shared by every
// caller). 1 until set, so a program that never sets it runs its GEMMs in the calling thread. The
// trainer sets it from the cores this process may run on divided by the ranks it holds
// (gemm_threads_for). With Eigen it is recorded and has no effect. n >= 1.
void set_gemm_threads(int n);
// For a process whose GEMM threads another library drives too (PyTorch under laconic.torch): takes
// the present thread count (OpenMP's for oneDNN, OpenBLAS's pool) as ours and changes nothing, now
// or at the first GEMM, so the threads stay the host's choice.
void keep_gemm_threads();
int gemm_threads();
// Which CPU GEMM runs: "onednn <version> <isa>" (the instruction set oneDNN dispatches to, e.g.
// avx512_core_bf16), "openblas <core>" (the kernel OpenBLAS picked for this CPU, e.g. SkylakeX or
// Haswell) or "eigen". Results differ in the last bits between libraries and kernels.
std::string gemm_library();
}  // namespace laconic::ops::cpu
