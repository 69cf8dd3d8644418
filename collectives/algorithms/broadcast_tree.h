// Binomial-tree broadcast. Ranks are renumbered relative to the root, v = (r - root) mod N.
//   Receive: rank v != 0 receives from parent v - lowbit(v) (lowbit = its lowest set bit).
//   Send:    then, for m = highest power of two below lowbit(v) (root: below N) down to 1,
//            sends to v + m when v + m < N. The data reaches everyone in ceil(log2 N) rounds.
// Bytes on the wire for S bytes (S > 0; S == 0 or N == 1 sends nothing):
//   recv(root) = 0, recv(v != 0) = S; sent(v) = children(v) * S, children(root) = ceil(log2 N);
//   summed over ranks: sent = recv = (N-1)*S, messages = N-1.
// Cost: ceil(log2 N)·(α + Sβ).
#pragma once

#include <cstddef>

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace laconic {

class BroadcastTree {
 public:
  BroadcastTree(Transport& comm, void* data, std::size_t bytes, int root);
  void run();

  // The tree's messages of rank v (relative to the root) of n, in run()'s order: recv(parent),
  // then send(child) for each child; ranks passed relative to the root. The replay of a native
  // broadcast (sim/replay.cpp) sends the same messages.
  template <class Recv, class Send>
  static void schedule(int n, int v, Recv recv, Send send) {
    // The parent: the lowest set bit of v. The root has none; its subtree spans all n.
    int mask = 1;
    while (mask < n) {
      if (v & mask) {
        recv(v - mask);
        break;
      }
      mask <<= 1;
    }
    // Children v + m for every power of two m below that bit, farthest first (largest subtree).
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (v + mask < n) send(v + mask);
  }

 private:
  int to_rank(int v) const { return (v + root_) % n_; }

  Transport& comm_;
  void* data_;
  std::size_t bytes_;
  int root_;
  int n_;
  int v_;  // this rank relative to the root
};

}  // namespace laconic
