#include "core/ops/dispatch.h"

#include "core/check.h"
#if defined(LACONIC_HAVE_CUDA)
#include "core/ops/cuda/ops_cuda.h"
#endif

namespace laconic::ops {

namespace {

#define LACONIC_OPS_CPU_ENTRY(name) .name = &cpu::name,
constexpr Kernels kCpu{.device = Device::cpu, LACONIC_OPS_KERNELS(LACONIC_OPS_CPU_ENTRY)};
#undef LACONIC_OPS_CPU_ENTRY

#if defined(LACONIC_HAVE_CUDA)
#define LACONIC_OPS_CUDA_ENTRY(name) .name = &cuda::name,
constexpr Kernels kCuda{.device = Device::cuda, LACONIC_OPS_KERNELS(LACONIC_OPS_CUDA_ENTRY)};
#undef LACONIC_OPS_CUDA_ENTRY
#endif

}  // namespace

const Kernels& kernels(Device d) {
  if (d == Device::cpu) return kCpu;
#if defined(LACONIC_HAVE_CUDA)
  return kCuda;
#else
  throw Error("ops: device = \"cuda\" needs a build with CUDA (this one was configured without "
              "it: install the CUDA toolkit and configure with -DLACONIC_CUDA=ON)");
#endif
}

}  // namespace laconic::ops
