#include "framework/train/world.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "collectives/gloo/gloo_communicator.h"
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

namespace {

// An environment variable as a rank or a size: "" when unset; InputError when not a number.
int env_int(const char* name, int fallback, int at_least) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < at_least || n > 1 << 20)
    LC_INPUT_ERROR("environment: ", name, ": expected an integer >= ", at_least, ", got \"", v, "\"");
  return static_cast<int>(n);
}

const char* first_set(const char* a, const char* b) {
  const char* v = std::getenv(a);
  return v && *v ? a : b;
}

}  // namespace

ProcessWorld::ProcessWorld(const Recipe& recipe) {
  const int want = recipe.distributed.world_size;
  const char* size_var = first_set("LACONIC_WORLD_SIZE", "WORLD_SIZE");
  const char* rank_var = first_set("LACONIC_RANK", "RANK");
  const bool gloo_env = std::getenv(size_var) && *std::getenv(size_var);
  BackendKind b = recipe.distributed.backend;
  // A recipe written for the trainer's threads: here every rank is a process, so the
  // environment says which (a world of one when nothing does).
  if (b == BackendKind::auto_ || b == BackendKind::threads)
    b = launched_by_mpi_launcher() ? BackendKind::mpi : gloo_env ? BackendKind::gloo : BackendKind::threads;
  backend_ = b;
  // Before connecting: a gloo rank of the wrong world would wait for peers that never come.
  const auto check_size = [&](int size) {
    if (size == want) return;
    LC_INPUT_ERROR(recipe.path, ": distributed.world_size = ", want, " but ",
                   b == BackendKind::mpi    ? detail::concat("the MPI launcher started ", size, " ranks")
                   : b == BackendKind::gloo ? detail::concat(size_var, " = ", size)
                                            : std::string("this process is alone (no MPI launcher, no LACONIC_WORLD_SIZE)"),
                   ": start ", want, " processes (mpirun -np ", want, ", or LACONIC_WORLD_SIZE=", want,
                   " with LACONIC_RANK and LACONIC_STORE), or set distributed.world_size = ", size);
  };
  const double timeout = recipe.distributed.timeout_s;
  if (b == BackendKind::mpi) {
#ifdef LACONIC_HAVE_MPI
    if (!launched_by_mpi_launcher())
      LC_INPUT_ERROR(recipe.path, ": distributed.backend = \"mpi\" but this process was not started by an MPI "
                                  "launcher (mpirun -np N python3 ...)");
    runtime_ = std::make_shared<MpiRuntime>();
    MpiOptions opts;
    opts.timeout_s = timeout;
    comm_ = std::make_unique<MpiCommunicator>(opts);
    control_ = std::make_unique<MpiCommunicator>(opts);
#else
    LC_INPUT_ERROR(recipe.path, ": distributed.backend = \"mpi\" but this build has no MPI (apt-get install "
                                "libopenmpi-dev and rebuild), or use gloo (LACONIC_WORLD_SIZE, LACONIC_STORE)");
#endif
  } else if (b == BackendKind::gloo) {
    const int size = env_int(size_var, 0, 1);
    if (size == 0)
      LC_INPUT_ERROR(recipe.path, ": distributed.backend = \"gloo\" but LACONIC_WORLD_SIZE (or WORLD_SIZE) is not "
                                  "set: start each process with LACONIC_RANK, LACONIC_WORLD_SIZE and LACONIC_STORE");
    check_size(size);
    const int rank = env_int(rank_var, -1, 0);
    if (rank < 0 || rank >= size)
      LC_INPUT_ERROR("environment: ", rank_var, ": expected a rank in [0, ", size, ") for ", size_var, " = ", size,
                     rank < 0 ? ", got nothing" : "");
    const char* store = std::getenv("LACONIC_STORE");
    if (!store || !*store)
      LC_INPUT_ERROR("environment: LACONIC_STORE: expected where the gloo processes meet, \"file:DIR\" (a folder "
                     "they all see) or \"redis:HOST:PORT\", for a world of ", size);
    StoreSpec spec;
    try {
      spec = StoreSpec::parse(store);
    } catch (const std::exception& e) {
      LC_INPUT_ERROR("environment: LACONIC_STORE: ", e.what());
    }
    std::shared_ptr<KeyStore> keys = KeyStore::open(spec);
    runtime_ = keys;
    GlooOptions opts;
    opts.timeout_s = timeout;
    opts.streams = recipe.distributed.streams;
    if (const char* a = std::getenv("LACONIC_ADDRESS"); a && *a) opts.address = a;
    comm_ = std::make_unique<GlooCommunicator>(*keys, "world.train", rank, size, opts);
    control_ = std::make_unique<GlooCommunicator>(*keys, "world.control", rank, size, opts);
  } else {
    auto worlds = std::make_shared<std::pair<ThreadsWorld, ThreadsWorld>>(1, 1);
    runtime_ = worlds;
    comm_ = std::make_unique<ThreadsCommunicator>(worlds->first, 0);
    control_ = std::make_unique<ThreadsCommunicator>(worlds->second, 0);
  }
  check_size(comm_->size());
}

ProcessWorld::~ProcessWorld() {
  control_.reset();
  comm_.reset();  // before the runtime they run on
}

int rank_cuda_device(const Communicator& comm) {
#if defined(LACONIC_HAVE_CUDA)
  return default_cuda_device(comm);
#else
  (void)comm;
  throw Error("device = \"cuda\" needs a build with CUDA");
#endif
}

void abort_mpi_job(int exit_code) {
#ifdef LACONIC_HAVE_MPI
  int initialized = 0, finalized = 0, size = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) MpiRuntime::abort(exit_code);
#else
  (void)exit_code;
#endif
}

int gemm_threads_for(const RunSpec& spec) {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  int sharing = 1;
  if (spec.backend == BackendKind::threads) {
    sharing = spec.recipe.distributed.world_size;
  } else {
    // The launcher's processes on this node: MPI's, or torchrun's (gloo).
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "LACONIC_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE"})
      if (const char* local = std::getenv(var); local && *local) {
        sharing = std::max(1, std::atoi(local));
        break;
      }
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
