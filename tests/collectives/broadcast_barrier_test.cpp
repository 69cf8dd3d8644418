// Binomial broadcast and dissemination barrier on the threads backend.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "collectives/threads/threads_communicator.h"

namespace laconic {
namespace {

std::uint64_t ceil_log2(int n) {
  std::uint64_t k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, BroadcastFromEveryRootReachesEveryRank) {
  const int n = GetParam();
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1009}}) {
    for (int root = 0; root < n; ++root) {
      std::vector<ByteCounters> counted(n);
      run_threads(n, [&](Communicator& comm) {
        // The root's pattern depends on the root, everyone else starts from garbage.
        std::vector<std::uint8_t> buf(bytes, 0xEE);
        if (comm.rank() == root)
          for (std::size_t i = 0; i < bytes; ++i) buf[i] = static_cast<std::uint8_t>(i * 31 + root);
        comm.broadcast(buf.data(), bytes, root);
        for (std::size_t i = 0; i < bytes; ++i)
          ASSERT_EQ(buf[i], static_cast<std::uint8_t>(i * 31 + root)) << "rank " << comm.rank() << " i " << i;
        counted[comm.rank()] = comm.bytes();
      });
      // Every non-root receives S once; the tree has N-1 edges; the root feeds ceil(log2 N) children.
      std::uint64_t sent = 0, messages = 0;
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(counted[r].recv, r == root ? 0 : bytes) << "rank " << r << " root " << root;
        EXPECT_LE(counted[r].messages_sent, ceil_log2(n));
        sent += counted[r].sent;
        messages += counted[r].messages_sent;
      }
      EXPECT_EQ(counted[root].sent, ceil_log2(n) * bytes) << "root " << root << " of " << n;
      EXPECT_EQ(sent, (n - 1) * bytes);
      EXPECT_EQ(messages, bytes > 0 ? std::uint64_t(n - 1) : 0u);
    }
  }
}

TEST_P(CollectivesTest, BarrierWaitsForEveryRank) {
  const int n = GetParam();
  const int rounds = 20;
  std::atomic<int> arrived{0};
  std::vector<ByteCounters> counted(n);
  run_threads(n, [&](Communicator& comm) {
    for (int k = 0; k < rounds; ++k) {
      // Late arrivals in some rounds: a barrier that did not wait would see a short count.
      if (k % 5 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300 * comm.rank()));
      arrived.fetch_add(1);
      comm.barrier();
      ASSERT_EQ(arrived.load(), (k + 1) * n) << "rank " << comm.rank() << " round " << k;
      comm.barrier();  // nobody starts round k+1 before everyone has checked round k
    }
    counted[comm.rank()] = comm.bytes();
  });
  // Dissemination: ceil(log2 N) one-byte messages per rank per barrier, 2 barriers per round.
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(counted[r].sent, 2 * rounds * ceil_log2(n));
    EXPECT_EQ(counted[r].recv, 2 * rounds * ceil_log2(n));
    EXPECT_EQ(counted[r].messages_sent, 2 * rounds * ceil_log2(n));
  }
}

TEST_P(CollectivesTest, MixedCollectivesStayMatched) {
  // Back-to-back collectives of different kinds share the pairwise FIFOs; each must still receive
  // its own messages (a mismatch shows up as a size error or a wrong value).
  const int n = GetParam();
  run_threads(n, [&](Communicator& comm) {
    std::vector<float> v(13);
    for (int k = 0; k < 10; ++k) {
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(comm.rank() + k);
      comm.all_reduce(v, ReduceOp::max);
      ASSERT_EQ(v[12], static_cast<float>(n - 1 + k));
      comm.barrier();
      int token = comm.rank() == k % n ? 100 + k : -1;
      comm.broadcast(&token, sizeof token, k % n);
      ASSERT_EQ(token, 100 + k);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest, ::testing::Range(1, 9));

}  // namespace
}  // namespace laconic
