// Binomial-tree reduce to a root (the mirror image of BroadcastTree). Ranks are renumbered
// relative to the root, v = (r - root) mod N. For mask = 1, 2, 4, ...: a rank with bit `mask`
// set sends its partial to v - mask and is done; otherwise it receives the partial of v + mask
// (when that exists) and folds it in. The fold order is fixed by N and root, so the result is
// deterministic. Non-root ranks accumulate in scratch, leaving their buffer unchanged.
// Bytes for S bytes: every non-root rank sends S once (one message); rank v receives S from each
// child u (the u with u & (u-1) == v; the root has ceil(log2 N)); summed over ranks (N-1)·S.
// S == 0 or N == 1: nothing. Cost: ceil(log2 N)·(α + Sβ + Sγ).
#pragma once

#include <span>

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace laconic {

class TreeReduce {
 public:
  // scratch: at least 2 * data.bytes() (the incoming partial, and the non-root accumulator).
  TreeReduce(Transport& comm, Buf data, ReduceOp op, int root, std::span<std::byte> scratch);
  void run();

  // The tree's messages of rank v (relative to the root) of n, in run()'s order: recv(child) for
  // each child, nearest first, then send(parent); ranks passed relative to the root. The replay of
  // a native reduce (sim/replay.cpp) sends the same messages.
  template <class Recv, class Send>
  static void schedule(int n, int v, Recv recv, Send send) {
    for (int mask = 1; mask < n; mask <<= 1) {
      if (v & mask) {
        send(v - mask);
        return;
      }
      if (v + mask < n) recv(v + mask);
    }
  }

 private:
  Transport& comm_;
  Buf data_;
  ReduceOp op_;
  int root_;
  std::span<std::byte> scratch_;
};

}  // namespace laconic
