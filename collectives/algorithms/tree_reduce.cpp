#include "collectives/algorithms/tree_reduce.h"

#include <cstring>

#include "core/check.h"

namespace laconic {

TreeReduce::TreeReduce(Transport& comm, Buf data, ReduceOp op, int root, std::span<std::byte> scratch)
    : comm_(comm), data_(data), op_(op), root_(root), scratch_(scratch) {
  LC_CHECK(root >= 0 && root < comm.size(), "reduce root ", root, " outside a world of ", comm.size(), " ranks");
  LC_CHECK(scratch.size() >= 2 * data.bytes(), "tree reduce scratch too small");
}

void TreeReduce::run() {
  const int n = comm_.size();
  const std::size_t bytes = data_.bytes();
  if (bytes == 0) return;
  const int v = (comm_.rank() - root_ + n) % n;
  const auto to_rank = [&](int u) { return (u + root_) % n; };
  std::byte* in = scratch_.data();
  void* acc = data_.data;
  if (v != 0) {  // accumulate in scratch: a non-root's buffer stays as the caller left it
    acc = scratch_.data() + bytes;
    std::memcpy(acc, data_.data, bytes);
  }
  schedule(
      n, v,
      [&](int u) {
        comm_.recv(in, bytes, to_rank(u));
        reduce_into(acc, in, data_.count, data_.dtype, op_);
      },
      [&](int u) { comm_.send(acc, bytes, to_rank(u)); });
  if (v == 0 && op_ == ReduceOp::avg) finish_avg(data_.data, data_.count, data_.dtype, n);
}

}  // namespace laconic
