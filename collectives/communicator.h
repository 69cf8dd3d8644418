// The collective layer's one interface. A Communicator is one rank's handle on a group of
// `size()` ranks: a Transport (transport.h: point-to-point, and the one place bytes are counted)
// with collectives (collectives.h) and an async queue (async_queue.h) on top.
//
// Every collective becomes one CollectiveCall handed to do_collective(): by default the
// backend's native() is asked first (MPI, NCCL), else our algorithms run over this transport's
// point-to-point exchange in a fixed reduction order, so results are deterministic and identical
// on every rank. A wrapper overrides only what it changes: the simulated network charges native
// collectives (native()), device staging copies around the whole call (do_collective()).
//
// Semantics follow MPI: every rank calls the same collectives in the same order. Buffers are
// typed views (Buf/CBuf, collectives/dtype.h).
//
// Async: the *_async forms queue the operation on this rank's communication thread (started on
// first use) and return a Work to wait() on; queued operations run in issue order. Any blocking
// call made from another thread first waits until the queue is empty, so sync and async calls
// can be mixed freely as long as all ranks issue them in the same order. Buffers handed to an
// async call must stay alive until its wait() returns (or the communicator is destroyed).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collectives/async_queue.h"
#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "collectives/trace.h"
#include "collectives/transport.h"

namespace laconic {

class Communicator : public Transport {
 public:
  Communicator();
  ~Communicator() override;

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
  // Any of the above, as a value: checks the arguments, waits for the queue, runs do_collective.
  void collective(const CollectiveCall& call);

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
  // `label` names it in the trace's timeline (a strategy's bucket or fragment).
  void run_async(Work& work, std::function<void()> op, OpLabel label = {});
  // Room for `ops` queued operations at once (starting the communication thread), so that
  // run_async() never grows the queue later, whatever the timing.
  void reserve_async(std::size_t ops);

  // The all-reduce algorithm used by all_reduce (default ring). With Algorithm::auto_, the
  // chooser picks per call from the message size (set by whoever knows the network, e.g. the
  // cost model of collectives/netsim); without a chooser, a fixed size rule is used.
  // A wrapper built with ShowInner shares this policy with the communicator it wraps: set on
  // either, both see it.
  void set_algorithm(Algorithm a) { collectives_.policy().algorithm = a; }
  Algorithm algorithm() const { return collectives_.policy().algorithm; }
  void set_algorithm_chooser(std::function<Algorithm(std::size_t bytes)> chooser) {
    collectives_.policy().chooser = std::move(chooser);
  }

  // Also traces the async queue: issue, begin, end and waits of every operation.
  void set_tracer(Tracer* tracer) override;

 protected:
  // For a wrapper whose bytes all move through `inner` (device staging): inner's ledger (byte
  // counters, groups) and inner's collective policy, so settings made on either apply to the
  // collectives inner runs, every byte is counted once, and nothing is copied per call.
  Communicator(ShowInner, Communicator& inner);

  // Every collective, checked, with the queue drained. Default: native(call), else our
  // algorithms over this transport. A wrapper that changes every call (staging) overrides this.
  virtual void do_collective(const CollectiveCall& call);
  // A backend's own implementation of `call`; returns false where it has none (for this kind,
  // size or algorithm setting), and our algorithms run instead. Native traffic bypasses
  // send()/recv(): count it with count().
  virtual bool native(const CollectiveCall&) { return false; }
  // Our algorithms for `call` over this communicator's point-to-point exchange.
  void run_algorithm(const CollectiveCall& call) { collectives_.run(*this, call); }

  // Every backend's destructor calls this first: it joins the communication thread while the
  // backend's virtual functions can still be called.
  void stop_async();

  // Runs first on the communication thread. Device backends make their GPU current there: the
  // operations queued with run_async (a reducer's encode and decode kernels) launch kernels
  // before any collective would have set it.
  virtual void on_async_thread_start() {}

 private:
  void before_blocking() override { drain(); }
  AsyncQueue& async();  // the queue and its thread, on first use
  void drain();  // waits for the queue unless called from the communication thread itself

  CollectiveRanks collective_ranks() const;  // this communicator's ranks in the world

  Collectives collectives_;
  std::unique_ptr<AsyncQueue> async_;
};

}  // namespace laconic
