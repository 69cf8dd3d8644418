#include "collectives/cuda/device_select.h"

#include <cstdlib>

#include "core/check.h"
#include "core/device.h"
#include "core/launcher.h"

namespace laconic {

int default_cuda_device(const Communicator& comm) {
  const int local = launcher_local_rank().value_or(comm.rank());
  const int devices = cuda_device_count();
  LC_CHECK(devices > 0, "rank ", comm.rank(), ": no CUDA device is visible");
  return local % devices;
}

}  // namespace laconic
