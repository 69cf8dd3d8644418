#include "collectives/algorithms/pairwise_alltoall.h"

#include <cstdint>
#include <cstring>

#include "core/check.h"

namespace laconic {

PairwiseAllToAll::PairwiseAllToAll(Transport& comm, CBuf send, Buf recv)
    : comm_(comm), send_(send), recv_(recv) {
  const auto n = static_cast<std::size_t>(comm.size());
  LC_CHECK(send.dtype == recv.dtype && send.count == recv.count && send.count % n == 0,
           "all_to_all needs equal send/recv buffers of size() blocks; got ", send.count, " and ",
           recv.count, " elements for ", n, " ranks");
  // Step s overwrites block r-s of recv while blocks of send for later steps are still unsent, so
  // the two must be disjoint (no in-place all-to-all).
  const auto s0 = reinterpret_cast<std::uintptr_t>(send.data), r0 = reinterpret_cast<std::uintptr_t>(recv.data);
  LC_CHECK(send.bytes() == 0 || s0 + send.bytes() <= r0 || r0 + recv.bytes() <= s0,
           "all_to_all: send and recv buffers overlap");
}

void PairwiseAllToAll::run() {
  const int n = comm_.size(), r = comm_.rank();
  const std::size_t block = send_.count / static_cast<std::size_t>(n);
  const auto at = [&](int i) { return static_cast<std::size_t>(i) * block; };
  if (block == 0) return;
  std::memcpy(recv_.sub(at(r), block).data, send_.sub(at(r), block).data, block * dtype_size(send_.dtype));
  for (int s = 1; s < n; ++s) {
    const int to = (r + s) % n, from = (r - s + n) % n;
    const CBuf out = send_.sub(at(to), block);
    const Buf in = recv_.sub(at(from), block);
    comm_.sendrecv(out.data, out.bytes(), to, in.data, in.bytes(), from);
  }
}

}  // namespace laconic
