#include "collectives/algorithms/ring_allreduce.h"

#include <algorithm>

#include "core/check.h"

namespace laconic {
namespace {
int wrap(int i, int n) { return ((i % n) + n) % n; }
}  // namespace

std::size_t RingChunks::size(int c) const {
  if (!counts.empty()) return counts[static_cast<std::size_t>(c)];
  const auto un = static_cast<std::size_t>(n);
  return count / un + (static_cast<std::size_t>(c) < count % un ? 1 : 0);
}

std::size_t RingChunks::offset(int c) const {
  if (!counts.empty()) {
    std::size_t o = 0;
    for (int i = 0; i < c; ++i) o += counts[static_cast<std::size_t>(i)];
    return o;
  }
  const auto un = static_cast<std::size_t>(n);
  const auto uc = static_cast<std::size_t>(c);
  return uc * (count / un) + std::min(uc, count % un);
}

std::size_t RingChunks::max_size() const {
  if (!counts.empty()) return *std::max_element(counts.begin(), counts.end());
  return n > 0 ? size(0) : 0;
}

RingReduceScatter::RingReduceScatter(Transport& comm, Buf data, RingChunks chunks, ReduceOp op,
                                     std::span<std::byte> scratch)
    : comm_(comm), data_(data), chunks_(chunks), op_(op), scratch_(scratch) {
  LC_CHECK(scratch.size() >= chunks.max_size() * dtype_size(data.dtype), "ring scratch too small");
}

void RingReduceScatter::run() {
  const int n = comm_.size(), r = comm_.rank();
  if (n == 1 || data_.count == 0) return;
  const int next = wrap(r + 1, n), prev = wrap(r - 1, n);
  const auto chunk = [&](int c) { return data_.sub(chunks_.offset(wrap(c, n)), chunks_.size(wrap(c, n))); };
  for (int s = 0; s < n - 1; ++s) {
    const Buf out = chunk(r - s - 1);
    const Buf acc = chunk(r - s - 2);
    comm_.sendrecv(out.data, out.bytes(), next, scratch_.data(), acc.bytes(), prev);
    // The partial from upstream is the left operand: the fold order documented in the header.
    reduce_into(acc.data, scratch_.data(), acc.count, acc.dtype, op_);
  }
}

RingAllGather::RingAllGather(Transport& comm, Buf data, RingChunks chunks)
    : comm_(comm), data_(data), chunks_(chunks) {}

void RingAllGather::run() {
  const int n = comm_.size(), r = comm_.rank();
  if (n == 1 || data_.count == 0) return;
  const int next = wrap(r + 1, n), prev = wrap(r - 1, n);
  const auto chunk = [&](int c) { return data_.sub(chunks_.offset(wrap(c, n)), chunks_.size(wrap(c, n))); };
  for (int s = 0; s < n - 1; ++s) {
    const Buf out = chunk(r - s);
    const Buf in = chunk(r - s - 1);
    comm_.sendrecv(out.data, out.bytes(), next, in.data, in.bytes(), prev);
  }
}

RingAllReduce::RingAllReduce(Transport& comm, Buf data, ReduceOp op, std::span<std::byte> scratch)
    : comm_(comm), data_(data), op_(op), scratch_(scratch) {}

void RingAllReduce::run() {
  const int n = comm_.size();
  if (n == 1 || data_.count == 0) return;  // sum, avg and max of one contribution are the identity
  const RingChunks chunks{data_.count, n};
  RingReduceScatter(comm_, data_, chunks, op_, scratch_).run();
  if (op_ == ReduceOp::avg) {
    // Divided once, by the owner, so every rank receives the same bits (sum/N correctly rounded).
    const Buf own = data_.sub(chunks.offset(comm_.rank()), chunks.size(comm_.rank()));
    finish_avg(own.data, own.count, own.dtype, n);
  }
  RingAllGather(comm_, data_, chunks).run();
}

}  // namespace laconic
