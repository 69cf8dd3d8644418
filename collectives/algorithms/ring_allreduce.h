// Ring collectives (Patarasuk & Yuan 2009; the gloo/NCCL ring), around r -> r+1 using sendrecv
// with the two neighbours. A buffer of `count` elements is cut into N chunks (ChunkLayout); the
// reduce-scatter phase leaves rank r owning the fully reduced chunk r, the all-gather phase
// circulates every owned chunk to every rank. All-reduce = reduce-scatter + all-gather.
//
// Equal chunking (RingChunks): chunk c has
//   size(c)   = floor(count/N) + (c < count % N ? 1 : 0)        (sizes differ by at most 1)
//   offset(c) = c * floor(count/N) + min(c, count % N)
// Variable chunking (all_gather_v): size(c) = counts[c], offset(c) = counts[0] + ... + counts[c-1].
//
// Steps (N ranks, indices mod N):
//   reduce-scatter, s = 0..N-2: send chunk r-s-1 to r+1, receive chunk r-s-2 from r-1 and fold
//     it into the local one. Chunk c starts at rank c+1 and travels c+1 -> c+2 -> ... -> c, so
//     its value is the left fold ((x[c+1] + x[c+2]) + ...) + x[c], always in that order.
//     After N-1 steps rank r owns the fully reduced chunk r (avg: divided by N here, once).
//   all-gather, s = 0..N-2: send chunk r-s to r+1, receive chunk r-s-1 from r-1 (in place).
//     Every rank ends with the owner's bits for every chunk: results are bitwise identical.
//
// Bytes on the wire for rank r (E = element size, sizes in elements):
//   reduce-scatter: sent(r) = E * (count - size(r)),     recv(r) = E * (count - size(r-1))
//   all-gather:     sent(r) = E * (count - size(r+1)),   recv(r) = E * (count - size(r))
//   all-reduce:     sent(r) = E * (2*count - size(r) - size(r+1)), recv(r) = E * (2*count - size(r-1) - size(r))
//   messages_sent(r) = N-1 per phase when count > 0 and N > 1, else 0 (nothing is sent at all).
// All-reduce summed over ranks: 2*(N-1)*S; when N divides count, exactly 2*(N-1)/N*S per rank.
// Cost: 2(N-1)α + 2(N-1)/N·Sβ + (N-1)/N·Sγ (Thakur, Rabenseifner & Gropp 2005).
#pragma once

#include <cstddef>
#include <span>

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace laconic {

// The ring's chunking of `count` elements over `n` ranks (see the formulas above). With
// `counts` non-empty (n entries), chunk c is counts[c] elements instead.
struct RingChunks {
  std::size_t count;
  int n;
  std::span<const std::size_t> counts = {};
  std::size_t size(int c) const;
  std::size_t offset(int c) const;
  std::size_t max_size() const;
};

// In place on `data` (all `count` elements). Afterwards rank r's chunk r holds the reduction;
// the other chunks hold partial sums. `scratch` must hold max_size() elements.
class RingReduceScatter {
 public:
  RingReduceScatter(Transport& comm, Buf data, RingChunks chunks, ReduceOp op, std::span<std::byte> scratch);
  void run();

 private:
  Transport& comm_;
  Buf data_;
  RingChunks chunks_;
  ReduceOp op_;
  std::span<std::byte> scratch_;
};

// In place on `data`: rank r's chunk r is circulated to every rank.
class RingAllGather {
 public:
  RingAllGather(Transport& comm, Buf data, RingChunks chunks);
  void run();

 private:
  Transport& comm_;
  Buf data_;
  RingChunks chunks_;
};

class RingAllReduce {
 public:
  // `scratch` receives incoming partial chunks: at least scratch_bytes(count, dtype, N).
  RingAllReduce(Transport& comm, Buf data, ReduceOp op, std::span<std::byte> scratch);
  static std::size_t scratch_bytes(std::size_t count, DType t, int n) {
    return RingChunks{count, n}.max_size() * dtype_size(t);
  }
  void run();

 private:
  Transport& comm_;
  Buf data_;
  ReduceOp op_;
  std::span<std::byte> scratch_;
};

}  // namespace laconic
