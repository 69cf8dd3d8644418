#include "collectives/algorithms/rabenseifner.h"

#include "collectives/algorithms/recursive_doubling.h"
#include "collectives/algorithms/ring_allreduce.h"
#include "core/check.h"

namespace laconic {

RabenseifnerAllReduce::RabenseifnerAllReduce(Transport& comm, Buf data, ReduceOp op,
                                             std::span<std::byte> scratch)
    : comm_(comm), data_(data), op_(op), scratch_(scratch) {
  LC_CHECK(scratch.size() >= data.bytes(), "Rabenseifner scratch too small");
}

void RabenseifnerAllReduce::run() {
  const int n = comm_.size();
  if (n == 1 || data_.count == 0) return;
  const PowerOfTwoFold fold(comm_.rank(), n);
  fold.fold_in(comm_, data_, op_, scratch_);
  if (const int nr = fold.newrank; nr >= 0) {
    const RingChunks blocks{data_.count, fold.pof2};
    // win(x, m): the aligned window of m blocks that contains block x (see the header).
    const auto win = [&](int x, int m) {
      const int first = x & ~(m - 1);
      const std::size_t begin = blocks.offset(first);
      return data_.sub(begin, blocks.offset(first + m) - begin);
    };
    for (int m = fold.pof2 / 2; m >= 1; m /= 2) {  // reduce-scatter by recursive halving
      const int q = nr ^ m;
      const Buf give = win(q, m), keep = win(nr, m);
      comm_.sendrecv(give.data, give.bytes(), fold.to_rank(q), scratch_.data(), keep.bytes(), fold.to_rank(q));
      reduce_into(keep.data, scratch_.data(), keep.count, keep.dtype, op_);
    }
    if (op_ == ReduceOp::avg) {
      const Buf own = win(nr, 1);  // divided once, by the owner, before anyone else sees it
      finish_avg(own.data, own.count, own.dtype, n);
    }
    for (int m = 1; m < fold.pof2; m *= 2) {  // all-gather by recursive doubling
      const int q = nr ^ m;
      const Buf mine = win(nr, m), theirs = win(q, m);
      comm_.sendrecv(mine.data, mine.bytes(), fold.to_rank(q), theirs.data, theirs.bytes(), fold.to_rank(q));
    }
  }
  fold.unfold(comm_, data_);
}

}  // namespace laconic
