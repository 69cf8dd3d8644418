// What an MPI launcher tells the processes it starts, through their environment: OpenMPI's
// mpirun (OMPI_COMM_WORLD_*), MPICH/hydra and Slurm's PMI-1/2 (PMI_*), PMIx (Slurm, OpenMPI 4+),
// MVAPICH2 (MV2_*). The one place these variables are read; it needs no MPI library.
#pragma once

#include <optional>

namespace laconic {

// True when this process was started by one of the launchers above.
bool launched_by_mpi_launcher();
// This process's rank among those on its node (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID),
// when the launcher says.
std::optional<int> launcher_local_rank();

}  // namespace laconic
