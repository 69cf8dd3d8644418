// Pairwise-exchange all-to-all: in step s = 1..N-1 rank r sends its block for r+s and receives
// the block from r-s, so every step is a perfect matching and no rank is a hotspot.
// Bytes per rank for blocks of B bytes: sent = recv = (N-1)·B in N-1 messages (B == 0 or N == 1:
// nothing, no messages). send and recv must not overlap.
// Cost: (N-1)·(α + Bβ).
#pragma once

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace laconic {

class PairwiseAllToAll {
 public:
  PairwiseAllToAll(Transport& comm, CBuf send, Buf recv);
  void run();

 private:
  Transport& comm_;
  CBuf send_;
  Buf recv_;
};

}  // namespace laconic
