// Where an optimizer step runs and where its state lives: on the device of the ParamStore. The
// state buffers are DeviceArray<float>, host memory for a cpu store (the CPU loops use them as
// before) and device memory for a cuda store (the kernels of optimizers/cuda/ use them).
#pragma once

#include "core/check.h"
#include "core/device.h"
#include "core/params.h"

namespace laconic {

// True when `store` lives on the GPU, so the step must run the CUDA kernels. A build without
// CUDA cannot hold a cuda store (ParamStore::to throws), and says so here too, should one appear.
inline bool on_cuda(const ParamStore& store) {
#if defined(LACONIC_HAVE_CUDA)
  return store.device() == Device::cuda;
#else
  LC_CHECK(store.device() == Device::cpu, "optimizer step on a ", name_of(store.device()),
           " store in a build without CUDA");
  return false;
#endif
}

// Sizes a state buffer laid out like `store`'s parameters, on the store's device. A buffer of
// another size is replaced by a zero-filled one (as a fresh optimizer would start); a buffer of
// the right size on the other device is moved there with its contents (the store moved: the
// optimizer continues where it was). Allocates nothing when the buffer already fits.
inline void prepare_state(DeviceArray<float>& buffer, const ParamStore& store) {
  if (buffer.size() != store.size())
    buffer = DeviceArray<float>(store.device(), store.size());
  else if (buffer.device() != store.device())
    buffer.to(store.device());
}

}  // namespace laconic
