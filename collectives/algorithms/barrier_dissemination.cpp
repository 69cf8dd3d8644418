#include "collectives/algorithms/barrier_dissemination.h"

namespace laconic {

void BarrierDissemination::run() {
  const int n = comm_.size(), r = comm_.rank();
  const char out = 1;
  char in = 0;
  for (int k = 1; k < n; k <<= 1)
    comm_.sendrecv(&out, 1, (r + k) % n, &in, 1, (r - k + n) % n);
}

}  // namespace laconic
