// Recursive-doubling all-reduce (Thakur, Rabenseifner & Gropp 2005, §4.1; MPICH's short-message
// all-reduce). Every rank exchanges its whole buffer with partner r XOR 2^k for k = 0..lg p' - 1
// and folds the partner's data in: after round k a rank holds the reduction over its aligned
// block of 2^(k+1) ranks, so after lg p' rounds everyone holds the full reduction.
//
// Non-power-of-two world sizes (PowerOfTwoFold, §4 of the paper): p' = largest power of two
// <= p, rem = p - p'. Before the rounds, each even rank r < 2·rem sends its buffer to r+1, which
// folds it in (r's data the left operand) and stands in for both; the even ranks sit out. The
// remaining p' ranks take new ranks nr (odd r < 2·rem: r/2; r >= 2·rem: r - rem), run the
// power-of-two algorithm on nr, and afterwards each odd r < 2·rem sends the result back to r-1.
// The map nr -> r is increasing, so "lower new rank" means "lower rank".
//
// Fold order, identical on every rank: both partners of a round combine in canonical order,
// the lower rank's partial as the LEFT operand, so they compute the same bits. The result is the
// balanced binary tree over ranks in order, with leaves x[2j] + x[2j+1] for j < rem:
//   p = 4: (x0 + x1) + (x2 + x3);   p = 3: (x0 + x1) + x2;   p = 6: ((x0+x1) + (x2+x3)) + (x4 + x5).
// avg: every participating rank divides its (bitwise identical) sum by p once, with finish_avg;
// identical inputs give identical outputs, and the folded-out ranks receive those bits.
//
// Bytes on the wire per rank for S = count·E bytes (count == 0 or p == 1: nothing at all):
//   r >= 2·rem:          sent = recv = lg p'·S,          messages_sent = lg p'
//   r <  2·rem, odd:     sent = recv = (lg p' + 1)·S,    messages_sent = lg p' + 1
//   r <  2·rem, even:    sent = recv = S,                messages_sent = 1
// Cost: (lg p' + 2·[p != p'])·α + (lg p' + 2·[p != p'])·Sβ + (lg p' + [p != p'])·Sγ; for a power
// of two lg p·(α + Sβ + Sγ). Latency-optimal, so it wins for short messages (MPICH: below 2 KiB).
#pragma once

#include <cstddef>
#include <span>

#include "collectives/dtype.h"
#include "collectives/transport.h"

namespace laconic {

// The non-power-of-two fold shared by recursive doubling and Rabenseifner (see above).
struct PowerOfTwoFold {
  PowerOfTwoFold(int rank, int n);

  int pof2;     // p': largest power of two <= n
  int rem;      // n - p'
  int rank;
  int newrank;  // rank among the p' participants, or -1 for an even rank < 2·rem (folded out)

  // The world rank of new rank nr.
  int to_rank(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
  // Even r < 2·rem sends `data` to r+1, which folds it in as the left operand (scratch: data.bytes()).
  void fold_in(Transport& comm, Buf data, ReduceOp op, std::span<std::byte> scratch) const;
  // Odd r < 2·rem sends the finished result back to r-1.
  void unfold(Transport& comm, Buf data) const;
};

class RecursiveDoublingAllReduce {
 public:
  // `scratch` receives the partner's buffer: at least scratch_bytes(count, dtype, N).
  RecursiveDoublingAllReduce(Transport& comm, Buf data, ReduceOp op, std::span<std::byte> scratch);
  static std::size_t scratch_bytes(std::size_t count, DType t, int /*n*/) { return count * dtype_size(t); }
  void run();

 private:
  Transport& comm_;
  Buf data_;
  ReduceOp op_;
  std::span<std::byte> scratch_;
};

}  // namespace laconic
