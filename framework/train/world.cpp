#include "framework/train/world.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "core/launcher.h"
#if defined(LACONIC_HAVE_CUDA)
#include "collectives/cuda/nccl_communicator.h"
#include "collectives/cuda/staging_communicator.h"
#include "collectives/cuda/device_select.h"
#endif
#ifdef LACONIC_HAVE_MPI
#include "collectives/mpi/mpi_communicator.h"
#endif

namespace laconic {

ProcessRuntime::ProcessRuntime(const Recipe& recipe) : launched_(launched_by_mpi_launcher()) {
  if (resolve_backend(recipe) != BackendKind::mpi) return;
#ifdef LACONIC_HAVE_MPI
  mpi_ = std::make_shared<MpiRuntime>();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
#endif
}

int gemm_threads_for(const RunSpec& spec) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  int sharing = 1;
  if (spec.backend == BackendKind::threads) {
    sharing = spec.recipe.distributed.world_size;
  } else if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) {
    sharing = std::max(1, std::atoi(local));
  }
  return std::max(1, cores / std::max(1, sharing));
}

void run_world(const RunSpec& spec, const std::function<void(Communicator&, Communicator&)>& fn) {
  const Recipe& recipe = spec.recipe;
  if (spec.backend == BackendKind::threads) {
    ThreadsOptions opts;
    opts.timeout_s = recipe.distributed.timeout_s;
    run_threads(recipe.distributed.world_size, fn, opts);
    return;
  }
#ifdef LACONIC_HAVE_MPI
  MpiOptions opts;
  opts.timeout_s = recipe.distributed.timeout_s;
  MpiCommunicator comm(opts), control(opts);  // each its own MPI_Comm_dup
  if (comm.size() != recipe.distributed.world_size)
    LC_INPUT_ERROR(recipe.path, ": distributed.world_size = ", recipe.distributed.world_size,
                   " but the MPI launcher started ", comm.size(), " ranks (run mpirun -np ",
                   recipe.distributed.world_size, ", or pass --distributed.world_size=", comm.size(), ")");
  try {
    fn(comm, control);
  } catch (const std::exception& e) {
    if (comm.size() == 1) throw;
    // The other ranks would wait for this one until their timeout: end the job now.
    std::cerr << "trainer: rank " << comm.rank() << " failed: " << e.what() << std::endl;
    MpiRuntime::abort(dynamic_cast<const InputError*>(&e) ? 2 : 1);
  }
#endif
}

std::unique_ptr<Communicator> make_device_communicator(const RunSpec& spec, Communicator& host, Communicator& control) {
  if (spec.device == Device::cpu) return nullptr;
  const Recipe& recipe = spec.recipe;
  const bool simulated = spec.simulate;
#if defined(LACONIC_HAVE_CUDA)
  // One GPU per rank for NCCL: every rank of a threads world is in this process; under MPI the
  // ranks of this node are assumed to be at most its device count (NCCL picks local rank modulo
  // the count and refuses two ranks on one GPU).
  const bool gpu_each = spec.backend == BackendKind::mpi || host.size() <= cuda_device_count();
  if (!simulated && gpu_each) {
    NcclOptions opts;
    opts.timeout_s = recipe.distributed.timeout_s;
    return std::make_unique<NcclCommunicator>(control, opts);
  }
  // Several ranks of a threads world share the GPUs round robin; MPI ranks take their local rank's.
  return std::make_unique<StagingCommunicator>(host, default_cuda_device(host));
#else
  (void)host;
  (void)control;
  (void)recipe;
  (void)simulated;
  return nullptr;  // unreachable: resolve_device refused cuda
#endif
}

}  // namespace laconic
