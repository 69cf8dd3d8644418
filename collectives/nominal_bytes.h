// Nominal byte counts of native collectives: what the base class's default algorithm would count
// for the same call on the same rank (formulas in ring_allreduce.h, tree_reduce.h,
// broadcast_tree.h, pairwise_alltoall.h, barrier_dissemination.h). A backend whose library does
// not report its traffic (MPI, NCCL) counts these, so byte accounting agrees across backends:
//   all-reduce as our ring:                 sent = E·(2c - size(r) - size(r+1)), 2(N-1) messages
//   reduce-scatter, all-gather(_v):         one ring phase ((N-1)/N·S when N divides the count)
//   reduce, broadcast:                      binomial trees
//   all-to-all:                             pairwise, (N-1)·B each way
//   barrier:                                dissemination, ceil(log2 N) one-byte messages
// An empty buffer (or N == 1) counts nothing, exactly as the algorithms send nothing.
//
// The one copy of these formulas: MpiCommunicator and NcclCommunicator both count with them
// (Transport::count(ByteCounters)), and tests/collectives/nominal_bytes_test.cpp checks them
// against the threads backend's own counts. Plain C++, header-only, no MPI or CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "collectives/algorithms/ring_allreduce.h"
#include "collectives/communicator.h"

namespace laconic::nominal {

// Children of v in a binomial tree over n ranks renumbered from the root (tree_reduce.h,
// broadcast_tree.h): v + m for every power of two m below v's lowest set bit (root: below n).
inline std::uint64_t tree_children(int v, int n) {
  std::uint64_t c = 0;
  for (int m = 1; m < n; m <<= 1) {
    if (v & m) break;
    if (v + m < n) ++c;
  }
  return c;
}

inline ByteCounters all_reduce(std::size_t count, DType t, int rank, int n) {
  if (count == 0 || n <= 1) return {};
  const RingChunks ch{count, n};
  const std::uint64_t e = dtype_size(t), c2 = 2 * static_cast<std::uint64_t>(count);
  return {e * (c2 - ch.size(rank) - ch.size((rank + 1) % n)), e * (c2 - ch.size((rank + n - 1) % n) - ch.size(rank)),
          2 * static_cast<std::uint64_t>(n - 1)};
}

inline ByteCounters reduce(std::size_t bytes, int rank, int root, int n) {
  if (bytes == 0 || n <= 1) return {};
  const int v = (rank - root + n) % n;
  return {v != 0 ? bytes : 0, tree_children(v, n) * bytes, v != 0 ? 1u : 0u};
}

// `block_bytes`: the bytes of one rank's block (reduce-scatter's recv, all-gather's send).
inline ByteCounters ring_phase(std::size_t block_bytes, int n) {
  if (block_bytes == 0 || n <= 1) return {};
  const std::uint64_t b = static_cast<std::uint64_t>(n - 1) * block_bytes;
  return {b, b, static_cast<std::uint64_t>(n - 1)};
}
inline ByteCounters reduce_scatter(std::size_t recv_bytes, int n) { return ring_phase(recv_bytes, n); }
inline ByteCounters all_gather(std::size_t send_bytes, int n) { return ring_phase(send_bytes, n); }

// Ring all-gather over chunks of counts[c] elements (ring_allreduce.h).
inline ByteCounters all_gather_v(std::span<const std::size_t> counts, DType t, int rank) {
  const int n = static_cast<int>(counts.size());
  std::uint64_t total = 0;
  for (std::size_t c : counts) total += c;
  if (total == 0 || n <= 1) return {};
  const std::uint64_t e = dtype_size(t);
  return {e * (total - counts[static_cast<std::size_t>((rank + 1) % n)]),
          e * (total - counts[static_cast<std::size_t>(rank)]), static_cast<std::uint64_t>(n - 1)};
}

// `block_bytes`: one of the size() blocks of send.
inline ByteCounters all_to_all(std::size_t block_bytes, int n) {
  if (block_bytes == 0 || n <= 1) return {};
  const std::uint64_t b = static_cast<std::uint64_t>(n - 1) * block_bytes;
  return {b, b, static_cast<std::uint64_t>(n - 1)};
}

inline ByteCounters broadcast(std::size_t bytes, int rank, int root, int n) {
  if (bytes == 0 || n <= 1) return {};
  const int v = (rank - root + n) % n;
  const std::uint64_t children = tree_children(v, n);
  return {children * bytes, v != 0 ? bytes : 0, children};
}

inline ByteCounters barrier(int n) {
  std::uint64_t rounds = 0;  // one byte each way per round
  for (int k = 1; k < n; k <<= 1) ++rounds;
  return {rounds, rounds, rounds};
}

}  // namespace laconic::nominal
