// Ring all-reduce on the threads backend: closed-form results, bitwise identity across ranks,
// determinism, and per-rank byte counts against the chunking formula in ring_allreduce.h.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "collectives/algorithms/ring_allreduce.h"
#include "collectives/threads/threads_communicator.h"

namespace laconic {
namespace {

// Counts < N, 0, 1, 2, primes, and 1 MiB of floats.
const std::vector<std::size_t> kCounts = {0, 1, 2, 3, 5, 7, 1009, std::size_t{1} << 18};

// Element i on rank r: an integer below 2^24 in magnitude, so every partial sum is exact and
// the result has a closed form whatever the order:
//   sum_r v(r, i) = 1000 * (N(N-1)/2 - 3N) + N*i,   max_r v(r, i) = 1000 * (N-4) + i.
float value(int r, std::size_t i, int n) {
  const auto k = static_cast<long>((static_cast<std::size_t>(r) + i) % static_cast<std::size_t>(n));
  return static_cast<float>((k - 3) * 1000 + static_cast<long>(i));
}

float expected(ReduceOp op, std::size_t i, int n) {
  const long li = static_cast<long>(i);
  const float sum = static_cast<float>(1000L * (n * (n - 1) / 2 - 3 * n) + n * li);
  switch (op) {
    case ReduceOp::sum: return sum;
    case ReduceOp::avg: return sum / static_cast<float>(n);  // one correctly rounded division
    case ReduceOp::max: return static_cast<float>(1000L * (n - 4) + li);
  }
  return 0;
}

// The chunk sizes of ring_allreduce.h, written out independently of RingChunks.
std::uint64_t chunk(std::size_t count, int n, int c) {
  return count / n + (static_cast<std::size_t>(c) < count % n ? 1 : 0);
}

class RingAllReduceTest : public ::testing::TestWithParam<int> {};

TEST_P(RingAllReduceTest, ClosedFormOnEveryRank) {
  const int n = GetParam();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    run_threads(n, [&](Communicator& comm) {
      std::vector<float> data;
      for (std::size_t count : kCounts) {
        data.resize(count);
        for (std::size_t i = 0; i < count; ++i) data[i] = value(comm.rank(), i, n);
        comm.all_reduce(data, op);
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < count; ++i) wrong += data[i] != expected(op, i, n);
        ASSERT_EQ(wrong, 0u) << "rank " << comm.rank() << " of " << n << ", count " << count
                             << ", op " << static_cast<int>(op) << ", data[0] " << data[0];
      }
    });
  }
}

TEST_P(RingAllReduceTest, InexactSumIsBitwiseIdenticalAndDeterministic) {
  // Values whose float sum depends on the order: every rank must still hold the same bits, the
  // same bits on a second run, and the result must be close to the exact (double) sum.
  const int n = GetParam();
  const std::size_t count = 1009;
  const auto v = [](int r, std::size_t i) {
    return std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(r)) * std::exp2(static_cast<float>((i + r) % 17) - 8);
  };
  std::vector<std::vector<float>> out(2 * n);
  for (int run = 0; run < 2; ++run) {
    run_threads(n, [&](Communicator& comm) {
      std::vector<float> data(count);
      for (std::size_t i = 0; i < count; ++i) data[i] = v(comm.rank(), i);
      comm.all_reduce(data, ReduceOp::avg);
      out[run * n + comm.rank()] = data;
    });
  }
  for (std::size_t i = 0; i < count; ++i) {
    double exact = 0;
    for (int r = 0; r < n; ++r) exact += v(r, i);
    exact /= n;
    EXPECT_NEAR(out[0][i], exact, 1e-5 * (1 + std::abs(exact))) << "i " << i;
  }
  for (int k = 1; k < 2 * n; ++k)
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(out[k][i]), std::bit_cast<std::uint32_t>(out[0][i]))
          << "rank " << k % n << " run " << k / n << " i " << i;
}

TEST_P(RingAllReduceTest, BytesOnTheWireMatchTheFormula) {
  const int n = GetParam();
  std::vector<ByteCounters> counted(n);
  for (std::size_t count : kCounts) {
    run_threads(n, [&](Communicator& comm) {
      std::vector<float> data(count, 1.0f);
      comm.all_reduce(data, ReduceOp::sum);
      counted[comm.rank()] = comm.bytes();
    });
    std::uint64_t total = 0;
    for (int r = 0; r < n; ++r) {
      // sent(r) = 4*(2*count - size(r) - size(r+1)), recv(r) = 4*(2*count - size(r-1) - size(r)).
      const std::uint64_t sent = 4 * (2 * count - chunk(count, n, r) - chunk(count, n, (r + 1) % n));
      const std::uint64_t recv = 4 * (2 * count - chunk(count, n, (r + n - 1) % n) - chunk(count, n, r));
      EXPECT_EQ(counted[r].sent, sent) << "rank " << r << " of " << n << ", count " << count;
      EXPECT_EQ(counted[r].recv, recv) << "rank " << r << " of " << n << ", count " << count;
      EXPECT_EQ(counted[r].messages_sent, count > 0 ? 2u * (n - 1) : 0u);
      if (count % n == 0) {
        EXPECT_EQ(counted[r].sent * n, 2 * (n - 1) * 4 * count);  // exactly 2(N-1)/N * S
      }
      total += counted[r].sent;
    }
    EXPECT_EQ(total, 2u * (n - 1) * 4 * count) << "all ranks together send 2(N-1)*S";
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingAllReduceTest, ::testing::Range(1, 9));

TEST(RingChunks, SizesDifferByAtMostOneAndTile) {
  for (int n = 1; n <= 8; ++n)
    for (std::size_t count : kCounts) {
      RingChunks ch{count, n};
      std::size_t next = 0;
      for (int c = 0; c < n; ++c) {
        EXPECT_EQ(ch.offset(c), next);
        EXPECT_EQ(ch.size(c), chunk(count, n, c));
        EXPECT_LE(ch.size(0) - ch.size(c), 1u);
        next += ch.size(c);
      }
      EXPECT_EQ(next, count);
    }
}

}  // namespace
}  // namespace laconic
