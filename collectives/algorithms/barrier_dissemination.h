// Dissemination barrier (Hensgen, Finkel & Manber 1988). Rounds k = 1, 2, 4, ... < N: each rank
// sends one byte to r + k and receives one from r - k (mod N). After round k a rank has heard,
// directly or transitively, from the 2k ranks before it, so after ceil(log2 N) rounds from all.
// Within one barrier the peers r + k are distinct, and pairs deliver in order, so back-to-back
// barriers cannot confuse their rounds.
// Bytes on the wire per rank: sent = recv = messages = ceil(log2 N) (one byte each); N == 1: none.
// Cost: ceil(log2 N)·α.
#pragma once

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace laconic {

class BarrierDissemination {
 public:
  explicit BarrierDissemination(Transport& comm) : comm_(comm) {}
  void run();

 private:
  Transport& comm_;
};

}  // namespace laconic
