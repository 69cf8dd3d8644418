#include "collectives/cuda/device_select.h"

#include <cstdlib>

#include "framework/core/check.h"
#include "framework/core/device.h"

namespace laconic {

int default_cuda_device(const Communicator& comm) {
  int local = comm.rank();
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
    if (const char* v = std::getenv(var)) {
      local = std::atoi(v);
      break;
    }
  const int devices = cuda_device_count();
  LC_CHECK(devices > 0, "rank ", comm.rank(), ": no CUDA device is visible");
  return local % devices;
}

}  // namespace laconic
