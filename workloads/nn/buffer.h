// Activation buffers owned by layers: grown when a larger batch arrives, never shrunk, so the step
// loop allocates only on the first (largest) batch. They live on the device of the layer's
// ParamStore: models are initialised on the host and then moved (ParamStore::to), so a buffer
// found on another device is replaced (once, on the first call after the move).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/device.h"

namespace laconic::nn {

// Returns a pointer to at least n elements of host scratch `buf`, growing it only when too small.
template <typename T>
T* grow(std::vector<T>& buf, std::size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Returns a pointer to at least n elements of `buf` on device d, growing it only when too small
// and replacing it (contents dropped) when it is on another device.
template <typename T>
T* grow(DeviceArray<T>& buf, Device d, std::size_t n) {
  if (buf.device() != d) buf = DeviceArray<T>(d, n);
  return buf.grow(n);
}

// Host data where device d's kernels can read it: the host pointer itself on cpu (no copy);
// on cuda a copy in `buf` (grown as above), e.g. a batch's inputs and labels.
template <typename T>
const T* on_device(DeviceArray<T>& buf, Device d, std::span<const T> host) {
  if (d == Device::cpu) return host.data();
  T* p = grow(buf, d, host.size());
  buf.upload(host);
  return p;
}

}  // namespace laconic::nn
