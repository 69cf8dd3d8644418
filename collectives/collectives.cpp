#include "collectives/collectives.h"

#include <cstring>

#include "collectives/algorithms/barrier_dissemination.h"
#include "collectives/algorithms/broadcast_tree.h"
#include "collectives/algorithms/hierarchical.h"
#include "collectives/algorithms/pairwise_alltoall.h"
#include "collectives/algorithms/rabenseifner.h"
#include "collectives/algorithms/recursive_doubling.h"
#include "collectives/algorithms/ring_allreduce.h"
#include "collectives/algorithms/tree_reduce.h"
#include "collectives/transport.h"
#include "core/check.h"

namespace laconic {

std::span<std::byte> Collectives::scratch(std::size_t bytes, int slot) {
  auto& s = scratch_[slot];
  if (s.size() < bytes) s.resize(bytes);
  return {s.data(), bytes};
}

Algorithm Collectives::all_reduce_algorithm(std::size_t bytes) const {
  const Algorithm a = policy_->algorithm;
  if (a != Algorithm::auto_) return a;
  // Without a cost model, MPICH's fixed switch point: recursive doubling (lg p latencies) below
  // 2 KiB, where latency dominates; the bandwidth-optimal ring above (docs/algorithms.md).
  constexpr std::size_t kShortMessage = 2048;
  return policy_->chooser ? policy_->chooser(bytes)
         : bytes < kShortMessage ? Algorithm::recursive_doubling
                                 : Algorithm::ring;
}

void Collectives::all_reduce(Transport& t, Buf data, ReduceOp op) {
  const Algorithm a = all_reduce_algorithm(data.bytes());
  const int n = t.size();
  switch (a) {
    case Algorithm::ring:
    case Algorithm::native:  // a backend without a native all-reduce: ours is its native one
      RingAllReduce(t, data, op, scratch(RingAllReduce::scratch_bytes(data.count, data.dtype, n))).run();
      return;
    case Algorithm::recursive_doubling:
      RecursiveDoublingAllReduce(t, data, op,
                                 scratch(RecursiveDoublingAllReduce::scratch_bytes(data.count, data.dtype, n))).run();
      return;
    case Algorithm::rabenseifner:
      RabenseifnerAllReduce(t, data, op, scratch(RabenseifnerAllReduce::scratch_bytes(data.count, data.dtype, n))).run();
      return;
    case Algorithm::hierarchical:
      HierarchicalAllReduce(t, data, op, scratch(HierarchicalAllReduce::scratch_bytes(data.count, data.dtype, n)),
                            t.groups()).run();
      return;
    default:
      LC_CHECK(false, "all-reduce algorithm '", name_of(a), "' is not available");
  }
}

void Collectives::run(Transport& t, const CollectiveCall& c) {
  const int n = t.size(), r = t.rank();
  switch (c.kind) {
    case Collective::all_reduce:
      return all_reduce(t, c.data, c.op);
    case Collective::reduce:
      return TreeReduce(t, c.data, c.op, c.root, scratch(2 * c.data.bytes())).run();
    case Collective::reduce_scatter: {
      // Work on a copy of `send` (the ring folds in place), then take this rank's reduced block.
      std::span<std::byte> work = scratch(c.send.bytes(), 1);
      if (c.send.bytes()) std::memcpy(work.data(), c.send.data, c.send.bytes());
      const Buf all{work.data(), c.send.count, c.send.dtype};
      const RingChunks chunks{c.send.count, n};
      RingReduceScatter(t, all, chunks, c.op, scratch(chunks.max_size() * dtype_size(c.send.dtype))).run();
      const Buf own = all.sub(chunks.offset(r), chunks.size(r));
      if (c.op == ReduceOp::avg) finish_avg(own.data, own.count, own.dtype, n);
      if (own.bytes()) std::memcpy(c.data.data, own.data, own.bytes());
      return;
    }
    case Collective::all_gather: {
      const RingChunks chunks = c.counts.empty() ? RingChunks{c.data.count, n} : RingChunks{c.data.count, n, c.counts};
      const Buf own = c.data.sub(chunks.offset(r), chunks.size(r));
      // memmove: `send` may be this rank's own block of `data` (in-place all-gather).
      if (own.bytes()) std::memmove(own.data, c.send.data, own.bytes());
      return RingAllGather(t, c.data, chunks).run();
    }
    case Collective::all_to_all:
      return PairwiseAllToAll(t, c.send, c.data).run();
    case Collective::broadcast:
      return BroadcastTree(t, c.data.data, c.data.bytes(), c.root).run();
    case Collective::barrier:
      return BarrierDissemination(t).run();
  }
}

}  // namespace laconic
