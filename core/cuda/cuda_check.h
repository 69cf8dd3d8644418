// LC_CUDA_CHECK(expr): evaluates a cudaError_t expression once; on failure throws laconic::Error
// "file:line: check `expr` failed: cudaErrorName: description". The one CUDA runtime check of
// every folder (core, ops, optimizers, compression, collectives); cuBLAS's is in ops/cuda.
// Includes the CUDA runtime header, so only CUDA sources (cuda/ folders) include this.
#pragma once

#include <cuda_runtime.h>

#include "core/check.h"

#define LC_CUDA_CHECK(expr)                                                                  \
  do {                                                                                       \
    const cudaError_t lc_cuda_err_ = (expr);                                                 \
    if (lc_cuda_err_ != cudaSuccess) [[unlikely]]                                            \
      ::laconic::detail::throw_check(                                                        \
          __FILE__, __LINE__, #expr,                                                         \
          ::laconic::detail::concat(cudaGetErrorName(lc_cuda_err_), ": ",                    \
                                    cudaGetErrorString(lc_cuda_err_)));                      \
  } while (0)
