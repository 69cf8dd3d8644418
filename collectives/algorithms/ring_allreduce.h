// Ring all-reduce (Patarasuk & Yuan 2009; the gloo/NCCL ring): a reduce-scatter followed by an
// all-gather, both around the ring r -> r+1 using sendrecv with the two neighbours.
//
// Chunking: the `count` elements are cut into N chunks; chunk c has
//   size(c)   = floor(count/N) + (c < count % N ? 1 : 0)        (sizes differ by at most 1)
//   offset(c) = c * floor(count/N) + min(c, count % N)
//
// Steps (N ranks, indices mod N):
//   reduce-scatter, s = 0..N-2: send chunk r-s-1 to r+1, receive chunk r-s-2 from r-1 and fold
//     it into the local one. Chunk c starts at rank c+1 and travels c+1 -> c+2 -> ... -> c, so
//     its value is the left fold ((x[c+1] + x[c+2]) + ...) + x[c], always in that order.
//     After N-1 steps rank r owns the fully reduced chunk r (avg: divided by N here, once).
//   all-gather, s = 0..N-2: send chunk r-s to r+1, receive chunk r-s-1 from r-1 (in place).
//     Every rank ends with the owner's bits for every chunk: results are bitwise identical.
//
// Bytes on the wire for rank r (S = 4*count bytes, sizes in elements):
//   sent(r) = 4 * (2*count - size(r) - size(r+1))      (every chunk but r, then every chunk but r+1)
//   recv(r) = 4 * (2*count - size(r-1) - size(r))
//   messages_sent(r) = 2*(N-1) when count > 0 and N > 1, else 0 (nothing is sent at all).
// Summed over ranks: 2*(N-1)*S; when N divides count, exactly 2*(N-1)/N*S per rank.
// Cost: 2(N-1)α + 2(N-1)/N·Sβ + (N-1)/N·Sγ (Thakur, Rabenseifner & Gropp 2005).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "collectives/communicator.h"

namespace laconic {

// The ring's chunking of `count` elements over `n` ranks (see the formulas above).
struct RingChunks {
  std::size_t count;
  int n;
  std::size_t size(int c) const;
  std::size_t offset(int c) const;
  std::size_t max_size() const { return size(0); }
};

class RingAllReduce {
 public:
  // `scratch` receives incoming partial chunks; it is grown to one chunk and kept by the caller
  // (the communicator) so steady-state all-reduces allocate nothing.
  RingAllReduce(Communicator& comm, std::span<float> data, ReduceOp op, std::vector<float>& scratch);
  void run();

 private:
  int wrap(int i) const { return ((i % n_) + n_) % n_; }
  std::span<float> chunk(int c) const { return data_.subspan(chunks_.offset(c), chunks_.size(c)); }
  void reduce_scatter();
  void all_gather();
  void fold(std::span<float> acc, std::span<const float> in) const;  // acc = acc (op) in

  Communicator& comm_;
  std::span<float> data_;
  ReduceOp op_;
  std::vector<float>& scratch_;
  int rank_;
  int n_;
  RingChunks chunks_;
};

}  // namespace laconic
