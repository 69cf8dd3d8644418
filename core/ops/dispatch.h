// One table of kernel pointers per device, so that a layer is written once and runs wherever its
// parameters live: it looks the table up from its ParamStore's device at each call (an array
// index), so moving the store (ParamStore::to) is all it takes to switch a model between devices.
//
//   const ops::Kernels& k = ops::kernels(store.device());
//   k.gemm(y, x, w, rows, out, in, false, true, 1.0f, 0.0f);
//
// The entries have exactly the signatures of ops_decl.inc (taken with decltype from ops::cpu), and
// on cuda every pointer argument must be device memory. Plain C++: no CUDA header.
#pragma once

#include "core/device.h"
#include "core/ops/ops.h"

namespace laconic::ops {

// Every kernel of ops_decl.inc, once. A kernel added there is reachable through Kernels once its
// name is added here (a layer calling k.name fails to compile until then).
#define LACONIC_OPS_KERNELS(X)                                                              \
  X(gemm) X(add_bias) X(bias_grad) X(relu_forward) X(relu_backward) X(gelu_forward)           \
  X(gelu_backward) X(layernorm_forward) X(layernorm_backward) X(embedding_forward)            \
  X(embedding_backward) X(dropout_forward) X(dropout_backward) X(softmax_xent_forward)         \
  X(softmax_xent_backward) X(argmax_rows) X(fill) X(scale) X(axpy) X(gemm_strided_batched)     \
  X(split_heads) X(merge_heads) X(softmax_rows_forward) X(softmax_causal_forward) X(softmax_rows_backward) X(add)        \
  X(scatter_rows) X(iota_mod) X(xent_stats) X(round_bf16)

struct Kernels {
  Device device;
#define LACONIC_OPS_KERNEL_MEMBER(name) decltype(&cpu::name) name;
  LACONIC_OPS_KERNELS(LACONIC_OPS_KERNEL_MEMBER)
#undef LACONIC_OPS_KERNEL_MEMBER
};

// The kernels of device d: ops::cpu for cpu, ops::cuda for cuda. Throws laconic::Error for cuda in
// a build without CUDA.
const Kernels& kernels(Device d);

}  // namespace laconic::ops
