// CUDA kernels with exactly the signatures of the CPU reference (ops_decl.inc), on device pointers.
// Every function runs on the default (legacy) stream and returns without synchronising; errors
// from the launch are thrown as laconic::Error (sticky asynchronous errors surface at the next
// checked call). This header is plain C++ (no CUDA headers), so host code above ops/ can call
// the kernels without being compiled by nvcc; it is only built when LACONIC_HAVE_CUDA is set.
#pragma once

#include <cstddef>
#include <cstdint>

struct cublasContext;  // cuBLAS's handle type (cublasHandle_t is cublasContext*), without its header

namespace laconic::ops::cuda {
#include "core/ops/ops_decl.inc"


// This thread's cuBLAS handle for the current device (created on first use, plain FP32 math,
// host pointer mode; destroyed when the thread exits). Shared by every CUDA GEMM caller: the
// ops here and PowerSGD's products (compression/cuda).
cublasContext* cublas_handle();
}  // namespace laconic::ops::cuda
