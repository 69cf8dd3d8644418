// Where a buffer lives, and the few memory operations every layer needs on either side. Plain
// C++: no CUDA header is included here (the CUDA half is core/cuda/device_cuda.cpp, built only
// with LACONIC_HAVE_CUDA; without it every cuda request throws "built without CUDA").
//
// Ordering: on cuda, everything runs on the legacy default stream, which every Laconic kernel
// uses, so a copy after a kernel sees its result and a kernel after a copy sees the copied bytes.
// copy_bytes returns when the copy is done (the host may read what it copied out); fill_zero is
// only stream-ordered (the host does not wait: zeroing gradients every step costs no stall), so
// kernels and copies after it see zeros.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

namespace laconic {

enum class Device { cpu, cuda };
const char* name_of(Device d);

// True when this build has CUDA and the runtime sees at least one device; never throws (a
// machine with the toolkit but no driver reports "driver version is insufficient": false).
bool cuda_available();
// How many CUDA devices this process sees (0 without CUDA or a driver; never throws).
int cuda_device_count();
// Makes device `index` this thread's current one (where allocations go); throws without CUDA.
void set_cuda_device(int index);
// True when this build was compiled with the CUDA path.
bool built_with_cuda();

// Raw memory on a device. allocate(…, 0) returns nullptr; release(…, nullptr) does nothing.
void* allocate_bytes(Device d, std::size_t bytes);
void release_bytes(Device d, void* p) noexcept;
// dst and src may be on different devices (host <-> device, device <-> device, host <-> host).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);
void fill_zero(Device d, void* p, std::size_t bytes);
// Waits for all work queued on the device (no-op on cpu); throws a pending asynchronous error.
void synchronize(Device d);
// Waits for the kernels and copies queued on the default stream (every Laconic kernel's), but not
// for the communicators' own streams: what a stopwatch around compute must wait for.
void synchronize_kernels(Device d);

// An owning, move-only array of trivially copyable T on one device; zero-initialised on
// allocation. resize() keeps the first min(old, new) elements (like std::vector) and allocates
// only when growing beyond the capacity, so a buffer grown once allocates nothing after.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(Device d, std::size_t n = 0) : device_(d) { resize(n); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept
      : device_(o.device_), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      release_bytes(device_, data_);
      device_ = o.device_;
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  ~DeviceArray() { release_bytes(device_, data_); }

  Device device() const { return device_; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }

  void resize(std::size_t n) {
    if (n > capacity_) {
      T* fresh = static_cast<T*>(allocate_bytes(device_, n * sizeof(T)));
      fill_zero(device_, fresh, n * sizeof(T));
      if (size_ > 0) copy_bytes(fresh, device_, data_, device_, size_ * sizeof(T));
      release_bytes(device_, data_);
      data_ = fresh;
      capacity_ = n;
    }
    size_ = n;
  }
  // Grows to at least n elements (never shrinks) and returns the data: layers' activation buffers.
  T* grow(std::size_t n) {
    if (size_ < n) resize(n);
    return data_;
  }
  // Moves the contents to device d (no-op when already there).
  void to(Device d) {
    if (d == device_) return;
    DeviceArray moved(d, size_);
    if (size_ > 0) copy_bytes(moved.data_, d, data_, device_, size_ * sizeof(T));
    *this = std::move(moved);
  }
  void zero() { fill_zero(device_, data_, size_ * sizeof(T)); }

  // Host <-> this array, whatever device it is on.
  void upload(std::span<const T> host, std::size_t offset = 0) {
    copy_bytes(data_ + offset, device_, host.data(), Device::cpu, host.size() * sizeof(T));
  }
  void download(std::span<T> host, std::size_t offset = 0) const {
    copy_bytes(host.data(), Device::cpu, data_ + offset, device_, host.size() * sizeof(T));
  }

 private:
  Device device_ = Device::cpu;
  T* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace laconic
