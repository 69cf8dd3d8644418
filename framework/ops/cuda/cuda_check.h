// The cuBLAS error check (LC_CUBLAS_CHECK; the runtime's LC_CUDA_CHECK is core's), and a small RAII device buffer.
// Lives in ops/cuda/ because it includes CUDA headers (CPU headers never do).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "framework/core/check.h"
#include "framework/core/cuda/cuda_check.h"  // LC_CUDA_CHECK

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

namespace laconic::ops::cuda {

// Owns `size` elements of T in device memory (cudaMalloc; uninitialised). Move-only.
// A zero-sized buffer holds nullptr and allocates nothing (kernels are never launched on n = 0).
// upload/download are synchronous cudaMemcpy on the default stream, so they also order against
// the kernels launched before them: download() after a kernel sees its result.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t size) : size_(size) {
    if (size_ > 0) LC_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), size_ * sizeof(T)));
  }
  explicit DeviceBuffer(std::span<const T> host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  std::size_t size() const { return size_; }

  // Copies host.size() (<= size()) elements to the front of the buffer.
  void upload(std::span<const T> host) {
    LC_CHECK(host.size() <= size_, "upload of ", host.size(), " elements into ", size_);
    if (!host.empty())
      LC_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  void download(std::span<T> host) const {
    LC_CHECK(host.size() <= size_, "download of ", host.size(), " elements from ", size_);
    if (!host.empty())
      LC_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, host.size() * sizeof(T), cudaMemcpyDeviceToHost));
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    download(std::span<T>(host));
    return host;
  }

 private:
  void release() noexcept {
    // Errors are ignored here: a destructor must not throw, and a failed free leaves nothing
    // the caller could do.
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    size_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace laconic::ops::cuda
