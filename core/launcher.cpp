#include "core/launcher.h"

#include <cstdlib>

namespace laconic {

bool launched_by_mpi_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

std::optional<int> launcher_local_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return std::nullopt;
}

}  // namespace laconic
