// The live estimate of a training run with [network] and sync.overlap = false (the figure of
// record is the replay of the run's trace on SimGrid, sim/replay.h; this clock cannot see overlap).
// A Communicator that runs on top of any other one and simulates a network: the bytes really
// move through `inner` (so results are exactly inner's), while every message is charged on a
// per-rank virtual clock as if it crossed the link of the topology between its two ranks.
//
// Clock model (per rank, seconds; LinkSpec of tier(src, dst): α latency, B bandwidth):
//   send of n bytes at clock t:  the message leaves at t and arrives at t + α + n/B; the sender's
//                                clock becomes t + n/B (it is busy serialising the bytes).
//   recv:                        clock = max(clock, arrival): waiting for a late sender costs.
//   sendrecv (one ring step):    clock = max(t + n_out/B_out, arrival of the incoming message):
//                                the send and the receive overlap (full duplex).
// Links are full duplex and contention-free: every ordered pair has its own link, a rank's sends
// are serialised only by its own clock, and receives from different peers overlap (an incast of
// k messages completes at the latest arrival, not after k serialisations: optimistic for it).
// The sender's clock travels with the message as an 8-byte timestamp sent through `inner` just
// before the payload; this communicator's byte counters (bytes(), tier_bytes(t)) count payload
// only, inner's counters include the timestamps (8 bytes and one more message per message).
//
// Collectives: with set_algorithm(Algorithm::native) every collective is forwarded to inner's
// (its native one, e.g. NCCL/MPI) and charged as CostModel::native on the topology: the clocks
// are first synchronised to their maximum (an all-gather of the 8-byte clocks through inner; a
// native collective cannot finish before its last rank joins), then advanced by the modelled
// time, identically on every rank. Its traffic is counted as the nccl-tests bus bytes of one
// rank (all-reduce 2(p-1)/p·S, reduce-scatter/all-gather/all-to-all (p-1)/p·S, broadcast and
// reduce S; sent = recv), attributed like a ring: sent on tier(r, r+1), received on tier(r-1, r).
// Otherwise the base-class algorithms run over this communicator's point-to-point, so every
// message of ring, recursive doubling, Rabenseifner, hierarchical, trees, ... is charged exactly.
//
// Compute: advance_compute(s) adds s·slowdown(rank). There is one timeline per rank: compute and
// communication add up (overlap of an async collective with compute is not modelled). clock(),
// comm_time() and the byte counters are updated by whichever thread runs the collective: read them
// (and call advance_compute) only when no async collective is in flight, e.g. after wait_all().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/netsim/cost_model.h"
#include "collectives/netsim/topology.h"

namespace laconic {

struct SimOptions {
  CostOptions cost;  // γ and the hierarchical inter algorithm for native collectives
};

class SimCommunicator final : public Communicator {
 public:
  // `inner` must outlive this communicator; topo.size() == inner.size(). Calls set_groups(group_of).
  SimCommunicator(Communicator& inner, const Topology& topo, SimOptions opts = {});
  ~SimCommunicator() override { stop_async(); }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return "sim(" + inner_.backend() + ")"; }

  // Adds `seconds` of compute, scaled by this rank's slowdown factor.
  void advance_compute(double seconds);
  // This rank's virtual time, and the part of it spent inside communication (waiting included).
  double clock() const { return clock_; }
  double comm_time() const { return comm_time_; }
  const Topology& topology() const { return topo_; }
  Communicator& inner() { return inner_; }

 protected:
  void do_send(const void* data, std::size_t bytes, int peer) override;
  void do_recv(void* data, std::size_t bytes, int peer) override;
  void do_sendrecv(const void* send_data, std::size_t send_bytes, int to, void* recv_data,
                   std::size_t recv_bytes, int from) override;

  // With Algorithm::native: inner's collective, charged by the cost model. Otherwise false, and
  // our algorithms run over this communicator's (charged) point-to-point.
  bool native(const CollectiveCall& call) override;

 private:
  // Time of n bytes on the link to/from `peer`.
  double serialise(std::size_t n, int peer) const;
  double arrival(double sent_at, std::size_t n, int peer) const;
  void set_clock(double t);  // advances clock_ (never backwards) and comm_time_
  // A native collective: synchronise the clocks to their maximum, charge the cost model's time
  // for it and count its nccl-tests bus bytes on the ring links.
  void charge_native(const CollectiveCall& call);
  Communicator& inner_;
  Topology topo_;
  CostModel model_;
  double clock_ = 0;
  double comm_time_ = 0;
  std::vector<double> clocks_;  // every rank's clock, gathered at a native collective
};

}  // namespace laconic
