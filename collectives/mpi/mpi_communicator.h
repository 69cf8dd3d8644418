// The MPI backend: one rank per process, launched with `mpirun`. The engine for many CPU nodes.
//
//   int main(int argc, char** argv) {
//     laconic::MpiRuntime mpi(argc, argv);          // MPI_Init_thread ... MPI_Finalize
//     laconic::MpiCommunicator comm({.timeout_s = 60});
//     comm.all_reduce(grads, laconic::ReduceOp::avg);
//   }                                              // comm must die before mpi
//
// Algorithms. The default is Algorithm::native: every collective is the MPI library's own
// (MPI_Iallreduce, MPI_Ireduce_scatter_block, MPI_Iallgatherv, ...). With any other algorithm
// (set_algorithm), every collective runs the base class's algorithms (our ring, tree, pairwise,
// dissemination) over this communicator's point-to-point exchange, bitwise identical to the
// same algorithm on the threads backend.
//
// Native collectives take int counts: a buffer beyond INT_MAX elements (or displacements beyond
// INT_MAX for all_gather_v) runs the base-class algorithm instead, whose messages are split.
//
// Dtypes for native collectives: f32 -> MPI_FLOAT, i32 -> MPI_INT32_T, u8 -> MPI_UINT8_T (sum
// wraps modulo 2^8 / 2^32, as reduce_into does). bf16 and f16 have no MPI type: they travel as a
// 2-byte contiguous type and reduce through user-defined MPI_Ops that call laconic::reduce_into,
// so each fold widens to fp32 and rounds back exactly as our own algorithms do. Those ops are
// created NON-commutative on purpose: MPI must then combine contributions in rank order
// (x0 op x1 op ... op x[N-1]) and may only re-associate, which narrows what a change of library
// algorithm can do to the bits (deterministic from run to run either way); the price is that
// the library cannot use its commutative-only algorithms (e.g. a segmented ring) for 16-bit
// floats. Because every native collective is a non-blocking one (see Timeouts), OpenMPI runs
// them through libnbc, whose algorithms can differ from those of the blocking MPI_Allreduce.
// avg = MPI sum, then finish_avg() on the result by every rank (or by the root for reduce, by
// each block owner for reduce-scatter). Caveat: MPI does not promise that an all-reduce returns
// identical bits on every rank; OpenMPI's algorithms (ring, recursive doubling in canonical
// order, reduce+broadcast) do, and mpi_test.cpp checks it for every op, dtype and size.
//
// Byte counts of native collectives are NOMINAL: MPI does not report what it sends, so a native
// collective counts exactly what the base class's default algorithm would count for the same
// call on the same rank: all-reduce as our ring (2(N-1)/N·S sent and received per rank when N
// divides the count), reduce-scatter and all-gather(_v) as ring phases ((N-1)/N·S), reduce and
// broadcast as binomial trees, all-to-all pairwise ((N-1)·B), barrier as dissemination
// (ceil(log2 N) one-byte messages). The formulas are collectives/nominal_bytes.h, shared with
// the NCCL backend. Point-to-point counts are exact.
//
// Timeouts. MPI has no receive timeout, and a peer that stops participating leaves the others
// blocked forever. Every operation here is therefore non-blocking (MPI_Isend/MPI_Irecv,
// MPI_I<collective>) followed by a polling wait with a deadline of timeout_s: it tests, yields
// the core for the first ~2 ms (oversubscribed ranks need the CPU to make progress), then sleeps
// 100 µs between tests. On timeout it prints one line to stderr naming the rank, the operation,
// the peer (point-to-point) and the byte count, and calls MPI_Abort(MPI_COMM_WORLD, 1): the whole
// job ends with a non-zero status instead of hanging. That is the one place library code ends
// the process; throwing instead would leave the peers blocked.
//
// Threading: MPI_THREAD_SERIALIZED is enough. Only one thread calls MPI at a time: public calls
// drain the communication thread's queue before running, and the queue runs one op at a time.
// Other errors (a size mismatch, an MPI error code) throw laconic::Error; the communicator's
// MPI error handler is MPI_ERRORS_RETURN so that the codes reach us instead of aborting.
#pragma once

// Only MPI's C API is used; CMake defines OMPI_SKIP_MPICXX for every user of this library.
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace laconic {

namespace detail {
[[noreturn]] void throw_mpi(int code, const char* call, const char* file, int line);
}  // namespace detail

// LC_MPI_CHECK(MPI_Xxx(...)): throws laconic::Error("file:line: MPI_Xxx(...) failed: <MPI_Error_string>").
// Errors only come back as codes where the error handler is MPI_ERRORS_RETURN (our communicator);
// on MPI_COMM_WORLD they abort by default.
#define LC_MPI_CHECK(call)                                                          \
  do {                                                                              \
    const int lc_mpi_rc_ = (call);                                                  \
    if (lc_mpi_rc_ != MPI_SUCCESS) [[unlikely]]                                     \
      ::laconic::detail::throw_mpi(lc_mpi_rc_, #call, __FILE__, __LINE__);          \
  } while (0)

// RAII for MPI_Init_thread / MPI_Finalize. One per process, alive longer than every
// MpiCommunicator. If MPI is already initialized (by a host program), it is left to its owner.
class MpiRuntime {
 public:
  MpiRuntime();                          // MPI_Init_thread(nullptr, nullptr, ...)
  MpiRuntime(int& argc, char**& argv);   // lets MPI strip its own arguments
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // Ends every rank of the job now (MPI_Abort on MPI_COMM_WORLD). For a rank that failed while
  // its peers may be inside a collective: they would otherwise wait for their timeout.
  [[noreturn]] static void abort(int exit_code);

 private:
  void init(int* argc, char*** argv);
  bool owns_ = false;
};

struct MpiOptions {
  double timeout_s = 300;  // any wait longer than this aborts the job (see the header comment)
  // Point-to-point messages larger than this travel as several MPI messages (MPI counts are
  // ints). Only tests lower it, to exercise the splitting without 2 GiB buffers.
  std::size_t max_message_bytes = INT_MAX;
};

class MpiCommunicator final : public Communicator {
 public:
  // Over a duplicate of MPI_COMM_WORLD, so our traffic never matches a host program's messages.
  explicit MpiCommunicator(MpiOptions opts = {});
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }

 protected:
  void do_send(const void* data, std::size_t bytes, int peer) override;
  void do_recv(void* data, std::size_t bytes, int peer) override;
  void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                   std::size_t recv_bytes, int from) override;

  // With Algorithm::native and counts that fit an int: the MPI library's collective.
  bool native(const CollectiveCall& call) override;

 private:
  // One posted piece of point-to-point traffic.
  struct Pending {
    MPI_Request req;
    std::size_t bytes;  // expected size of a receive
    int peer;
    bool is_recv;
    bool done;
  };

  // The native collectives (nominal byte counts: see the header comment).
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
  MPI_Datatype type_of(DType t) const;
  MPI_Op op_of(DType t, ReduceOp op) const;
  // Point-to-point: post the pieces of one message (see max_message_bytes), then wait for all.
  void post_recv(void* data, std::size_t bytes, int from);
  void post_send(const void* data, std::size_t bytes, int to);
  // Polls the posted requests until all completed (checking received sizes), or aborts the job
  // at the deadline. `what` and `bytes` name the operation in the timeout message.
  void wait(const char* what, std::size_t bytes);
  // A native collective posted one request; wait for it.
  void wait_one(MPI_Request req, const char* what, std::size_t bytes);
  // After an error: cancels the posted receives and frees every open request.
  void abandon() noexcept;
  // Frees what the constructor created (nothing once MPI is finalized).
  void release() noexcept;
  [[noreturn]] void abort_on_timeout(const char* what, std::size_t bytes, int peer) const;

  MpiOptions opts_;
  // Reused across calls (cleared, never shrunk), so steady-state collectives allocate nothing.
  std::vector<Pending> pending_;
  std::vector<int> counts_, displs_;  // all_gather_v's int arrays
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  MPI_Datatype half_ = MPI_DATATYPE_NULL;  // 2 contiguous bytes: bf16 and f16 on the wire
  MPI_Op bf16_sum_ = MPI_OP_NULL, bf16_max_ = MPI_OP_NULL;
  MPI_Op f16_sum_ = MPI_OP_NULL, f16_max_ = MPI_OP_NULL;
};

}  // namespace laconic
