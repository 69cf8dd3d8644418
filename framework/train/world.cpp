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

// What a process world runs on: the runtime (MPI's, the gloo store or the threads world) and the
// two communicators over it (declared after it: destroyed before it).
struct Connection {
  std::shared_ptr<void> runtime;
  std::unique_ptr<Communicator> comm, control;
};

// Where the environment says this process's world is, and how big: gloo's variables (LACONIC_*,
// else torchrun's), and the backend the recipe and the environment choose.
struct Environment {
  const char* size_var;
  const char* rank_var;
  BackendKind backend;
};

Environment environment_of(const Recipe& recipe) {
  Environment env{first_set("LACONIC_WORLD_SIZE", "WORLD_SIZE"), first_set("LACONIC_RANK", "RANK"),
                  recipe.distributed.backend};
  const bool gloo_env = std::getenv(env.size_var) && *std::getenv(env.size_var);
  // A recipe written for the trainer's threads: here every rank is a process, so the
  // environment says which (a world of one when nothing does).
  if (env.backend == BackendKind::auto_ || env.backend == BackendKind::threads)
    env.backend = launched_by_mpi_launcher() ? BackendKind::mpi : gloo_env ? BackendKind::gloo : BackendKind::threads;
  return env;
}

// Before connecting: a gloo rank of the wrong world would wait for peers that never come.
void check_size(const Recipe& recipe, const Environment& env, int size) {
  const int want = recipe.distributed.world_size;
  if (size == want) return;
  const BackendKind b = env.backend;
  LC_INPUT_ERROR(recipe.path, ": distributed.world_size = ", want, " but ",
                 b == BackendKind::mpi    ? detail::concat("the MPI launcher started ", size, " ranks")
                 : b == BackendKind::gloo ? detail::concat(env.size_var, " = ", size)
                                          : std::string("this process is alone (no MPI launcher, no LACONIC_WORLD_SIZE)"),
                 ": start ", want, " processes (mpirun -np ", want, ", or LACONIC_WORLD_SIZE=", want,
                 " with LACONIC_RANK and LACONIC_STORE), or set distributed.world_size = ", size);
}

Connection connect_mpi(const Recipe& recipe) {
#ifdef LACONIC_HAVE_MPI
  if (!launched_by_mpi_launcher())
    LC_INPUT_ERROR(recipe.path, ": distributed.backend = \"mpi\" but this process was not started by an MPI "
                                "launcher (mpirun -np N python3 ...)");
  Connection c;
  c.runtime = std::make_shared<MpiRuntime>();
  MpiOptions opts;
  opts.timeout_s = recipe.distributed.timeout_s;
  c.comm = std::make_unique<MpiCommunicator>(opts);
  c.control = std::make_unique<MpiCommunicator>(opts);
  return c;
#else
  LC_INPUT_ERROR(recipe.path, ": distributed.backend = \"mpi\" but this build has no MPI (apt-get install "
                              "libopenmpi-dev and rebuild), or use gloo (LACONIC_WORLD_SIZE, LACONIC_STORE)");
#endif
}

// The gloo store the environment names (LACONIC_STORE), for a world of `size`.
std::shared_ptr<KeyStore> open_store(int size) {
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
  return KeyStore::open(spec);
}

Connection connect_gloo(const Recipe& recipe, const Environment& env, std::shared_ptr<KeyStore> store) {
  const int size = env_int(env.size_var, 0, 1);
  if (size == 0)
    LC_INPUT_ERROR(recipe.path, ": distributed.backend = \"gloo\" but LACONIC_WORLD_SIZE (or WORLD_SIZE) is not "
                                "set: start each process with LACONIC_RANK, LACONIC_WORLD_SIZE and LACONIC_STORE");
  check_size(recipe, env, size);
  const int rank = env_int(env.rank_var, -1, 0);
  if (rank < 0 || rank >= size)
    LC_INPUT_ERROR("environment: ", env.rank_var, ": expected a rank in [0, ", size, ") for ", env.size_var, " = ", size,
                   rank < 0 ? ", got nothing" : "");
  std::shared_ptr<KeyStore> keys = store ? std::move(store) : open_store(size);
  Connection c;
  c.runtime = keys;
  GlooOptions opts;
  opts.timeout_s = recipe.distributed.timeout_s;
  opts.streams = recipe.distributed.streams;
  if (const char* a = std::getenv("LACONIC_ADDRESS"); a && *a) opts.address = a;
  c.comm = std::make_unique<GlooCommunicator>(*keys, "world.train", rank, size, opts);
  c.control = std::make_unique<GlooCommunicator>(*keys, "world.control", rank, size, opts);
  return c;
}

// A world of one: this process alone, on the threads backend.
Connection connect_alone() {
  auto worlds = std::make_shared<std::pair<ThreadsWorld, ThreadsWorld>>(1, 1);
  Connection c;
  c.runtime = worlds;
  c.comm = std::make_unique<ThreadsCommunicator>(worlds->first, 0);
  c.control = std::make_unique<ThreadsCommunicator>(worlds->second, 0);
  return c;
}

}  // namespace

ProcessWorld::ProcessWorld(const Recipe& recipe, std::shared_ptr<KeyStore> store) {
  const Environment env = environment_of(recipe);
  backend_ = env.backend;
  Connection c = env.backend == BackendKind::mpi    ? connect_mpi(recipe)
                 : env.backend == BackendKind::gloo ? connect_gloo(recipe, env, std::move(store))
                                                    : connect_alone();
  runtime_ = std::move(c.runtime);
  comm_ = std::move(c.comm);
  control_ = std::move(c.control);
  check_size(recipe, env, comm_->size());
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
