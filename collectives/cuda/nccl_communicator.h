// The NCCL backend: one rank per GPU, buffers in device memory (memory() == Device::cuda).
//
//   laconic::MpiRuntime mpi(argc, argv);                   // or a threads world, one rank per GPU
//   laconic::MpiCommunicator boot({.timeout_s = 60});
//   laconic::NcclCommunicator comm(boot, {.timeout_s = 60});
//   comm.all_reduce(laconic::Buf{grads_on_device, n, laconic::DType::f32}, laconic::ReduceOp::avg);
//
// Plain C++ (no CUDA or NCCL header): built only with LACONIC_HAVE_CUDA (collectives/cuda/), so
// host code that names this class guards it with `#if defined(LACONIC_HAVE_CUDA)`.
//
// Setup. A host communicator of the same world (any backend: MPI across processes, threads for
// several GPUs in one process) bootstraps it: rank 0 creates the NCCL unique id and broadcasts
// its 128 bytes through `bootstrap`; every rank selects its GPU (NcclOptions::device; by default
// the local rank modulo the device count, the local rank being OpenMPI's
// OMPI_COMM_WORLD_LOCAL_RANK or MPICH's MPI_LOCALRANKID under an MPI bootstrap, else the rank)
// and joins with ncclCommInitRankConfig in NCCL's non-blocking mode, so that init itself can time
// out. The constructor leaves that GPU current on the calling thread (the rank's kernels run
// there); every operation makes it current again on whichever thread runs it (the
// communication thread of the async queue included). NCCL refuses two ranks on one GPU: to run
// several ranks on one GPU, use StagingCommunicator over a host backend instead.
//
// Streams and ordering. Every operation is issued on this communicator's own non-blocking CUDA
// stream, after that stream was made to wait (event) for the work already queued on the legacy
// default stream of the GPU, where every Laconic kernel runs: gradients produced by kernels are
// complete before NCCL reads them. The calling host thread then waits for the stream, so an
// operation is complete when it returns and later kernels see its results. Under the async queue
// (run_async, *_async) the communication thread issues and waits, and since the operation runs
// on its own stream it overlaps the kernels the caller keeps launching (backward). The event is
// recorded when the communication thread issues the operation, so it also covers any kernel
// queued by then: correct, at the price of waiting for more than the bucket's own gradients.
//
// Collectives are NCCL's own (set_algorithm is ignored: NCCL always runs native, whatever the
// algorithm says). all_gather_v is a group of one ncclBroadcast per rank; all_to_all a group of
// ncclSend/ncclRecv pairs (the rank's own block is a device copy); barrier a one-int all-reduce
// on a device scratch word; send/recv/sendrecv are ncclSend/ncclRecv (sendrecv in one group).
// NCCL cannot check message sizes: a recv must name exactly the bytes the peer sends. A send to
// this rank itself needs the matching recv in the same call (sendrecv); NCCL rejects a lone one.
// Dtypes: f32 -> ncclFloat32, bf16 -> ncclBfloat16, f16 -> ncclFloat16, i32 -> ncclInt32,
// u8 -> ncclUint8 (sums wrap). Ops: sum and max are NCCL's; avg is an NCCL sum followed by
// finish_avg on the device (cuda/finish_avg_cuda.h), the same arithmetic as every other backend
// (not ncclAvg, which pre-multiplies floats by 1/N and rounds differently); any other op is
// rejected. NCCL's summation order is its own: float sums agree with the CPU backends to
// rounding, not bitwise (every rank gets the same bits); integer sums and max are exact.
// Buffers: reduce_scatter and all_gather may be in place only in NCCL's sense (the rank's own
// block of the larger buffer); all_to_all's send and recv must not overlap.
//
// Byte counts are NOMINAL, as MpiCommunicator's (collectives/nominal_bytes.h): what the base class's
// default algorithm would count for the same call on the same rank. Point-to-point is exact.
//
// Failures and timeouts. Every wait (init, each operation, finalize) polls with a deadline of
// timeout_s: the stream (cudaEventQuery) and ncclCommGetAsyncError. An NCCL or CUDA error, or the
// deadline passing, aborts the NCCL communicator (ncclCommAbort: kernels waiting on a peer quit)
// and throws laconic::Error naming the rank, the operation and NCCL's error string and last
// error, or "timed out after N s". After an abort every call throws at once ("communicator
// aborted"). Unlike MPI's, this timeout does not end the process: the peers' own deadlines end
// theirs. The destructor finalizes within timeout_s (aborting past it), and aborts at once when
// it runs during stack unwinding (a peer may be gone).
#pragma once

#include <memory>
#include <string>

#include "collectives/communicator.h"

namespace laconic {

struct NcclOptions {
  int device = -1;         // CUDA ordinal of this rank; -1: local rank modulo the device count
  double timeout_s = 300;  // longer waits abort the communicator and throw (see the header comment)
};

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `bootstrap` (every rank of its world constructs one); bootstrap's buffers must
  // be host memory. It is used only here and may be destroyed afterwards.
  explicit NcclCommunicator(Communicator& bootstrap, NcclOptions opts = {});
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  Device memory() const override { return Device::cuda; }

  // The CUDA ordinal this rank uses.
  int device() const { return device_; }
  // True once an error or a timeout aborted the NCCL communicator.
  bool aborted() const;

  // True when NCCL can be used here: this build has CUDA (and so NCCL) and a device is visible
  // (laconic::cuda_available()). Never throws.
  static bool available();

 protected:
  void do_send(const void* data, std::size_t bytes, int peer) override;
  void do_recv(void* data, std::size_t bytes, int peer) override;
  void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                   std::size_t recv_bytes, int from) override;

  // Every collective is NCCL's (set_algorithm is ignored).
  bool native(const CollectiveCall& call) override;
  void on_async_thread_start() override;  // this rank's GPU current on the communication thread

 private:
  struct Impl;  // NCCL and CUDA handles (nccl_communicator.cpp)
  template <class B>
  friend void run_native(B&, const CollectiveCall&);
  void all_reduce_native(Buf data, ReduceOp op);
  void reduce_native(Buf data, ReduceOp op, int root);
  void reduce_scatter_native(CBuf send, Buf recv, ReduceOp op);
  void all_gather_native(CBuf send, Buf recv);
  void all_gather_v_native(CBuf send, Buf recv, std::span<const std::size_t> counts);
  void all_to_all_native(CBuf send, Buf recv);
  void broadcast_native(Buf data, int root);
  void barrier_native();

  int rank_ = 0;
  int size_ = 1;
  int device_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace laconic
