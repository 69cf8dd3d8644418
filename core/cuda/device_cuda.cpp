// The CUDA half of core/device.h: plain runtime calls (compiled by the host compiler against
// cudart; no kernels), every error thrown as laconic::Error with the runtime's message.
#include <cuda_runtime.h>

#include <cstddef>

#include "core/check.h"
#include "core/cuda/cuda_check.h"

namespace laconic::cuda_memory {

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky, but leave nothing behind for later checks
    return 0;
  }
  return count;
}

void set_device(int index) { LC_CUDA_CHECK(cudaSetDevice(index)); }

void* allocate(std::size_t bytes) {
  void* p = nullptr;
  LC_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}

void release(void* p) noexcept { (void)cudaFree(p); }  // a destructor's path: nothing to do on error

void copy(void* dst, bool dst_device, const void* src, bool src_device, std::size_t bytes) {
  const cudaMemcpyKind kind = dst_device ? (src_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                         : (src_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  LC_CUDA_CHECK(cudaMemcpy(dst, src, bytes, kind));
}

void zero(void* p, std::size_t bytes) {
  // Stream-ordered (device.h): zero_grad every step must not make the host wait for the GPU.
  LC_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, cudaStreamLegacy));
}

void synchronize() { LC_CUDA_CHECK(cudaDeviceSynchronize()); }

void synchronize_kernels() { LC_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy)); }

}  // namespace laconic::cuda_memory
