#include "collectives/algorithms/ring_allreduce.h"

#include <algorithm>

namespace laconic {

std::size_t RingChunks::size(int c) const {
  const auto un = static_cast<std::size_t>(n);
  return count / un + (static_cast<std::size_t>(c) < count % un ? 1 : 0);
}

std::size_t RingChunks::offset(int c) const {
  const auto un = static_cast<std::size_t>(n);
  const auto uc = static_cast<std::size_t>(c);
  return uc * (count / un) + std::min(uc, count % un);
}

RingAllReduce::RingAllReduce(Communicator& comm, std::span<float> data, ReduceOp op,
                             std::vector<float>& scratch)
    : comm_(comm),
      data_(data),
      op_(op),
      scratch_(scratch),
      rank_(comm.rank()),
      n_(comm.size()),
      chunks_{data.size(), comm.size()} {}

void RingAllReduce::run() {
  if (n_ == 1 || data_.empty()) return;  // sum, avg and max of one contribution are the identity
  if (scratch_.size() < chunks_.max_size()) scratch_.resize(chunks_.max_size());
  reduce_scatter();
  if (op_ == ReduceOp::avg) {
    // Divided once, by the owner, so every rank receives the same bits (sum/N correctly rounded).
    const float n = static_cast<float>(n_);
    for (float& x : chunk(rank_)) x /= n;
  }
  all_gather();
}

void RingAllReduce::reduce_scatter() {
  const int next = wrap(rank_ + 1), prev = wrap(rank_ - 1);
  for (int s = 0; s < n_ - 1; ++s) {
    const std::span<const float> out = chunk(wrap(rank_ - s - 1));
    const std::span<float> acc = chunk(wrap(rank_ - s - 2));
    const std::span<float> in(scratch_.data(), acc.size());
    comm_.sendrecv(out.data(), out.size_bytes(), next, in.data(), in.size_bytes(), prev);
    fold(acc, in);
  }
}

void RingAllReduce::all_gather() {
  const int next = wrap(rank_ + 1), prev = wrap(rank_ - 1);
  for (int s = 0; s < n_ - 1; ++s) {
    const std::span<const float> out = chunk(wrap(rank_ - s));
    const std::span<float> in = chunk(wrap(rank_ - s - 1));
    comm_.sendrecv(out.data(), out.size_bytes(), next, in.data(), in.size_bytes(), prev);
  }
}

void RingAllReduce::fold(std::span<float> acc, std::span<const float> in) const {
  // `in` is the partial from upstream ranks and `acc` holds this rank's contribution; the partial
  // goes on the left so the fold order is the one documented in the header.
  const std::size_t n = acc.size();
  float* a = acc.data();
  const float* b = in.data();
  if (op_ == ReduceOp::max) {
    for (std::size_t i = 0; i < n; ++i) a[i] = std::max(b[i], a[i]);
  } else {
    for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + a[i];
  }
}

}  // namespace laconic
