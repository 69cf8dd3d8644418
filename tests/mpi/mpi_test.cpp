// The MPI backend under mpirun, for any world size (CTest runs 1..4 ranks): every collective x
// dtype x algorithm x size against closed forms, bitwise identity across ranks, byte counts
// (exact for our algorithms over MPI point-to-point, nominal for native), our ring over MPI
// against our ring on the threads backend, message splitting, size mismatches, async.
//
// Every rank runs every test; a failed EXPECT never skips a collective, so the ranks stay in
// step. Only rank 0 prints gtest's output; other ranks print their failures, prefixed.
#include <gtest/gtest.h>
// <mpi.h> comes through mpi_communicator.h, which selects the C API only.

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/mpi/mpi_communicator.h"
#include "collectives/threads/threads_communicator.h"
#include "core/launcher.h"
#include "compression/onebit.h"
#include "compression/powersgd.h"
#include "compression/topk.h"
#include "core/check.h"

namespace laconic {
namespace {

const std::vector<std::size_t> kCounts = {0, 1, 13, 100003};
const std::vector<DType> kDTypes = {DType::f32, DType::i32, DType::u8, DType::bf16, DType::f16};
const std::vector<ReduceOp> kOps = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};

MpiOptions test_options() { return MpiOptions{.timeout_s = 60}; }

// native and ring always; any other algorithm the base class runs (probed: an unavailable one
// throws on every rank before any traffic).
std::vector<Algorithm> algorithms(Communicator& comm) {
  std::vector<Algorithm> out = {Algorithm::native, Algorithm::ring};
  for (Algorithm a : {Algorithm::auto_, Algorithm::recursive_doubling, Algorithm::rabenseifner,
                      Algorithm::hierarchical}) {
    comm.set_algorithm(a);
    try {
      float x = 1;
      comm.all_reduce(std::span<float>(&x, 1), ReduceOp::sum);
      out.push_back(a);
    } catch (const Error&) {
    }
  }
  comm.set_algorithm(Algorithm::native);
  return out;
}

// Reductions: element i on rank r is a small non-negative integer, so every partial sum is
// exact in every dtype (bf16/u8 up to 14 ranks) and the result has a closed form in any order:
//   sum_r v = N(N-1)/2 + N*(i%5),   max_r v = N-1 + i%5.
long v(int r, std::size_t i, int n) { return static_cast<long>((static_cast<std::size_t>(r) + i) % n + i % 5); }
long v_sum(std::size_t i, int n) { return n * (n - 1) / 2 + n * static_cast<long>(i % 5); }
long v_max(std::size_t i, int n) { return n - 1 + static_cast<long>(i % 5); }
// Data movement: distinct per (source, position) as far as a byte allows.
long tag(int src, std::size_t i) { return static_cast<long>((31 * static_cast<std::size_t>(src) + i) % 251); }

bool is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

void put(DType t, void* p, std::size_t i, float x) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = x; return;
    case DType::bf16: static_cast<bf16*>(p)[i] = to_bf16(x); return;
    case DType::f16: static_cast<f16*>(p)[i] = to_f16(x); return;
    case DType::i32: static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(x); return;
    case DType::u8: static_cast<std::uint8_t*>(p)[i] = static_cast<std::uint8_t>(x); return;
  }
}

// Element i := the reduction of v over n ranks at position j (default i), in dtype t: avg is
// sum/N rounded once (floats) or truncated (integers), as finish_avg defines it.
void put_expected(DType t, void* p, std::size_t i, ReduceOp op, int n, std::size_t j = SIZE_MAX) {
  if (j == SIZE_MAX) j = i;
  if (op == ReduceOp::max) return put(t, p, i, static_cast<float>(v_max(j, n)));
  const long sum = v_sum(j, n);
  if (op == ReduceOp::sum) return put(t, p, i, static_cast<float>(sum));
  put(t, p, i, is_float(t) ? static_cast<float>(sum) / static_cast<float>(n) : static_cast<float>(sum / n));
}

struct Bytes {
  std::vector<std::byte> b;
  DType t;
  Bytes(std::size_t count, DType dt) : b(count * dtype_size(dt), std::byte{0xAB}), t(dt) {}
  Buf buf() { return {b.data(), b.size() / dtype_size(t), t}; }
  std::size_t count() const { return b.size() / dtype_size(t); }
};

// Elements whose bits differ.
std::size_t wrong(const Bytes& got, const Bytes& want) {
  const std::size_t e = dtype_size(got.t);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.count(); ++i) bad += std::memcmp(&got.b[i * e], &want.b[i * e], e) != 0;
  return bad;
}

std::uint64_t fingerprint(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const std::uint8_t*>(data)[i]) * 1099511628211ull;
  return h;
}

std::vector<std::uint64_t> gather_fingerprints(Communicator& comm, const void* data, std::size_t bytes) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  const std::uint64_t mine = fingerprint(data, bytes);
  comm.all_gather(CBuf(&mine, sizeof mine, DType::u8), Buf{all.data(), all.size() * sizeof mine, DType::u8});
  return all;
}

bool same_on_all_ranks(Communicator& comm, const void* data, std::size_t bytes) {
  const auto all = gather_fingerprints(comm, data, bytes);
  for (auto h : all)
    if (h != all[0]) return false;
  return true;
}

std::string what(Algorithm a, DType t, std::size_t count, const char* op = "") {
  return detail::concat(name_of(a), " ", name_of(t), " ", op, " count ", count);
}

// ---- the byte counts of our algorithms, written out from their headers ----

std::uint64_t chunk(std::size_t count, int n, int c) { return count / n + (static_cast<std::size_t>(c) < count % n ? 1 : 0); }
int wrap(int i, int n) { return (i % n + n) % n; }
// Binomial tree (tree_reduce.h, broadcast_tree.h): v's children are v + m for powers of two m
// below v's lowest set bit (the root: below N).
std::uint64_t children(int v, int n) {
  std::uint64_t c = 0;
  for (int m = 1; m < n && !(v & m); m <<= 1) c += v + m < n;
  return c;
}
ByteCounters minus(ByteCounters a, ByteCounters b) { return {a.sent - b.sent, a.recv - b.recv, a.messages_sent - b.messages_sent}; }

void expect_counts(ByteCounters got, std::uint64_t sent, std::uint64_t recv, std::uint64_t messages, const std::string& ctx) {
  EXPECT_EQ(got.sent, sent) << ctx;
  EXPECT_EQ(got.recv, recv) << ctx;
  EXPECT_EQ(got.messages_sent, messages) << ctx;
}

// Byte counts are exact for ring and nominal (defined equal) for native; other algorithms count
// what they send, checked in their own tests.
bool counts_checked(Algorithm a) { return a == Algorithm::native || a == Algorithm::ring; }

// ---- tests ----

TEST(Mpi, WorldAndDefaults) {
  MpiCommunicator comm(test_options());
  int rank = -1, size = -1;
  LC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  LC_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  EXPECT_EQ(comm.rank(), rank);
  EXPECT_EQ(comm.size(), size);
  EXPECT_EQ(comm.backend(), "mpi");
  EXPECT_EQ(comm.algorithm(), Algorithm::native);
  EXPECT_TRUE(launched_by_mpi_launcher()) << "CTest runs this under mpirun";
  EXPECT_THROW(MpiCommunicator(MpiOptions{.timeout_s = 0}), Error);
}

TEST(Mpi, AllReduce) {
  MpiCommunicator comm(test_options());
  const int n = comm.size(), r = comm.rank();
  for (Algorithm a : algorithms(comm)) {
    comm.set_algorithm(a);
    for (DType t : kDTypes)
      for (ReduceOp op : kOps)
        for (std::size_t count : kCounts) {
          const std::string ctx = what(a, t, count, name_of(op));
          Bytes data(count, t), want(count, t);
          for (std::size_t i = 0; i < count; ++i) {
            put(t, data.b.data(), i, static_cast<float>(v(r, i, n)));
            put_expected(t, want.b.data(), i, op, n);
          }
          const ByteCounters before = comm.bytes();
          comm.all_reduce(data.buf(), op);
          const ByteCounters used = minus(comm.bytes(), before);
          EXPECT_EQ(wrong(data, want), 0u) << ctx;
          if (counts_checked(a)) {
            const std::uint64_t e = dtype_size(t), c2 = 2 * count;
            expect_counts(used, e * (c2 - chunk(count, n, r) - chunk(count, n, wrap(r + 1, n))),
                          e * (c2 - chunk(count, n, wrap(r - 1, n)) - chunk(count, n, r)),
                          count > 0 && n > 1 ? 2u * (n - 1) : 0u, ctx);
          }
          EXPECT_TRUE(same_on_all_ranks(comm, data.b.data(), data.b.size())) << ctx;
        }
  }
}

TEST(Mpi, AllReduceOfInexactValuesIsBitwiseIdenticalOnEveryRank) {
  // Sums whose bits depend on the order: every rank must still hold the same bits (native: the
  // caveat in mpi_communicator.h), and the result must be close to the exact sum.
  MpiCommunicator comm(test_options());
  const int n = comm.size(), r = comm.rank();
  const std::size_t count = 100003;
  const auto w = [](int rank, std::size_t i) {
    return std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(rank)) * std::exp2(static_cast<float>((i + rank) % 17) - 8);
  };
  for (Algorithm a : algorithms(comm)) {
    comm.set_algorithm(a);
    for (DType t : {DType::f32, DType::bf16})
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
        const std::string ctx = what(a, t, count, name_of(op));
        Bytes data(count, t);
        for (std::size_t i = 0; i < count; ++i) put(t, data.b.data(), i, w(r, i));
        comm.all_reduce(data.buf(), op);
        EXPECT_TRUE(same_on_all_ranks(comm, data.b.data(), data.b.size())) << ctx;
        std::size_t far = 0;
        for (std::size_t i = 0; i < count; ++i) {
          double exact = 0, mag = 0;
          for (int q = 0; q < n; ++q) {
            exact += t == DType::bf16 ? from_bf16(to_bf16(w(q, i))) : w(q, i);
            mag += std::abs(w(q, i));
          }
          if (op == ReduceOp::avg) exact /= n, mag /= n;
          const double got = t == DType::f32 ? reinterpret_cast<const float*>(data.b.data())[i]
                                             : from_bf16(reinterpret_cast<const bf16*>(data.b.data())[i]);
          const double tol = (t == DType::f32 ? 1e-6 : 2e-2) * (mag + 1e-30) * n;
          far += std::abs(got - exact) > tol;
        }
        EXPECT_EQ(far, 0u) << ctx;
      }
  }
}

TEST(Mpi, Reduce) {
  MpiCommunicator comm(test_options());
  const int n = comm.size(), r = comm.rank();
  for (Algorithm a : algorithms(comm)) {
    comm.set_algorithm(a);
    for (DType t : kDTypes)
      for (ReduceOp op : kOps)
        for (std::size_t count : kCounts) {
          const int root = static_cast<int>(count % static_cast<std::size_t>(n));
          const std::string ctx = what(a, t, count, name_of(op)) + " root " + std::to_string(root);
          Bytes data(count, t), want(count, t);
          for (std::size_t i = 0; i < count; ++i) {
            put(t, data.b.data(), i, static_cast<float>(v(r, i, n)));
            if (r == root)
              put_expected(t, want.b.data(), i, op, n);
            else  // a non-root buffer is left as it was
              put(t, want.b.data(), i, static_cast<float>(v(r, i, n)));
          }
          const ByteCounters before = comm.bytes();
          comm.reduce(data.buf(), op, root);
          const ByteCounters used = minus(comm.bytes(), before);
          EXPECT_EQ(wrong(data, want), 0u) << ctx << " on rank " << r;
          if (counts_checked(a)) {
            const int vr = wrap(r - root, n);
            const std::uint64_t s = count * dtype_size(t), live = count > 0 && n > 1;
            expect_counts(used, live * (vr != 0) * s, live * children(vr, n) * s, live * (vr != 0), ctx);
          }
        }
  }
}

TEST(Mpi, ReduceScatter) {
  MpiCommunicator comm(test_options());
  const int n = comm.size(), r = comm.rank();
  const auto un = static_cast<std::size_t>(n);
  for (Algorithm a : algorithms(comm)) {
    comm.set_algorithm(a);
    for (DType t : kDTypes)
      for (ReduceOp op : kOps)
        for (std::size_t count : kCounts) {  // count = elements per rank's block
          const std::string ctx = what(a, t, count, name_of(op));
          Bytes send(un * count, t), recv(count, t), want(count, t);
          for (std::size_t j = 0; j < un * count; ++j) put(t, send.b.data(), j, static_cast<float>(v(r, j, n)));
          // Rank r receives the reduction of global positions r*count + i.
          for (std::size_t i = 0; i < count; ++i)
            put_expected(t, want.b.data(), i, op, n, static_cast<std::size_t>(r) * count + i);
          const ByteCounters before = comm.bytes();
          comm.reduce_scatter(CBuf(send.buf()), recv.buf(), op);
          const ByteCounters used = minus(comm.bytes(), before);
          EXPECT_EQ(wrong(recv, want), 0u) << ctx << " on rank " << r;
          if (counts_checked(a)) {
            const std::uint64_t b = (un - 1) * count * dtype_size(t);
            expect_counts(used, b, b, count > 0 && n > 1 ? n - 1 : 0, ctx);
          }
        }
  }
}

TEST(Mpi, AllGather) {
  MpiCommunicator comm(test_options());
  const int n = comm.size(), r = comm.rank();
  const auto un = static_cast<std::size_t>(n);
  for (Algorithm a : algorithms(comm)) {
    comm.set_algorithm(a);
    for (DType t : kDTypes)
      for (std::size_t count : kCounts) {
        const std::string ctx = what(a, t, count);
        Bytes send(count, t), recv(un * count, t), want(un * count, t);
        for (std::size_t i = 0; i < count; ++i) put(t, send.b.data(), i, static_cast<float>(tag(r, i)));
        for (int q = 0; q < n; ++q)
          for (std::size_t i = 0; i < count; ++i)
            put(t, want.b.data(), static_cast<std::size_t>(q) * count + i, static_cast<float>(tag(q, i)));
        const ByteCounters before = comm.bytes();
        comm.all_gather(CBuf(send.buf()), recv.buf());
        const ByteCounters used = minus(comm.bytes(), before);
        EXPECT_EQ(wrong(recv, want), 0u) << ctx << " on rank " << r;
        if (counts_checked(a)) {
          const std::uint64_t b = (un - 1) * count * dtype_size(t);
          expect_counts(used, b, b, count > 0 && n > 1 ? n - 1 : 0, ctx);
        }
      }
  }
}

TEST(Mpi, AllGatherV) {
  MpiCommunicator comm(test_options());
  const int n = comm.size(), r = comm.rank();
  const auto un = static_cast<std::size_t>(n);
  for (Algorithm a : algorithms(comm)) {
    comm.set_algorithm(a);
    for (DType t : kDTypes)
      for (std::size_t count : kCounts) {
        // Unequal contributions, some empty (odd ranks send count/2: none when count is 1).
        std::vector<std::size_t> counts(un), offsets(un);
        std::size_t total = 0;
        for (std::size_t q = 0; q < un; ++q) {
          counts[q] = q % 2 == 0 ? count : count / 2;
          offsets[q] = total;
          total += counts[q];
        }
        const std::string ctx = what(a, t, count);
        Bytes send(counts[static_cast<std::size_t>(r)], t), recv(total, t), want(total, t);
        for (std::size_t i = 0; i < send.count(); ++i) put(t, send.b.data(), i, static_cast<float>(tag(r, i)));
        for (std::size_t q = 0; q < un; ++q)
          for (std::size_t i = 0; i < counts[q]; ++i)
            put(t, want.b.data(), offsets[q] + i, static_cast<float>(tag(static_cast<int>(q), i)));
        const ByteCounters before = comm.bytes();
        comm.all_gather_v(CBuf(send.buf()), recv.buf(), counts);
        const ByteCounters used = minus(comm.bytes(), before);
        EXPECT_EQ(wrong(recv, want), 0u) << ctx << " on rank " << r;
        if (counts_checked(a)) {
          const std::uint64_t e = dtype_size(t), live = total > 0 && n > 1;
          expect_counts(used, live * e * (total - counts[static_cast<std::size_t>(wrap(r + 1, n))]),
                        live * e * (total - counts[static_cast<std::size_t>(r)]), live * (n - 1), ctx);
        }
      }
  }
}

TEST(Mpi, AllToAll) {
  MpiCommunicator comm(test_options());
  const int n = comm.size(), r = comm.rank();
  const auto un = static_cast<std::size_t>(n);
  for (Algorithm a : algorithms(comm)) {
    comm.set_algorithm(a);
    for (DType t : kDTypes)
      for (std::size_t count : kCounts) {  // count = elements per block
        const std::string ctx = what(a, t, count);
        Bytes send(un * count, t), recv(un * count, t), want(un * count, t);
        // Block j of rank r is tagged with (r -> j); it must land as block r of rank j.
        for (std::size_t j = 0; j < un; ++j)
          for (std::size_t i = 0; i < count; ++i) {
            put(t, send.b.data(), j * count + i, static_cast<float>(tag(r * n + static_cast<int>(j), i)));
            put(t, want.b.data(), j * count + i, static_cast<float>(tag(static_cast<int>(j) * n + r, i)));
          }
        const ByteCounters before = comm.bytes();
        comm.all_to_all(CBuf(send.buf()), recv.buf());
        const ByteCounters used = minus(comm.bytes(), before);
        EXPECT_EQ(wrong(recv, want), 0u) << ctx << " on rank " << r;
        if (counts_checked(a)) {
          const std::uint64_t b = (un - 1) * count * dtype_size(t);
          expect_counts(used, b, b, count > 0 ? n - 1 : 0, ctx);
        }
      }
  }
}

TEST(Mpi, BroadcastAndBarrier) {
  MpiCommunicator comm(test_options());
  const int n = comm.size(), r = comm.rank();
  for (Algorithm a : algorithms(comm)) {
    comm.set_algorithm(a);
    for (DType t : kDTypes)
      for (std::size_t count : kCounts)
        for (int root : {0, n - 1}) {
          const std::string ctx = what(a, t, count) + " root " + std::to_string(root);
          Bytes data(count, t), want(count, t);
          for (std::size_t i = 0; i < count; ++i) {
            if (r == root) put(t, data.b.data(), i, static_cast<float>(tag(root, i)));
            put(t, want.b.data(), i, static_cast<float>(tag(root, i)));
          }
          const ByteCounters before = comm.bytes();
          comm.broadcast(data.buf(), root);
          const ByteCounters used = minus(comm.bytes(), before);
          EXPECT_EQ(wrong(data, want), 0u) << ctx << " on rank " << r;
          if (counts_checked(a)) {
            const int vr = wrap(r - root, n);
            const std::uint64_t s = count * dtype_size(t), live = count > 0 && n > 1;
            expect_counts(used, live * children(vr, n) * s, live * (vr != 0) * s, live * children(vr, n), ctx);
          }
        }
    const ByteCounters before = comm.bytes();
    comm.barrier();
    std::uint64_t rounds = 0;
    for (int k = 1; k < n; k <<= 1) ++rounds;
    if (counts_checked(a)) expect_counts(minus(comm.bytes(), before), rounds, rounds, rounds, name_of(a));
  }
}

TEST(Mpi, RingOverMpiMatchesRingOnThreadsBitForBit) {
  // The same inputs through our ring on both backends: the same bits on every rank. Rank 0 runs
  // the threads world (same size) while the other ranks wait in the next collective.
  MpiCommunicator comm(test_options());
  comm.set_algorithm(Algorithm::ring);
  const int n = comm.size(), r = comm.rank();
  const auto un = static_cast<std::size_t>(n);
  const auto w = [](int rank, std::size_t i) {
    return std::cos(static_cast<float>(i) * 0.11f - static_cast<float>(rank)) * std::exp2(static_cast<float>((3 * i + rank) % 13) - 6);
  };
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg})
      for (std::size_t count : {std::size_t{13}, std::size_t{100003}}) {
        const std::string ctx = what(Algorithm::ring, t, count, name_of(op));
        const auto inputs = [&](int rank) {
          Bytes b(un * count, t);  // all-reduce uses the whole buffer; reduce-scatter all of it
          for (std::size_t i = 0; i < b.count(); ++i) put(t, b.b.data(), i, w(rank, i));
          return b;
        };
        // What one rank computes, as the fingerprints of its all-reduce and reduce-scatter results.
        const auto compute = [&](Communicator& c) {
          Bytes all = inputs(c.rank()), block(count, t);
          Bytes whole = all;
          c.all_reduce(all.buf(), op);
          c.reduce_scatter(CBuf(whole.buf()), block.buf(), op);
          return std::pair(fingerprint(all.b.data(), all.b.size()), fingerprint(block.b.data(), block.b.size()));
        };
        const auto [mpi_all, mpi_block] = compute(comm);
        std::vector<std::uint64_t> fp(2 * un);
        const std::uint64_t mine[2] = {mpi_all, mpi_block};
        comm.all_gather(CBuf(mine, sizeof mine, DType::u8), Buf{fp.data(), fp.size() * 8, DType::u8});
        if (r != 0) continue;
        std::vector<std::uint64_t> threads_fp(2 * un);
        run_threads(n, [&](Communicator& c) {
          c.set_algorithm(Algorithm::ring);
          const auto [a, b] = compute(c);
          threads_fp[2 * static_cast<std::size_t>(c.rank())] = a;
          threads_fp[2 * static_cast<std::size_t>(c.rank()) + 1] = b;
        });
        for (std::size_t q = 0; q < un; ++q) {
          EXPECT_EQ(fp[2 * q], threads_fp[2 * q]) << ctx << ": all_reduce on rank " << q;
          EXPECT_EQ(fp[2 * q + 1], threads_fp[2 * q + 1]) << ctx << ": reduce_scatter on rank " << q;
          EXPECT_EQ(fp[2 * q], fp[0]) << ctx << ": all_reduce differs between ranks 0 and " << q;
        }
      }
}

TEST(Mpi, LargeMessagesAreSplitAndReassembled) {
  // max_message_bytes = 1000: every ring step of 100003 floats is a few hundred MPI messages,
  // yet the result and the counted traffic are those of one message per step.
  MpiOptions opts = test_options();
  opts.max_message_bytes = 1000;
  MpiCommunicator comm(opts);
  comm.set_algorithm(Algorithm::ring);
  const int n = comm.size(), r = comm.rank();
  const std::size_t count = 100003;
  Bytes data(count, DType::f32), want(count, DType::f32);
  for (std::size_t i = 0; i < count; ++i) {
    put(DType::f32, data.b.data(), i, static_cast<float>(v(r, i, n)));
    put_expected(DType::f32, want.b.data(), i, ReduceOp::sum, n);
  }
  comm.all_reduce(data.buf(), ReduceOp::sum);
  EXPECT_EQ(wrong(data, want), 0u);
  EXPECT_EQ(comm.bytes().messages_sent, n > 1 ? 2u * (n - 1) : 0u);
  if (n >= 2 && r < 2) {  // 4500 bytes = 4 full pieces and a partial one, both directions
    std::vector<std::uint8_t> out(4500), in(4500, 0);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint8_t>(i * 7 + r);
    const ByteCounters before = comm.bytes();
    comm.sendrecv(out.data(), out.size(), 1 - r, in.data(), in.size(), 1 - r);
    expect_counts(minus(comm.bytes(), before), 4500, 4500, 1, "sendrecv");
    std::size_t bad = 0;
    for (std::size_t i = 0; i < in.size(); ++i) bad += in[i] != static_cast<std::uint8_t>(i * 7 + (1 - r));
    EXPECT_EQ(bad, 0u);
  }
  comm.barrier();
}

TEST(Mpi, ReceivedSizeMustMatch) {
  MpiCommunicator comm(test_options());
  if (comm.size() < 2) GTEST_SKIP() << "needs two ranks";
  const int r = comm.rank();
  char buf[8] = {};
  if (r == 0) {
    comm.send(buf, 8, 1);  // longer than rank 1 expects
    comm.send(buf, 4, 1);  // shorter
    comm.send(buf, 0, 1);  // empty, expected empty
  } else if (r == 1) {
    try {
      comm.recv(buf, 4, 0);
      ADD_FAILURE() << "8 bytes received into 4";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected 4 bytes from rank 0"), std::string::npos) << e.what();
    }
    try {
      comm.recv(buf, 8, 0);
      ADD_FAILURE() << "4 bytes received as 8";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected 8 bytes from rank 0, got 4"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(comm.recv(buf, 0, 0));
  }
  comm.barrier();  // the communicator still works after the errors
}

TEST(Mpi, AsyncNativeOpsRunInIssueOrder) {
  MpiCommunicator comm(test_options());
  const int n = comm.size(), r = comm.rank();
  std::vector<float> a(1000, static_cast<float>(r)), b(13, 1.0f);
  auto wa = comm.all_reduce_async(buf(std::span<float>(a)), ReduceOp::sum);
  auto wb = comm.all_reduce_async(buf(std::span<float>(b)), ReduceOp::avg);
  std::int32_t root_value = r == n - 1 ? 42 : 0;
  comm.broadcast(Buf{&root_value, 1, DType::i32}, n - 1);  // drains the queue first
  EXPECT_TRUE(wa->done());
  EXPECT_TRUE(wb->done());
  wa->wait();
  wb->wait();
  EXPECT_EQ(root_value, 42);
  std::size_t bad = 0;
  for (float x : a) bad += x != static_cast<float>(n * (n - 1) / 2);
  for (float x : b) bad += x != 1.0f;
  EXPECT_EQ(bad, 0u);
}

// Non-zero ranks: print only failures, tagged with the rank (rank 0 prints the usual output).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

// Every reducer over MPI, with our ring for its all-reduces: the same bits, step after step, as
// the same reducer on the threads backend at the same world size (which rank 0 runs while the
// others wait), and the same bits on every rank. With native MPI collectives, every rank still
// agrees. CTest runs this suite at 8 ranks too.
TEST(MpiReducers, MatchTheThreadsBackendBitForBit) {
  MpiCommunicator comm(test_options());
  const int n = comm.size();
  const auto un = static_cast<std::size_t>(n);
  // A bucket like a small layer's: a 40x30 weight (compressible), a bias, a 6x5 matrix.
  BucketLayout bucket;
  bucket.tensors = {{0, 40, 30}, {1200, 30, 1}, {1230, 6, 5}};
  bucket.size = 1260;
  const auto make = [](int kind) -> std::unique_ptr<Reducer> {
    switch (kind) {
      case 0: return std::make_unique<DenseReducer>(DType::f32);
      case 1: return std::make_unique<DenseReducer>(DType::bf16);
      case 2: return std::make_unique<TopKReducer>(TopKOptions{.ratio = 0.05});
      case 3: return std::make_unique<TopKReducer>(
                  TopKOptions{.ratio = 0.05, .selection = TopKOptions::Selection::sampled, .sample_fraction = 0.2});
      case 4: return std::make_unique<PowerSgdReducer>(PowerSgdOptions{.rank = 2, .start_iter = 1});
      case 5: return std::make_unique<PowerSgdReducer>(PowerSgdOptions{.rank = 4, .start_iter = 1});
      default: return std::make_unique<OneBitReducer>(OneBitOptions{.warmup_steps = 1});
    }
  };
  constexpr int kSteps = 4;
  // Fingerprints of one rank's output after each step.
  const auto compute = [&](Communicator& c, int kind) {
    auto red = make(kind);
    red->prepare(std::span(&bucket, 1));
    std::vector<std::uint64_t> fps;
    std::vector<float> x(bucket.size);
    for (int step = 0; step < kSteps; ++step) {
      for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = std::sin(static_cast<float>(i) * 0.31f + static_cast<float>(c.rank() + 5 * step)) *
               std::exp2(static_cast<float>((i + static_cast<std::size_t>(c.rank())) % 11) - 5);
      red->reduce(x, bucket, step, c);
      fps.push_back(fingerprint(x.data(), x.size() * sizeof(float)));
    }
    return fps;
  };
  for (int kind = 0; kind <= 6; ++kind) {
    const std::string ctx = make(kind)->describe();
    for (const Algorithm a : {Algorithm::ring, Algorithm::native}) {
      comm.set_algorithm(a);
      const auto mine = compute(comm, kind);
      std::vector<std::uint64_t> all(un * kSteps);
      comm.all_gather(CBuf(mine.data(), mine.size() * 8, DType::u8), Buf{all.data(), all.size() * 8, DType::u8});
      for (std::size_t q = 0; q < un; ++q)
        for (std::size_t s = 0; s < kSteps; ++s)
          EXPECT_EQ(all[q * kSteps + s], all[s]) << ctx << ", " << name_of(a) << ": rank " << q << " step " << s;
      if (a != Algorithm::ring || comm.rank() != 0) continue;
      std::vector<std::uint64_t> threads(un * kSteps);
      run_threads(n, [&](Communicator& c) {
        c.set_algorithm(Algorithm::ring);
        const auto fps = compute(c, kind);
        std::copy(fps.begin(), fps.end(), threads.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(c.rank()) * kSteps));
      });
      for (std::size_t i = 0; i < all.size(); ++i)
        EXPECT_EQ(all[i], threads[i]) << ctx << ": rank " << i / kSteps << " step " << i % kSteps;
    }
  }
}

}  // namespace
}  // namespace laconic

int main(int argc, char** argv) {
  laconic::MpiRuntime mpi(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  LC_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new laconic::RankFailurePrinter(rank));
  }
  int rc = RUN_ALL_TESTS();
  // The job fails when any rank failed, and rank 0 says so even if its own tests passed.
  int any = rc;
  LC_MPI_CHECK(MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
  if (rank == 0 && any != 0 && rc == 0) std::fprintf(stderr, "FAILED on another rank (see [rank R] lines)\n");
  return any;
}
