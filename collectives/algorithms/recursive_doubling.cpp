#include "collectives/algorithms/recursive_doubling.h"

#include <cstring>
#include <utility>

#include "core/check.h"

namespace laconic {

PowerOfTwoFold::PowerOfTwoFold(int r, int n) : pof2(1), rank(r) {
  while (2 * pof2 <= n) pof2 *= 2;
  rem = n - pof2;
  if (r >= 2 * rem) newrank = r - rem;
  else newrank = (r % 2 == 1) ? r / 2 : -1;
}

void PowerOfTwoFold::fold_in(Transport& comm, Buf data, ReduceOp op, std::span<std::byte> scratch) const {
  if (rank >= 2 * rem) return;
  if (newrank < 0) {
    comm.send(data.data, data.bytes(), rank + 1);
  } else {
    comm.recv(scratch.data(), data.bytes(), rank - 1);
    reduce_into(data.data, scratch.data(), data.count, data.dtype, op);  // x[r-1] op x[r]
  }
}

void PowerOfTwoFold::unfold(Transport& comm, Buf data) const {
  if (rank >= 2 * rem) return;
  if (newrank < 0) comm.recv(data.data, data.bytes(), rank + 1);
  else comm.send(data.data, data.bytes(), rank - 1);
}

RecursiveDoublingAllReduce::RecursiveDoublingAllReduce(Transport& comm, Buf data, ReduceOp op,
                                                       std::span<std::byte> scratch)
    : comm_(comm), data_(data), op_(op), scratch_(scratch) {
  LC_CHECK(scratch.size() >= data.bytes(), "recursive doubling scratch too small");
}

void RecursiveDoublingAllReduce::run() {
  const int n = comm_.size();
  if (n == 1 || data_.count == 0) return;
  const PowerOfTwoFold fold(comm_.rank(), n);
  fold.fold_in(comm_, data_, op_, scratch_);
  if (fold.newrank >= 0) {
    const std::size_t bytes = data_.bytes();
    // Ping-pong between the caller's buffer and scratch: the lower partner's result lands in the
    // receive buffer (mine op theirs), so swapping roles saves a copy per round.
    void* cur = data_.data;
    void* other = scratch_.data();
    for (int mask = 1; mask < fold.pof2; mask <<= 1) {
      const int partner = fold.newrank ^ mask;
      const int peer = fold.to_rank(partner);
      comm_.sendrecv(cur, bytes, peer, other, bytes, peer);
      // Canonical order: the lower rank's partial is the left operand on both partners.
      if (partner < fold.newrank) {
        reduce_into(cur, other, data_.count, data_.dtype, op_);  // cur = theirs op mine
      } else {
        reduce_into(other, cur, data_.count, data_.dtype, op_);  // other = mine op theirs
        std::swap(cur, other);
      }
    }
    if (cur != data_.data) std::memcpy(data_.data, cur, bytes);
    if (op_ == ReduceOp::avg) finish_avg(data_.data, data_.count, data_.dtype, n);
  }
  fold.unfold(comm_, data_);
}

}  // namespace laconic
