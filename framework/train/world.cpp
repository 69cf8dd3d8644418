#include "framework/train/world.h"

#include <iostream>

#include "collectives/threads/threads_communicator.h"
#include "framework/core/check.h"
#ifdef LACONIC_HAVE_MPI
#include "collectives/mpi/mpi_communicator.h"
#endif

namespace laconic {

BackendKind resolve_backend(const Recipe& recipe) {
  const BackendKind b = recipe.distributed.backend;
#ifdef LACONIC_HAVE_MPI
  const bool launched = MpiRuntime::launched_by_mpirun();
  if (b == BackendKind::auto_) return launched ? BackendKind::mpi : BackendKind::threads;
  if (b == BackendKind::threads && launched)
    LC_INPUT_ERROR(recipe.path, ": distributed.backend = \"threads\" but this process was started by mpirun "
                                "(every process would train alone): use backend \"auto\" or \"mpi\"");
  return b;
#else
  if (b == BackendKind::mpi)
    LC_INPUT_ERROR(recipe.path, ": distributed.backend: expected \"threads\" or \"auto\", got \"mpi\" "
                                "(this build has no MPI: apt-get install libopenmpi-dev and rebuild)");
  return BackendKind::threads;
#endif
}

bool needs_mpi_runtime(const Recipe& recipe) { return resolve_backend(recipe) == BackendKind::mpi; }

void run_world(const Recipe& recipe, const std::function<void(Communicator&)>& fn) {
  if (resolve_backend(recipe) == BackendKind::threads) {
    ThreadsOptions opts;
    opts.timeout_s = recipe.distributed.timeout_s;
    run_threads(recipe.distributed.world_size, fn, opts);
    return;
  }
#ifdef LACONIC_HAVE_MPI
  MpiOptions opts;
  opts.timeout_s = recipe.distributed.timeout_s;
  MpiCommunicator comm(opts);
  if (comm.size() != recipe.distributed.world_size)
    LC_INPUT_ERROR(recipe.path, ": distributed.world_size = ", recipe.distributed.world_size,
                   " but the MPI launcher started ", comm.size(), " ranks (run mpirun -np ",
                   recipe.distributed.world_size, ", or pass --distributed.world_size=", comm.size(), ")");
  try {
    fn(comm);
  } catch (const std::exception& e) {
    if (comm.size() == 1) throw;
    // The other ranks would wait for this one until their timeout: end the job now.
    std::cerr << "trainer: rank " << comm.rank() << " failed: " << e.what() << std::endl;
    MpiRuntime::abort(dynamic_cast<const InputError*>(&e) ? 2 : 1);
  }
#endif
}

}  // namespace laconic
