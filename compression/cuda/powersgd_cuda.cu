// PowerSGD's pieces on the device (compression/powersgd.h is the specification).
//   - The three products (P = M Q, Q = M^T P, M = P Q^T) are cuBLAS SGEMMs in plain FP32 math
//     (no TF32: see core/ops/cuda/ops_cuda.cu), on the row-major buffers as they are: a
//     row-major a x b matrix is a column-major b x a one, so no transposes are materialised.
//   - Orthogonalization is one thread block per matrix, the CPU's algorithm step for step
//     (modified Gram-Schmidt for rank <= 2, LAPACK sgeqr2 + sorg2r Householder QR above), with the
//     CPU's double accumulations as fixed-order block sums. Thread t owns rows t, t + 256, ...:
//     every elementwise update touches only the owner's rows, so the only cross-thread traffic is
//     the block sums and the diagonal element read at each Householder step.
// Float operations are written with explicit rounding intrinsics (__fmul_rn, ...) so nvcc does
// not contract them into FMAs the CPU (built with -ffp-contract=off) does not use.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <vector>

#include "compression/cuda/common.cuh"
#include "compression/cuda/reducers_cuda.h"
#include "core/ops/cuda/ops_cuda.h"  // the shared cuBLAS handle

namespace laconic::reducers_cuda {
namespace {

using detail::check_launch;

constexpr int kOrthoThreads = 256;
constexpr int kMaxCols = 256;  // powersgd.cpp's kMaxQrCols

int dim(std::size_t v) {
  LC_CHECK(v <= static_cast<std::size_t>(INT_MAX), "PowerSGD matrix dimension ", v, " exceeds cuBLAS's int");
  return static_cast<int>(v);
}

__device__ __forceinline__ double prod(float a, float b) {
  return __dmul_rn(static_cast<double>(a), static_cast<double>(b));
}

// Modified Gram-Schmidt (powersgd::gram_schmidt): column i /= (|column i| + eps), a zero column
// stays zero, then removed from the later columns.
__device__ void gram_schmidt(float* a, std::uint32_t rows, std::uint32_t cols, float eps, double* scratch) {
  for (std::uint32_t i = 0; i < cols; ++i) {
    double ss = 0.0;
    for (std::uint32_t l = threadIdx.x; l < rows; l += blockDim.x) ss = __dadd_rn(ss, prod(a[l * cols + i], a[l * cols + i]));
    ss = detail::block_sum<kOrthoThreads>(ss, scratch);
    const auto norm = static_cast<float>(__dsqrt_rn(ss));
    const float d = eps == 0.0f ? norm : __fadd_rn(norm, eps);
    if (d != 0.0f)
      for (std::uint32_t l = threadIdx.x; l < rows; l += blockDim.x) a[l * cols + i] = __fdiv_rn(a[l * cols + i], d);
    for (std::uint32_t j = i + 1; j < cols; ++j) {
      double dot = 0.0;
      for (std::uint32_t l = threadIdx.x; l < rows; l += blockDim.x) dot = __dadd_rn(dot, prod(a[l * cols + i], a[l * cols + j]));
      const auto s = static_cast<float>(detail::block_sum<kOrthoThreads>(dot, scratch));
      for (std::uint32_t l = threadIdx.x; l < rows; l += blockDim.x)
        a[l * cols + j] = __fsub_rn(a[l * cols + j], __fmul_rn(s, a[l * cols + i]));
    }
  }
}

// LAPACK's slarf from the left with reflector i (v = a[i.., i], v[0] = 1 implied) on columns
// i+1.. of rows i..: w = a[i, j] + sum_{l > i} a[l, i] a[l, j] in double, t = -tau w, then
// a[i, j] += t and a[l, j] += a[l, i] t. Row i's term enters the sum from its owner thread.
__device__ void apply_reflector(float* a, std::uint32_t rows, std::uint32_t cols, std::uint32_t i, float tau,
                                double* scratch) {
  if (tau == 0.0f) return;
  for (std::uint32_t j = i + 1; j < cols; ++j) {
    double w = 0.0;
    for (std::uint32_t l = threadIdx.x; l < rows; l += blockDim.x) {
      if (l == i) w = __dadd_rn(w, static_cast<double>(a[l * cols + j]));
      else if (l > i) w = __dadd_rn(w, prod(a[l * cols + i], a[l * cols + j]));
    }
    w = detail::block_sum<kOrthoThreads>(w, scratch);
    const float t = __fmul_rn(-tau, static_cast<float>(w));
    for (std::uint32_t l = threadIdx.x; l < rows; l += blockDim.x) {
      if (l == i) a[l * cols + j] = __fadd_rn(a[l * cols + j], t);
      else if (l > i) a[l * cols + j] = __fadd_rn(a[l * cols + j], __fmul_rn(a[l * cols + i], t));
    }
  }
}

// powersgd::householder_qr: sgeqr2, then sorg2r building Q in place.
__device__ void householder(float* a, std::uint32_t rows, std::uint32_t cols, double* scratch, float* tau) {
  for (std::uint32_t i = 0; i < cols; ++i) {
    __syncthreads();  // the diagonal element's owner has finished updating it
    const float alpha = a[i * cols + i];
    double ss = 0.0;
    for (std::uint32_t l = threadIdx.x; l < rows; l += blockDim.x)
      if (l > i) ss = __dadd_rn(ss, prod(a[l * cols + i], a[l * cols + i]));
    ss = detail::block_sum<kOrthoThreads>(ss, scratch);  // also: every thread has read alpha
    const auto xnorm = static_cast<float>(__dsqrt_rn(ss));
    float t = 0.0f;
    if (xnorm != 0.0f) {  // otherwise H = I (tau 0): R's diagonal keeps alpha's sign
      const float beta = -copysignf(static_cast<float>(hypot(static_cast<double>(alpha), static_cast<double>(xnorm))), alpha);
      t = __fdiv_rn(__fsub_rn(beta, alpha), beta);
      const float scale = __fdiv_rn(1.0f, __fsub_rn(alpha, beta));
      for (std::uint32_t l = threadIdx.x; l < rows; l += blockDim.x) {
        if (l == i) a[l * cols + i] = beta;
        else if (l > i) a[l * cols + i] = __fmul_rn(a[l * cols + i], scale);
      }
    }
    if (threadIdx.x == 0) tau[i] = t;
    apply_reflector(a, rows, cols, i, t, scratch);
  }
  __syncthreads();  // tau[] complete
  for (std::uint32_t i = cols; i-- > 0;) {
    const float t = tau[i];
    apply_reflector(a, rows, cols, i, t, scratch);
    for (std::uint32_t l = threadIdx.x; l < rows; l += blockDim.x) {
      if (l > i) a[l * cols + i] = __fmul_rn(a[l * cols + i], -t);
      else if (l == i) a[l * cols + i] = __fsub_rn(1.0f, t);
      else a[l * cols + i] = 0.0f;
    }
  }
}

__device__ void orthogonalize_block(const OrthoJob& job, float eps) {
  __shared__ double scratch[kOrthoThreads / detail::kWarp];
  __shared__ float tau[kMaxCols];
  if (job.cols <= 2) gram_schmidt(job.a, job.rows, job.cols, eps, scratch);
  else householder(job.a, job.rows, job.cols, scratch, tau);
}

__global__ void orthogonalize_kernel(const OrthoJob* __restrict__ jobs, float eps) {
  orthogonalize_block(jobs[blockIdx.x], eps);
}

__global__ void orthogonalize_one_kernel(OrthoJob job, float eps) { orthogonalize_block(job, eps); }

}  // namespace

void orthogonalize(const OrthoJob* jobs, std::size_t count, float epsilon) {
  if (count == 0) return;
  orthogonalize_kernel<<<static_cast<unsigned>(count), kOrthoThreads>>>(jobs, epsilon);
  check_launch();
}

void orthogonalize_one(float* a, std::size_t rows, std::size_t cols, float epsilon) {
  LC_CHECK(cols <= rows && cols <= kMaxCols && rows <= 0xffffffffu, "orthogonalize: ", rows, " x ", cols);
  if (cols == 0) return;
  orthogonalize_one_kernel<<<1, kOrthoThreads>>>(
      OrthoJob{a, static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols)}, epsilon);
  check_launch();
}

void compute_p(float* p, const float* m, const float* q, std::size_t rows, std::size_t cols, std::size_t r) {
  if (rows == 0 || r == 0) return;
  const float one = 1.0f, zero = 0.0f;
  // Column-major: P^T (r x rows) = Q^T (r x cols) M^T (cols x rows).
  LC_CUBLAS_CHECK(cublasSgemm(ops::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, dim(r), dim(rows), dim(cols), &one, q, dim(r), m,
                              dim(cols), &zero, p, dim(r)));
}

void compute_q(float* q, const float* m, const float* p, std::size_t rows, std::size_t cols, std::size_t r) {
  if (cols == 0 || r == 0) return;
  const float one = 1.0f, zero = 0.0f;
  // Column-major: Q^T (r x cols) = P^T (r x rows) M (rows x cols), M being the transpose of the
  // column-major cols x rows view of the buffer.
  LC_CUBLAS_CHECK(cublasSgemm(ops::cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_T, dim(r), dim(cols), dim(rows), &one, p, dim(r), m,
                              dim(cols), &zero, q, dim(r)));
}

void decompress(float* m, float* error, const float* p, const float* q, std::size_t rows, std::size_t cols,
                std::size_t r) {
  if (rows == 0 || cols == 0) return;
  const float one = 1.0f, zero = 0.0f, minus_one = -1.0f;
  // Column-major: M^T (cols x rows) = Q (cols x r) P^T (r x rows).
  cublasHandle_t h = ops::cuda::cublas_handle();
  if (error) {  // error = M - P Q^T: M copied, then the product subtracted (beta = 1)
    LC_CUDA_CHECK(cudaMemcpyAsync(error, m, rows * cols * sizeof(float), cudaMemcpyDeviceToDevice, 0));
    LC_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, dim(cols), dim(rows), dim(r), &minus_one, q, dim(r), p,
                                dim(r), &one, error, dim(cols)));
  }
  LC_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, dim(cols), dim(rows), dim(r), &one, q, dim(r), p, dim(r),
                              &zero, m, dim(cols)));
}

}  // namespace laconic::reducers_cuda
