// Which GPU a rank uses by default: its rank among the processes of its node (OpenMPI's
// OMPI_COMM_WORLD_LOCAL_RANK or MPICH's MPI_LOCALRANKID when an MPI launcher started this
// process, else the rank: a threads world is one process) modulo the devices visible. Shared by
// the NCCL and staging communicators. Plain C++; built only with LACONIC_HAVE_CUDA.
#pragma once

#include "collectives/communicator.h"

namespace laconic {

// Throws laconic::Error naming the rank when no CUDA device is visible.
int default_cuda_device(const Communicator& comm);

}  // namespace laconic
