// Rabenseifner's all-reduce (Thakur, Rabenseifner & Gropp 2005, §4.2; MPICH's long-message
// all-reduce): a reduce-scatter by recursive halving followed by an all-gather by recursive
// doubling, so each rank moves about 2·S bytes in 2·lg p' messages instead of lg p'·S.
//
// Non-power-of-two world sizes use the fold of recursive_doubling.h (PowerOfTwoFold): even ranks
// r < 2·rem hand their whole buffer to r+1 before and get the result back after; the other p'
// ranks run the algorithm below on their new rank nr.
//
// The buffer is cut into p' blocks with the ring's chunking (RingChunks{count, p'}: sizes differ
// by at most one element). W(b, m) = the m consecutive blocks starting at b (m a power of two,
// b a multiple of m); win(x, m) = W(x & ~(m-1), m), the window of m blocks containing block x.
//   reduce-scatter, m = p'/2, p'/4, ..., 1: partner q = nr XOR m. Send win(q, m) to q, receive
//     win(nr, m) from q into scratch and fold it in (the partner's partial as the left operand).
//     Afterwards rank nr holds block nr fully reduced (avg: divided by p here, once, by its owner).
//   all-gather, m = 1, 2, ..., p'/2: send win(nr, m) to q = nr XOR m, receive win(q, m) in place.
//     Every block travels from its owner, so every rank ends with the owner's bits.
// The fold order of each block is fixed by p and the block index: deterministic on every run.
//
// Bytes on the wire per rank (E = element size, size(b) = elements of block b, count == 0 or
// p == 1: nothing at all). For a participating rank with new rank nr, let
//   W(nr) = sum over m = 1, 2, ..., p'/2 of the elements of win(nr, m)
// (the halves it keeps in reduce-scatter, which it also sends in all-gather). The halves it sends
// in reduce-scatter, like those it receives in all-gather, tile every block but its own:
//   r >= 2·rem:        sent = recv = E·(count - size(nr) + W(nr)),       messages_sent = 2·lg p'
//   r <  2·rem, odd:   sent = recv = E·(count - size(nr) + W(nr)) + S,   messages_sent = 2·lg p' + 1
//   r <  2·rem, even:  sent = recv = S,                                  messages_sent = 1
// When p' divides count, W(nr) = (p'-1)/p'·count, so a participant moves exactly 2(p'-1)/p'·S.
// Cost: (2 lg p' + 2[p != p'])·α + (2(p'-1)/p' + 2[p != p'])·Sβ + ((p'-1)/p' + [p != p'])·Sγ;
// for a power of two 2 lg p·α + 2(p-1)/p·Sβ + (p-1)/p·Sγ (the fold adds 2α + 2Sβ + Sγ).
#pragma once

#include <cstddef>
#include <span>

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace laconic {

class RabenseifnerAllReduce {
 public:
  // `scratch` receives the folded-in buffer and the incoming halves: scratch_bytes(count, dtype, N).
  RabenseifnerAllReduce(Transport& comm, Buf data, ReduceOp op, std::span<std::byte> scratch);
  static std::size_t scratch_bytes(std::size_t count, DType t, int /*n*/) { return count * dtype_size(t); }
  void run();

 private:
  Transport& comm_;
  Buf data_;
  ReduceOp op_;
  std::span<std::byte> scratch_;
};

}  // namespace laconic
