// Where the ranks of a run live: N threads of this process (threads backend), or one rank per
// process under mpirun (mpi backend). run_world() calls fn once per local rank with its
// communicator, the same way for both, so the step loop never knows which it got.
#pragma once

#include <functional>
#include <memory>

#include "collectives/communicator.h"
#include "framework/recipe/recipe.h"
#include "framework/train/run_spec.h"

namespace laconic {

class KeyStore;  // collectives/gloo/key_store.h

// What a process sets up before run_world and holds until it returns: MPI, initialised when the
// recipe's backend is mpi (finalised on destruction), and which rank this process is.
class ProcessRuntime {
 public:
  explicit ProcessRuntime(const Recipe& recipe);
  int rank() const { return rank_; }  // this process's rank (0 on the threads backend)
  bool lead() const { return rank_ == 0; }
  bool launched() const { return launched_; }  // started by an MPI launcher

 private:
  std::shared_ptr<void> mpi_;  // the MpiRuntime, when there is one
  int rank_ = 0;
  bool launched_ = false;
};

// The world of a process that is one rank of it, for a driver that holds its rank between calls
// (laconic.torch) rather than handing run_world a function. The recipe's distributed.backend:
//   mpi      under an MPI launcher (mpirun -np N python3 ...);
//   gloo     processes started with LACONIC_RANK and LACONIC_WORLD_SIZE (or torchrun's RANK and
//            WORLD_SIZE), meeting through LACONIC_STORE ("file:DIR" or "redis:HOST[:PORT]", with
//            "#NAMESPACE" to share one store between runs), listening on LACONIC_ADDRESS
//            (127.0.0.1 unless set);
//   auto     the first of these that the environment describes, else one process alone (a world
//            of one); "threads" (a recipe written for the trainer) reads the same here.
// The world's size must equal distributed.world_size (InputError naming both otherwise).
class ProcessWorld {
 public:
  // `store`: where gloo ranks meet (null: the environment's LACONIC_STORE); laconic.torch passes
  // torch's own under torchrun.
  explicit ProcessWorld(const Recipe& recipe, std::shared_ptr<KeyStore> store = nullptr);
  ~ProcessWorld();
  ProcessWorld(const ProcessWorld&) = delete;
  ProcessWorld& operator=(const ProcessWorld&) = delete;
  BackendKind backend() const { return backend_; }
  Communicator& comm() { return *comm_; }        // the training's traffic
  Communicator& control() { return *control_; }  // the control plane (run_world's)

 private:
  BackendKind backend_ = BackendKind::threads;
  std::shared_ptr<void> runtime_;  // MPI's runtime, or the threads world, or the gloo store
  std::unique_ptr<Communicator> comm_, control_;
};

// The GPU a rank's device communicators use (collectives/cuda/device_select.h: its rank on the
// node modulo the devices visible). Throws without CUDA or a device.
int rank_cuda_device(const Communicator& comm);

// A rank of a multi-process MPI job that failed outside the collectives (a script's exception)
// ends the whole job (MPI_Abort with `exit_code`), as run_world does for the trainer: its peers
// would otherwise wait in their next collective until distributed.timeout_s. Returns (doing
// nothing) when MPI is not running or the world is one process.
void abort_mpi_job(int exit_code);

// Threads for each rank's CPU GEMMs: the cores this process may run on (its affinity mask) divided
// by the ranks sharing them (the threads backend's world_size in this process; under MPI, the
// launcher's processes on this node), at least 1.
int gemm_threads_for(const RunSpec& spec);

// Runs fn on every rank of this process. Threads: world_size threads, the first failure rethrown
// after all have stopped. MPI: the process's one rank; the launcher's world size must equal
// distributed.world_size (InputError otherwise, on every rank alike); a failure in fn on one rank
// ends the whole job at once (MPI_Abort) after printing which rank failed and why.
// Each rank gets two communicators: `comm` carries the training's traffic (what the run reports and
// a [network] simulates); `control` carries what only coordinates or observes the run (the recipe
// check, resume agreement, metrics, replica checks, checkpoint barriers), so that logging, check
// and checkpoint intervals change neither the bytes nor the simulated time of a run.
void run_world(const RunSpec& spec, const std::function<void(Communicator& comm, Communicator& control)>& fn);

// For device = "cuda": the communicator the sync strategy hands device buffers to, over `host`
// (this rank's backend communicator, or the simulator wrapping it; configured already). NCCL when
// the ranks can each have a GPU and no network is simulated (NCCL's collectives are its own, so
// the simulator could not charge them); otherwise a staging wrapper that runs `host` on pinned
// host copies (several ranks on one GPU, or a simulated network). nullptr for cpu: the strategy
// uses `host` itself. NCCL is a transport of its own and counts its own bytes; staging shows
// `host`'s (total_bytes() counts each once). NCCL's bootstrap (its unique id) goes over
// `control`, so it is no training traffic.
// The device and whether a network is simulated are the spec's.
std::unique_ptr<Communicator> make_device_communicator(const RunSpec& spec, Communicator& host, Communicator& control);

}  // namespace laconic
