// Activation buffers owned by layers: grown when a larger batch arrives, never shrunk, so the step
// loop allocates only on the first (largest) batch.
#pragma once

#include <cstddef>
#include <vector>

namespace laconic::nn {

// Returns a pointer to at least n elements of `buf`, growing it only when it is too small.
template <typename T>
T* grow(std::vector<T>& buf, std::size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace laconic::nn
