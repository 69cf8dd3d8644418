// Hierarchical all-reduce over the communicator's groups (nodes, datacenters; comm.groups():
// group_of[r], empty = one group), the two-level scheme of Horovod's hierarchical all-reduce and
// of NCCL's tree across nodes: cheap intra-group links carry the bulk, and only one rank per
// group crosses the slow tier. Groups may be uneven and non-contiguous; the leader of a group is
// its lowest rank, members are numbered by increasing rank within the group (local index v, the
// leader is v = 0), and leaders by increasing rank (leader index l of L groups).
//   1. reduce:      TreeReduce inside each group to the leader (binomial tree over local indices).
//   2. all-reduce:  among the L leaders only, the ring (RingReduceScatter + RingAllGather over a
//                   SubsetTransport of the leaders). avg: both levels fold as sum, and the
//                   owner of each ring chunk divides it by p (the whole world) once, before the
//                   all-gather, so every rank gets the owner's bits.
//   3. broadcast:   BroadcastTree inside each group from the leader.
// Deterministic: each level has a fixed fold order (TreeReduce's, then the ring's chunk order).
//
// Bytes on the wire per rank for S = count·E bytes (count == 0 or p == 1: nothing at all). In a
// group of g ranks, let c(v) = the children of local index v in the binomial tree =
// #{ m = 2^k : m < lowbit(v) (v = 0: any m), v + m < g } (so c(0) = ceil(lg g)). Then
//   sent = recv = ([v != 0] + c(v))·S,          messages_sent = [v != 0] + c(v)
// (steps 1 and 3 mirror each other), and a leader adds the ring's bytes for L ranks, chunking
// count over L (ring_allreduce.h): sent += E·(2·count - size(l) - size(l+1)),
// recv += E·(2·count - size(l-1) - size(l)), messages_sent += 2(L-1) when L > 1.
// Cost, g = the largest group: 2·ceil(lg g)·(α_in + Sβ_in) + ceil(lg g)·Sγ (within groups)
//   + 2(L-1)α_out + 2(L-1)/L·Sβ_out + (L-1)/L·Sγ (between leaders).
#pragma once

#include <cstddef>
#include <span>

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace laconic {

class HierarchicalAllReduce {
 public:
  // `group_of`: comm.groups() (N entries, or empty for one group). `scratch`: at least
  // scratch_bytes(count, dtype, N): the member lists, then TreeReduce's 2·S.
  HierarchicalAllReduce(Transport& comm, Buf data, ReduceOp op, std::span<std::byte> scratch,
                        std::span<const int> group_of);
  static std::size_t scratch_bytes(std::size_t count, DType t, int n) {
    return lists_bytes(n) + 2 * count * dtype_size(t);
  }
  void run();

 private:
  // Two lists of up to n ranks (this group's members, the leaders), padded to keep data aligned.
  static std::size_t lists_bytes(int n) { return (2 * static_cast<std::size_t>(n) * sizeof(int) + 63) / 64 * 64; }

  Transport& comm_;
  Buf data_;
  ReduceOp op_;
  std::span<std::byte> scratch_;
  std::span<const int> group_of_;
};

}  // namespace laconic
