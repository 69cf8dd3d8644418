// The collective layer's one interface. A Communicator is one rank's handle on a group of
// `size()` ranks. Backends implement point-to-point exchange and may override any collective
// with a native one; the defaults are the algorithm classes in collectives/algorithms/, run over
// this communicator's point-to-point exchange in a fixed reduction order, so results are
// deterministic and identical on every rank.
//
// Semantics follow MPI: every rank calls the same collectives in the same order. Buffers are
// typed views (Buf/CBuf, collectives/dtype.h). Every byte a rank puts on the wire or takes off
// it is counted (bytes(): per rank, cumulative).
//
// Async: the *_async forms queue the operation on this rank's communication thread (started on
// first use) and return a Work to wait() on; queued operations run in issue order. Any blocking
// call made from another thread first waits until the queue is empty, so sync and async calls
// can be mixed freely as long as all ranks issue them in the same order. Buffers handed to an
// async call must stay alive until its wait() returns (or the communicator is destroyed).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collectives/async_queue.h"
#include "collectives/dtype.h"
#include "framework/core/device.h"
#include "framework/core/enum_names.h"

namespace laconic {

// Which algorithm a collective runs. `native` = the backend's own (MPI_Allreduce, NCCL, ...),
// `auto_` = chosen per call by the alpha-beta cost model (collectives/netsim/cost_model.h).
enum class Algorithm { native, ring, recursive_doubling, rabenseifner, hierarchical, auto_ };
inline constexpr std::array kAlgorithmNames{"native", "ring", "recursive_doubling", "rabenseifner", "hierarchical", "auto"};
constexpr std::span<const char* const> names(Algorithm) { return kAlgorithmNames; }
inline const char* name_of(Algorithm a) { return enum_name(a); }

struct ByteCounters {
  std::uint64_t sent = 0;
  std::uint64_t recv = 0;
  std::uint64_t messages_sent = 0;
  ByteCounters operator+(const ByteCounters& o) const {
    return {sent + o.sent, recv + o.recv, messages_sent + o.messages_sent};
  }
};

class Communicator {
 public:
  Communicator();
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;
  // Where every buffer handed to this communicator must live: host memory for threads and MPI,
  // device memory for NCCL and for the staging wrapper that carries device buffers over a host
  // backend. In a run with device = "cuda" every communicator the strategies see says cuda.
  virtual Device memory() const { return Device::cpu; }

  // ---- point-to-point (counted) ----
  // Blocking send of `bytes` bytes to `peer`; messages between a pair are delivered in order.
  void send(const void* data, std::size_t bytes, int peer);
  // Blocking receive of exactly `bytes` bytes from `peer` (a size mismatch is an error).
  void recv(void* data, std::size_t bytes, int peer);
  // Sends to `to` and receives from `from` without deadlock (ring steps use this).
  void sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                std::size_t recv_bytes, int from);

  // ---- collectives ----
  // In place; every rank ends with the same bits.
  void all_reduce(Buf data, ReduceOp op);
  // In place at `root`; other ranks' buffers are left unchanged.
  void reduce(Buf data, ReduceOp op, int root);
  // send holds size() blocks of recv.count elements; rank r receives the reduction of block r.
  void reduce_scatter(CBuf send, Buf recv, ReduceOp op);
  // recv holds size() blocks of send.count elements, block r from rank r.
  void all_gather(CBuf send, Buf recv);
  // Variable counts: rank r contributes counts[r] elements, placed at sum(counts[0..r)) in recv.
  void all_gather_v(CBuf send, Buf recv, std::span<const std::size_t> counts);
  // send and recv hold size() equal blocks; block j of rank i lands as block i of rank j.
  void all_to_all(CBuf send, Buf recv);
  // Root's data copied to every rank.
  void broadcast(Buf data, int root);
  // Returns when every rank has entered.
  void barrier();

  // Conveniences for the common cases.
  void all_reduce(std::span<float> data, ReduceOp op) { all_reduce(buf(data), op); }
  void broadcast(void* data, std::size_t bytes, int root) { broadcast(Buf{data, bytes, DType::u8}, root); }

  // ---- async forms (see the header comment) ----
  std::shared_ptr<Work> all_reduce_async(Buf data, ReduceOp op);
  std::shared_ptr<Work> reduce_scatter_async(CBuf send, Buf recv, ReduceOp op);
  std::shared_ptr<Work> all_gather_async(CBuf send, Buf recv);
  std::shared_ptr<Work> broadcast_async(Buf data, int root);
  // Waits until every queued operation has run (rethrows nothing: wait() on each Work does).
  void wait_all();
  // Runs any `op` on the communication thread, after everything queued before it: a composite
  // operation (a reducer's encode, collectives, decode) that must overlap the caller's work.
  // `work` is reset here and finished when op returns or throws; it must outlive that. Allocates
  // nothing once the queue has room (reserve_async), if op's captures fit std::function's inline storage (two
  // pointers): strategies reuse one Work per bucket every step. Collectives called inside op
  // run directly (they do not wait for the queue they are running on).
  void run_async(Work& work, std::function<void()> op);
  // Room for `ops` queued operations at once (starting the communication thread), so that
  // run_async() never grows the queue later, whatever the timing.
  void reserve_async(std::size_t ops);

  // The all-reduce algorithm used by all_reduce (default ring). With Algorithm::auto_, the
  // chooser picks per call from the message size (set by whoever knows the network, e.g. the
  // cost model of collectives/netsim); without a chooser, a fixed size rule is used.
  // These settings (the policy) may be shared by a wrapper and the communicator it wraps
  // (Communicator(Communicator&) below): set on either, both see them.
  void set_algorithm(Algorithm a) { policy_->algorithm = a; }
  Algorithm algorithm() const { return policy_->algorithm; }
  void set_algorithm_chooser(std::function<Algorithm(std::size_t bytes)> chooser) { policy_->chooser = std::move(chooser); }

  // Topology: group_of[r] = the group (node, datacenter) of rank r; empty = one group. Used by
  // the hierarchical algorithm and the network simulator. Must be the same on every rank.
  void set_groups(std::vector<int> group_of) { policy_->groups = std::move(group_of); }
  const std::vector<int>& groups() const { return policy_->groups; }

  // Every byte this rank put on the wire or took off it: all of them, and per link tier (0:
  // within this rank's group of groups(), 1: between groups; all tier 0 without groups). Counted
  // in one place: send/recv/sendrecv, and count() for native collectives.
  ByteCounters bytes() const { return sum(tiers_[0]) + sum(tiers_[1]); }
  ByteCounters tier_bytes(int tier) const { return sum(tiers_[static_cast<std::size_t>(tier)]); }

 protected:
  // For a wrapper that hands its operations to `inner` (device staging): one policy for both, so
  // settings made on either apply to the collectives inner runs, and nothing is copied per call.
  struct SharePolicy {};
  Communicator(SharePolicy, Communicator& inner);

  // Backends move bytes; the public wrappers above count them.
  virtual void do_send(const void* data, std::size_t bytes, int peer) = 0;
  virtual void do_recv(void* data, std::size_t bytes, int peer) = 0;
  virtual void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                           std::size_t recv_bytes, int from) = 0;

  // Collectives: the defaults run our algorithms over point-to-point; a backend may override
  // with native ones (and must then count their traffic with count()).
  virtual void do_all_reduce(Buf data, ReduceOp op);
  virtual void do_reduce(Buf data, ReduceOp op, int root);
  virtual void do_reduce_scatter(CBuf send, Buf recv, ReduceOp op);
  virtual void do_all_gather(CBuf send, Buf recv);
  virtual void do_all_gather_v(CBuf send, Buf recv, std::span<const std::size_t> counts);
  virtual void do_all_to_all(CBuf send, Buf recv);
  virtual void do_broadcast(Buf data, int root);
  virtual void do_barrier();

  // Native collectives that bypass send()/recv() add their traffic here, attributed like a ring:
  // sent to rank + 1, received from rank - 1 (for the tiers).
  void count(std::uint64_t sent, std::uint64_t recv, std::uint64_t messages);
  // The same for a whole ByteCounters (the nominal counts of collectives/nominal_bytes.h).
  void count(const ByteCounters& b) { count(b.sent, b.recv, b.messages_sent); }

  // Scratch bytes for algorithms, kept across calls so steady-state collectives allocate nothing.
  // `slot` 0 and 1 are independent buffers.
  std::span<std::byte> scratch(std::size_t bytes, int slot = 0);

  // Every backend's destructor calls this first: it joins the communication thread while the
  // backend's virtual functions can still be called.
  void stop_async();

  // Runs first on the communication thread. Device backends make their GPU current there: the
  // operations queued with run_async (a reducer's encode and decode kernels) launch kernels
  // before any collective would have set it.
  virtual void on_async_thread_start() {}

 private:
  AsyncQueue& async();  // the queue and its thread, on first use
  void drain();  // waits for the queue unless called from the communication thread itself

  struct Counters {
    std::atomic<std::uint64_t> sent{0}, recv{0}, messages{0};
  };
  static ByteCounters sum(const Counters& c) {
    return {c.sent.load(std::memory_order_relaxed), c.recv.load(std::memory_order_relaxed),
            c.messages.load(std::memory_order_relaxed)};
  }
  int tier_to(int peer) const;  // the link tier between this rank and `peer`
  void count_sent(int peer, std::uint64_t bytes, std::uint64_t messages);
  void count_recv(int peer, std::uint64_t bytes);
  Counters tiers_[2];
  struct Policy {
    Algorithm algorithm = Algorithm::ring;
    std::function<Algorithm(std::size_t)> chooser;
    std::vector<int> groups;
  };
  std::shared_ptr<Policy> policy_ = std::make_shared<Policy>();
  std::vector<std::byte> scratch_[2];

  std::unique_ptr<AsyncQueue> async_;
};

}  // namespace laconic
