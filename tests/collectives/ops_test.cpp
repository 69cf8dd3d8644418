// Every typed collective on the threads backend, world sizes 1..8: closed-form results for every
// dtype, data movement checked element by element against values that encode their origin,
// bitwise identity for order-dependent sums, exact per-rank byte counts against the formulas in
// the algorithm headers, and argument mismatches as laconic::Error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/threads/threads_communicator.h"
#include "core/check.h"

namespace laconic {
namespace {

constexpr DType kTypes[] = {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u8};
constexpr ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max};
constexpr std::size_t kLarge = std::size_t{1} << 18;

// Counts 0, 1, a prime, and (for one 4-byte and one 2-byte type, to keep the test fast) 256K.
std::vector<std::size_t> counts_for(DType t, std::size_t large = kLarge) {
  if (t == DType::f32 || t == DType::bf16) return {0, 1, 13, 1009, large};
  return {0, 1, 13, 1009};
}

// A typed buffer: count elements of dtype t as raw bytes.
struct Typed {
  DType t;
  std::vector<std::byte> bytes;
  Typed(DType type, std::size_t count) : t(type), bytes(count * dtype_size(type)) {}
  std::size_t count() const { return bytes.size() / dtype_size(t); }
  Buf buf() { return {bytes.data(), count(), t}; }
  CBuf cbuf() const { return {bytes.data(), count(), t}; }
  std::byte* at(std::size_t i) { return bytes.data() + i * dtype_size(t); }
  const std::byte* at(std::size_t i) const { return bytes.data() + i * dtype_size(t); }

  // Stores v converted to t (16-bit floats round to nearest even).
  void set(std::size_t i, double v) {
    const auto put = [&](auto x) { std::memcpy(at(i), &x, sizeof x); };
    switch (t) {
      case DType::f32: return put(static_cast<float>(v));
      case DType::bf16: return put(to_bf16(static_cast<float>(v)));
      case DType::f16: return put(to_f16(static_cast<float>(v)));
      case DType::i32: return put(static_cast<std::int32_t>(v));
      case DType::u8: return put(static_cast<std::uint8_t>(v));
    }
  }
  // Stores the low bytes of a 64-bit pattern: for collectives that only move data.
  void set_bits(std::size_t i, std::uint64_t bits) { std::memcpy(at(i), &bits, dtype_size(t)); }
};

// Compares element by element, reporting the first mismatch.
::testing::AssertionResult same_bits(const Typed& got, const Typed& want) {
  if (got.count() != want.count())
    return ::testing::AssertionFailure() << "counts " << got.count() << " vs " << want.count();
  const std::size_t e = dtype_size(got.t);
  for (std::size_t i = 0; i < got.count(); ++i)
    if (std::memcmp(got.at(i), want.at(i), e) != 0)
      return ::testing::AssertionFailure() << "element " << i << " of " << got.count() << " differs";
  return ::testing::AssertionSuccess();
}

// A 64-bit pattern naming its origin, so a misplaced element cannot pass by accident.
std::uint64_t tag(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t k) {
  std::uint64_t x = (a << 56) ^ (b << 48) ^ (c << 40) ^ k;  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// ---- closed-form reductions ----
// Element i on rank r of N: v = ((r + i) mod N) + (i mod 5) - 7 (+7 for u8, which is unsigned).
// |v| <= 7, so every partial sum of up to 8 ranks is an integer of magnitude <= 56: exact in
// bf16 (8 significant bits), f16, f32, i32 and u8, whatever the fold order. Since (r + i) mod N
// runs over 0..N-1 as r does,
//   sum_r v = N(N-1)/2 + N*(i mod 5 - 7 + off),   max_r v = N-1 + i mod 5 - 7 + off.
int offset_of(DType t) { return t == DType::u8 ? 7 : 0; }

long element(DType t, int r, std::size_t i, int n) {
  return static_cast<long>((static_cast<std::size_t>(r) + i) % static_cast<std::size_t>(n)) +
         static_cast<long>(i % 5) - 7 + offset_of(t);
}

double expected(DType t, ReduceOp op, std::size_t i, int n) {
  const long base = static_cast<long>(i % 5) - 7 + offset_of(t);
  const long sum = n * (n - 1) / 2 + n * base;
  switch (op) {
    case ReduceOp::sum: return static_cast<double>(sum);
    case ReduceOp::max: return static_cast<double>(n - 1 + base);
    case ReduceOp::avg:  // integers truncate; floats divide once in fp32 (then Typed::set rounds)
      if (t == DType::i32 || t == DType::u8) return static_cast<double>(sum / n);
      return static_cast<double>(static_cast<float>(sum) / static_cast<float>(n));
  }
  return 0;
}

// ---- the byte-count formulas of the algorithm headers, written out independently ----

ByteCounters delta(const ByteCounters& after, const ByteCounters& before) {
  return {after.sent - before.sent, after.recv - before.recv, after.messages_sent - before.messages_sent};
}

::testing::AssertionResult counted(const ByteCounters& got, std::uint64_t sent, std::uint64_t recv,
                                   std::uint64_t messages) {
  if (got.sent == sent && got.recv == recv && got.messages_sent == messages) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "sent/recv/messages " << got.sent << "/" << got.recv << "/"
                                       << got.messages_sent << ", formula " << sent << "/" << recv << "/" << messages;
}

// ring_allreduce.h: chunk c of count elements over N ranks.
std::uint64_t chunk(std::size_t count, int n, int c) {
  return count / n + (static_cast<std::size_t>(c) < count % n ? 1 : 0);
}

// Binomial trees (broadcast_tree.h, tree_reduce.h), ranks relative to the root: the parent of
// u != 0 is u with its lowest set bit cleared, u & (u - 1). Children of v = how many u have it.
std::uint64_t tree_children(int v, int n) {
  std::uint64_t c = 0;
  for (int u = 1; u < n; ++u) c += (u & (u - 1)) == v;
  return c;
}

class OpsTest : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(WorldSizes, OpsTest, ::testing::Range(1, 9));

TEST_P(OpsTest, AllReduceClosedFormAndRingBytes) {
  const int n = GetParam();
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (DType t : kTypes)
      for (ReduceOp op : kOps)
        for (std::size_t count : counts_for(t)) {
          Typed data(t, count), want(t, count);
          for (std::size_t i = 0; i < count; ++i) {
            data.set(i, static_cast<double>(element(t, r, i, n)));
            want.set(i, expected(t, op, i, n));
          }
          const ByteCounters before = comm.bytes();
          comm.all_reduce(data.buf(), op);
          ASSERT_TRUE(same_bits(data, want)) << "rank " << r << "/" << n << " " << name_of(t) << " "
                                             << name_of(op) << " count " << count;
          // sent(r) = E(2count - size(r) - size(r+1)), recv(r) = E(2count - size(r-1) - size(r)).
          const std::uint64_t e = dtype_size(t);
          const bool moves = n > 1 && count > 0;
          EXPECT_TRUE(counted(delta(comm.bytes(), before),
                              moves ? e * (2 * count - chunk(count, n, r) - chunk(count, n, (r + 1) % n)) : 0,
                              moves ? e * (2 * count - chunk(count, n, (r + n - 1) % n) - chunk(count, n, r)) : 0,
                              moves ? 2 * (n - 1) : 0))
              << "rank " << r << "/" << n << " " << name_of(t) << " count " << count;
        }
  });
}

TEST_P(OpsTest, ReduceToEveryRoot) {
  const int n = GetParam();
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (int root = 0; root < n; ++root)
      for (DType t : kTypes)
        for (ReduceOp op : kOps)
          for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{1009}}) {
            Typed data(t, count), want(t, count);
            for (std::size_t i = 0; i < count; ++i) {
              data.set(i, static_cast<double>(element(t, r, i, n)));
              want.set(i, expected(t, op, i, n));
            }
            const Typed input = data;
            const ByteCounters before = comm.bytes();
            comm.reduce(data.buf(), op, root);
            // The root holds the result; everyone else's buffer is exactly as it was.
            ASSERT_TRUE(same_bits(data, r == root ? want : input))
                << "rank " << r << "/" << n << " root " << root << " " << name_of(t) << " " << name_of(op)
                << " count " << count;
            // Every non-root sends its partial once; rank v receives one from each tree child.
            const std::uint64_t s = count * dtype_size(t);
            const int v = (r - root + n) % n;
            EXPECT_TRUE(counted(delta(comm.bytes(), before), v != 0 && s > 0 ? s : 0,
                                s * tree_children(v, n), v != 0 && s > 0 ? 1 : 0))
                << "rank " << r << "/" << n << " root " << root << " count " << count;
          }
  });
}

TEST_P(OpsTest, ReduceScatterGivesRankRItsReducedBlock) {
  const int n = GetParam();
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    const auto un = static_cast<std::size_t>(n);
    for (DType t : kTypes)
      for (ReduceOp op : kOps)
        for (std::size_t block : counts_for(t, kLarge / un)) {
          Typed send(t, un * block), recv(t, block), want(t, block);
          for (std::size_t i = 0; i < un * block; ++i) send.set(i, static_cast<double>(element(t, r, i, n)));
          for (std::size_t k = 0; k < block; ++k) want.set(k, expected(t, op, static_cast<std::size_t>(r) * block + k, n));
          const Typed input = send;
          const ByteCounters before = comm.bytes();
          comm.reduce_scatter(send.cbuf(), recv.buf(), op);
          ASSERT_TRUE(same_bits(recv, want)) << "rank " << r << "/" << n << " " << name_of(t) << " "
                                             << name_of(op) << " block " << block;
          ASSERT_TRUE(same_bits(send, input)) << "send buffer modified";
          // ring_allreduce.h reduce-scatter with N equal chunks of B: sent = recv = E(N-1)B.
          const std::uint64_t moved = n > 1 && block > 0 ? dtype_size(t) * (un - 1) * block : 0;
          EXPECT_TRUE(counted(delta(comm.bytes(), before), moved, moved, moved ? un - 1 : 0))
              << "rank " << r << "/" << n << " block " << block;
        }
  });
}

TEST_P(OpsTest, AllGatherPlacesBlockRFromRankR) {
  const int n = GetParam();
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    const auto un = static_cast<std::size_t>(n);
    for (DType t : kTypes)
      for (std::size_t block : counts_for(t, kLarge / un)) {
        Typed send(t, block), recv(t, un * block), want(t, un * block);
        for (std::size_t k = 0; k < block; ++k) send.set_bits(k, tag(1, r, 0, k));
        for (std::size_t i = 0; i < un * block; ++i) {
          want.set_bits(i, tag(1, i / block, 0, i % block));
          recv.set_bits(i, tag(2, r, 0, i));  // garbage that must be overwritten
        }
        const ByteCounters before = comm.bytes();
        comm.all_gather(send.cbuf(), recv.buf());
        ASSERT_TRUE(same_bits(recv, want)) << "rank " << r << "/" << n << " " << name_of(t) << " block " << block;
        // ring_allreduce.h all-gather with N equal chunks of B: sent = recv = E(N-1)B.
        const std::uint64_t moved = n > 1 && block > 0 ? dtype_size(t) * (un - 1) * block : 0;
        EXPECT_TRUE(counted(delta(comm.bytes(), before), moved, moved, moved ? un - 1 : 0))
            << "rank " << r << "/" << n << " block " << block;
      }
  });
}

TEST_P(OpsTest, InPlaceAllGatherAndReduceScatter) {
  // The FSDP pattern: a rank's input is its own block of the full buffer.
  const int n = GetParam();
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    const auto un = static_cast<std::size_t>(n), ur = static_cast<std::size_t>(r);
    const std::size_t block = 13;
    Typed full(DType::f16, un * block), want(DType::f16, un * block);
    for (std::size_t i = 0; i < un * block; ++i) {
      full.set(i, static_cast<double>(element(DType::f16, r, i, n)));
      want.set(i, expected(DType::f16, ReduceOp::sum, i, n));
    }
    const Buf own = full.buf().sub(ur * block, block);
    comm.reduce_scatter(full.cbuf(), own, ReduceOp::sum);
    ASSERT_EQ(std::memcmp(own.data, want.at(ur * block), own.bytes()), 0) << "reduce_scatter, rank " << r;
    comm.all_gather(own, full.buf());
    ASSERT_TRUE(same_bits(full, want)) << "all_gather, rank " << r;
  });
}

TEST_P(OpsTest, AllGatherVWithUnevenAndZeroCounts) {
  const int n = GetParam();
  const auto un = static_cast<std::size_t>(n);
  // Count patterns: uneven with zeros, all zero, one big contribution from the last rank only.
  std::vector<std::vector<std::size_t>> patterns(3, std::vector<std::size_t>(un, 0));
  for (std::size_t c = 0; c < un; ++c) patterns[0][c] = (c * 7 + 3) % 5;  // 3, 0, 2, 4, 1, 3, ...
  patterns[2][un - 1] = 1009;
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    const auto ur = static_cast<std::size_t>(r);
    for (DType t : kTypes)
      for (const auto& counts : patterns) {
        std::size_t total = 0, mine_at = 0;
        for (std::size_t c = 0; c < un; ++c) {
          if (c == ur) mine_at = total;
          total += counts[c];
        }
        Typed send(t, counts[ur]), recv(t, total), want(t, total);
        for (std::size_t k = 0; k < counts[ur]; ++k) send.set_bits(k, tag(3, r, 0, k));
        for (std::size_t c = 0, at = 0; c < un; ++c)
          for (std::size_t k = 0; k < counts[c]; ++k) want.set_bits(at++, tag(3, c, 0, k));
        const ByteCounters before = comm.bytes();
        comm.all_gather_v(send.cbuf(), recv.buf(), counts);
        ASSERT_TRUE(same_bits(recv, want)) << "rank " << r << "/" << n << " " << name_of(t) << " total " << total;
        // A rank with a zero count has no block (and memcmp must not see its null data()).
        if (!send.bytes.empty()) {
          EXPECT_EQ(std::memcmp(recv.at(mine_at), send.bytes.data(), send.bytes.size()), 0);
        }
        // sent(r) = E(total - counts[r+1]), recv(r) = E(total - counts[r]).
        const std::uint64_t e = dtype_size(t);
        const bool moves = n > 1 && total > 0;
        EXPECT_TRUE(counted(delta(comm.bytes(), before), moves ? e * (total - counts[(ur + 1) % un]) : 0,
                            moves ? e * (total - counts[ur]) : 0, moves ? un - 1 : 0))
            << "rank " << r << "/" << n << " total " << total;
      }
  });
}

TEST_P(OpsTest, AllToAllSendsBlockJOfRankIToBlockIOfRankJ) {
  const int n = GetParam();
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    const auto un = static_cast<std::size_t>(n);
    for (DType t : kTypes)
      for (std::size_t block : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{1009}}) {
        Typed send(t, un * block), recv(t, un * block), want(t, un * block);
        // Element k of the block from src to dst carries tag (src, dst, k).
        for (std::size_t j = 0; j < un; ++j)
          for (std::size_t k = 0; k < block; ++k) {
            send.set_bits(j * block + k, tag(4, r, j, k));
            want.set_bits(j * block + k, tag(4, j, r, k));
          }
        const Typed input = send;
        const ByteCounters before = comm.bytes();
        comm.all_to_all(send.cbuf(), recv.buf());
        ASSERT_TRUE(same_bits(recv, want)) << "rank " << r << "/" << n << " " << name_of(t) << " block " << block;
        ASSERT_TRUE(same_bits(send, input));
        // pairwise_alltoall.h: sent = recv = (N-1)·B bytes in N-1 messages.
        const std::uint64_t moved = n > 1 && block > 0 ? dtype_size(t) * (un - 1) * block : 0;
        EXPECT_TRUE(counted(delta(comm.bytes(), before), moved, moved, moved ? un - 1 : 0))
            << "rank " << r << "/" << n << " block " << block;
      }
  });
}

TEST_P(OpsTest, BroadcastTypedFromEveryRoot) {
  const int n = GetParam();
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (int root = 0; root < n; ++root)
      for (DType t : kTypes)
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{13}, std::size_t{1009}}) {
          Typed data(t, count), want(t, count);
          for (std::size_t k = 0; k < count; ++k) {
            data.set_bits(k, tag(5, r, 0, k));
            want.set_bits(k, tag(5, root, 0, k));
          }
          const ByteCounters before = comm.bytes();
          comm.broadcast(data.buf(), root);
          ASSERT_TRUE(same_bits(data, want)) << "rank " << r << "/" << n << " root " << root << " " << name_of(t);
          // broadcast_tree.h: a non-root receives S once; rank v sends S to each child.
          const std::uint64_t s = count * dtype_size(t);
          const int v = (r - root + n) % n;
          const std::uint64_t kids = s > 0 ? tree_children(v, n) : 0;
          EXPECT_TRUE(counted(delta(comm.bytes(), before), kids * s, v != 0 ? s : 0, kids))
              << "rank " << r << "/" << n << " root " << root << " count " << count;
        }
  });
}

TEST_P(OpsTest, OrderDependentF32SumsAreBitwiseIdenticalAcrossRanksAndOps) {
  // Values whose float sum depends on the fold order. all_reduce must leave the same bits on
  // every rank; reduce_scatter runs the same ring with the same chunks, so rank r's block must be
  // bit for bit block r of the all-reduce, and all_gather of those blocks the whole all-reduce.
  // A second run must reproduce everything (determinism), and reduce (a tree: another order)
  // must agree with the exact sum to rounding.
  const int n = GetParam();
  const auto un = static_cast<std::size_t>(n);
  const std::size_t block = 1009, count = un * block;
  const auto v = [](int r, std::size_t i) {
    return std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(r)) *
           std::exp2(static_cast<float>((i + static_cast<std::size_t>(r)) % 23) - 11);
  };
  std::vector<std::vector<float>> reduced(2 * un), gathered(2 * un), tree(2);
  for (int run = 0; run < 2; ++run) {
    run_threads(n, [&](Communicator& comm) {
      const int r = comm.rank();
      std::vector<float> x(count), rs(block), g(count);
      for (std::size_t i = 0; i < count; ++i) x[i] = v(r, i);
      const std::vector<float> input = x;
      comm.reduce_scatter(cbuf(std::span<const float>(input)), buf(std::span<float>(rs)), ReduceOp::sum);
      comm.all_gather(cbuf(std::span<const float>(rs)), buf(std::span<float>(g)));
      comm.all_reduce(x, ReduceOp::sum);
      reduced[run * n + r] = x;
      gathered[run * n + r] = g;
      std::vector<float> t = input;
      comm.reduce(buf(std::span<float>(t)), ReduceOp::sum, n - 1);
      if (r == n - 1) tree[run] = t;
    });
  }
  for (std::size_t k = 0; k < 2 * un; ++k) {
    ASSERT_EQ(std::memcmp(reduced[k].data(), reduced[0].data(), count * 4), 0) << "all_reduce bits differ, run/rank " << k;
    ASSERT_EQ(std::memcmp(gathered[k].data(), reduced[0].data(), count * 4), 0) << "reduce_scatter+all_gather, run/rank " << k;
  }
  ASSERT_EQ(std::memcmp(tree[0].data(), tree[1].data(), count * 4), 0) << "tree reduce not deterministic";
  for (std::size_t i = 0; i < count; ++i) {
    double exact = 0, mag = 0;
    for (int r = 0; r < n; ++r) {
      exact += v(r, i);
      mag += std::fabs(v(r, i));
    }
    const double tol = n * mag * 6e-8;  // (N-1) roundings of at most half an ulp of partials <= mag
    ASSERT_NEAR(reduced[0][i], exact, tol) << i;
    ASSERT_NEAR(tree[0][i], exact, tol) << i;
  }
}

TEST_P(OpsTest, ArgumentMismatchesThrowAndSendNothing) {
  const int n = GetParam();
  const auto un = static_cast<std::size_t>(n);
  run_threads(n, [&](Communicator& comm) {
    std::vector<float> a(3 * un + 1), b(3 * un + 1);
    std::vector<std::int32_t> ints(3 * un);
    const auto f = [](std::vector<float>& v, std::size_t k) { return Buf{v.data(), k, DType::f32}; };
    const ByteCounters before = comm.bytes();
    // reduce_scatter: send must be N blocks of recv.count, same dtype.
    EXPECT_THROW(comm.reduce_scatter(f(a, 3 * un + 1), f(b, 3), ReduceOp::sum), Error);
    EXPECT_THROW(comm.reduce_scatter(f(a, 3 * un), f(b, 2), ReduceOp::sum), Error);
    EXPECT_THROW(comm.reduce_scatter(CBuf(ints.data(), 3 * un, DType::i32), f(b, 3), ReduceOp::sum), Error);
    // all_gather: recv must be N blocks of send.count, same dtype.
    EXPECT_THROW(comm.all_gather(f(a, 3), f(b, 3 * un + 1)), Error);
    EXPECT_THROW(comm.all_gather(f(a, 3), Buf{ints.data(), 3 * un, DType::i32}), Error);
    // all_gather_v: one count per rank, send.count = counts[rank], recv.count = their sum.
    const std::vector<std::size_t> ones(un, 1), too_few(un - 1, 1);
    EXPECT_THROW(comm.all_gather_v(f(a, 1), f(b, un - 1), too_few), Error);
    EXPECT_THROW(comm.all_gather_v(f(a, 2), f(b, un), ones), Error);
    EXPECT_THROW(comm.all_gather_v(f(a, 1), f(b, un + 1), ones), Error);
    EXPECT_THROW(comm.all_gather_v(f(a, 1), Buf{ints.data(), un, DType::i32}, ones), Error);
    // all_to_all: equal send/recv of N equal blocks, same dtype.
    EXPECT_THROW(comm.all_to_all(f(a, 3 * un), f(b, 3 * un + 1)), Error);
    EXPECT_THROW(comm.all_to_all(f(a, 3 * un), Buf{ints.data(), 3 * un, DType::i32}), Error);
    if (n > 1) {
      EXPECT_THROW(comm.all_to_all(f(a, 3 * un + 1), f(b, 3 * un + 1)), Error);
    }
    EXPECT_THROW(comm.all_to_all(f(a, 3 * un), f(a, 3 * un)), Error);  // in place: unsupported
    EXPECT_THROW(comm.all_to_all(CBuf(a.data() + 1, 3 * un, DType::f32), f(a, 3 * un)), Error);
    // Roots outside the world.
    EXPECT_THROW(comm.reduce(f(a, 3), ReduceOp::sum, n), Error);
    EXPECT_THROW(comm.reduce(f(a, 3), ReduceOp::sum, -1), Error);
    EXPECT_THROW(comm.broadcast(f(a, 3), n), Error);
    EXPECT_THROW(comm.broadcast(f(a, 3), -1), Error);
    // Nothing went on the wire, and the world is still in step: a collective works.
    EXPECT_TRUE(counted(delta(comm.bytes(), before), 0, 0, 0));
    std::vector<float> one = {1.0f};
    comm.all_reduce(one, ReduceOp::sum);
    EXPECT_EQ(one[0], static_cast<float>(n));
  });
}

}  // namespace
}  // namespace laconic
