// The cuBLAS error check (LC_CUBLAS_CHECK; the runtime's LC_CUDA_CHECK is core's).
// Lives in ops/cuda/ because it includes CUDA headers (CPU headers never do).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/check.h"
#include "core/cuda/cuda_check.h"  // LC_CUDA_CHECK

// LC_CUBLAS_CHECK(expr): the same for a cublasStatus_t expression.
#define LC_CUBLAS_CHECK(expr)                                                                \
  do {                                                                                       \
    const cublasStatus_t lc_cublas_st_ = (expr);                                             \
    if (lc_cublas_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                 \
      ::laconic::detail::throw_check(                                                        \
          __FILE__, __LINE__, #expr,                                                         \
          ::laconic::detail::concat(cublasGetStatusName(lc_cublas_st_), ": ",                \
                                    cublasGetStatusString(lc_cublas_st_)));                  \
  } while (0)

