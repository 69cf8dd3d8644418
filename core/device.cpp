#include "core/device.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/check.h"

namespace laconic {

// The CUDA half, defined in core/cuda/device_cuda.cpp when the build has CUDA.
namespace cuda_memory {
#if defined(LACONIC_HAVE_CUDA)
int device_count();
void set_device(int index);
void* allocate(std::size_t bytes);
void release(void* p) noexcept;
void copy(void* dst, bool dst_device, const void* src, bool src_device, std::size_t bytes);
void zero(void* p, std::size_t bytes);
void synchronize();
void synchronize_kernels();
#else
[[noreturn]] void unavailable() {
  throw Error("device = \"cuda\" needs a build with CUDA (this one was configured without it: "
              "install the CUDA toolkit and configure with -DLACONIC_CUDA=ON)");
}
int device_count() { return 0; }
void set_device(int) { unavailable(); }
void* allocate(std::size_t) { unavailable(); }
void release(void*) noexcept {}
void copy(void*, bool, const void*, bool, std::size_t) { unavailable(); }
void zero(void*, std::size_t) { unavailable(); }
void synchronize() { unavailable(); }
void synchronize_kernels() { unavailable(); }
#endif
}  // namespace cuda_memory

const char* name_of(Device d) { return d == Device::cuda ? "cuda" : "cpu"; }

bool built_with_cuda() {
#if defined(LACONIC_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

int cuda_device_count() { return cuda_memory::device_count(); }
void set_cuda_device(int index) { cuda_memory::set_device(index); }
bool cuda_available() { return cuda_device_count() > 0; }

namespace {
constexpr std::size_t kHostAlign = 64;  // a cache line: vector loads never split one
}

void* allocate_bytes(Device d, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  if (d == Device::cuda) return cuda_memory::allocate(bytes);
  void* p = ::operator new(bytes, std::align_val_t{kHostAlign});
  return p;
}

void release_bytes(Device d, void* p) noexcept {
  if (!p) return;
  if (d == Device::cuda)
    cuda_memory::release(p);
  else
    ::operator delete(p, std::align_val_t{kHostAlign});
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (dst_device == Device::cpu && src_device == Device::cpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
  cuda_memory::copy(dst, dst_device == Device::cuda, src, src_device == Device::cuda, bytes);
}

void fill_zero(Device d, void* p, std::size_t bytes) {
  if (bytes == 0) return;
  if (d == Device::cuda)
    cuda_memory::zero(p, bytes);
  else
    std::memset(p, 0, bytes);
}

void synchronize(Device d) {
  if (d == Device::cuda) cuda_memory::synchronize();
}

void synchronize_kernels(Device d) {
  if (d == Device::cuda) cuda_memory::synchronize_kernels();
}

}  // namespace laconic
