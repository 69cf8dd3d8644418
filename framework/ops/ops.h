// CPU reference kernels (Eigen). The CPU kernel is the specification; ops/cuda has the same
// signatures (ops_decl.inc) and parity tests against these.
#pragma once

#include <cstddef>
#include <cstdint>

namespace laconic::ops::cpu {
#include "framework/ops/ops_decl.inc"
}  // namespace laconic::ops::cpu
