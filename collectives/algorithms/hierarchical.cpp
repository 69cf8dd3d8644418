#include "collectives/algorithms/hierarchical.h"

#include "collectives/algorithms/broadcast_tree.h"
#include "collectives/algorithms/ring_allreduce.h"
#include "collectives/algorithms/subset_transport.h"
#include "collectives/algorithms/tree_reduce.h"
#include "core/check.h"

namespace laconic {

HierarchicalAllReduce::HierarchicalAllReduce(Transport& comm, Buf data, ReduceOp op, std::span<std::byte> scratch,
                                             std::span<const int> group_of)
    : comm_(comm), data_(data), op_(op), scratch_(scratch), group_of_(group_of) {
  LC_CHECK(group_of.empty() || group_of.size() == static_cast<std::size_t>(comm.size()), "hierarchical: ",
           group_of.size(), " group entries for ", comm.size(), " ranks");
  LC_CHECK(scratch.size() >= scratch_bytes(data.count, data.dtype, comm.size()), "hierarchical scratch too small");
}

void HierarchicalAllReduce::run() {
  const int n = comm_.size(), r = comm_.rank();
  if (n == 1 || data_.count == 0) return;
  const auto group = [&](int q) { return group_of_.empty() ? 0 : group_of_[static_cast<std::size_t>(q)]; };

  // Member lists in scratch (no allocation): this rank's group, and the leaders (the first rank
  // seen of each group). O(N·L) to build, negligible next to moving S bytes.
  int* members = reinterpret_cast<int*>(scratch_.data());
  int* leaders = members + n;
  std::size_t n_members = 0, n_leaders = 0;
  for (int q = 0; q < n; ++q) {
    if (group(q) == group(r)) members[n_members++] = q;
    bool seen = false;
    for (std::size_t l = 0; l < n_leaders && !seen; ++l) seen = group(leaders[l]) == group(q);
    if (!seen) leaders[n_leaders++] = q;
  }
  const std::span<std::byte> work = scratch_.subspan(lists_bytes(n));

  // avg folds as sum at both levels; the ring owner divides by the whole world once (below).
  const ReduceOp fold_op = op_ == ReduceOp::avg ? ReduceOp::sum : op_;
  SubsetTransport local(comm_, {members, n_members});
  TreeReduce(local, data_, fold_op, 0, work).run();
  if (r == members[0]) {
    SubsetTransport top(comm_, {leaders, n_leaders});
    const RingChunks chunks{data_.count, top.size()};
    RingReduceScatter(top, data_, chunks, fold_op, work).run();
    if (op_ == ReduceOp::avg) {
      const Buf own = data_.sub(chunks.offset(top.rank()), chunks.size(top.rank()));
      finish_avg(own.data, own.count, own.dtype, n);
    }
    RingAllGather(top, data_, chunks).run();
  }
  BroadcastTree(local, data_.data, data_.bytes(), 0).run();
}

}  // namespace laconic
