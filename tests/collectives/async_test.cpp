// Async collectives (Work on the per-rank communication thread): same bits and bytes as the sync
// calls, issue-order completion, sync calls waiting for queued work, failures reaching every
// Work::wait without hanging, destruction with work still queued, and world size 1.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "core/timer.h"
#include "tests/support/new_counter.h"

namespace laconic {
namespace {

template <class T>
Buf b(std::vector<T>& v) {
  return buf(std::span<T>(v));
}
template <class T>
CBuf cb(const std::vector<T>& v) {
  return cbuf(std::span<const T>(v));
}

// Values whose float sum depends on the fold order, so "same result" means "same algorithm,
// same order", not just "close".
float wobbly(int r, std::size_t i) {
  return std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(r)) *
         std::exp2(static_cast<float>((i + static_cast<std::size_t>(r)) % 19) - 9);
}

template <class T>
bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

bool same_counters(const ByteCounters& x, const ByteCounters& y) {
  return x.sent == y.sent && x.recv == y.recv && x.messages_sent == y.messages_sent;
}
ByteCounters delta(const ByteCounters& after, const ByteCounters& before) {
  return {after.sent - before.sent, after.recv - before.recv, after.messages_sent - before.messages_sent};
}

// Runs fn and returns the message of the laconic::Error it throws ("" if it does not).
template <typename F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class AsyncTest : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(WorldSizes, AsyncTest, ::testing::Values(1, 2, 3, 5, 8));

TEST_P(AsyncTest, WaitGivesTheSyncResultsAndBytes) {
  const int n = GetParam();
  const auto un = static_cast<std::size_t>(n);
  const std::size_t block = 1009, count = un * block;
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> x(count);
    for (std::size_t i = 0; i < count; ++i) x[i] = wobbly(r, i);
    std::vector<bf16> h(count);
    for (std::size_t i = 0; i < count; ++i) h[i] = to_bf16(x[i]);

    // Sync reference, op by op, with the bytes each one moved.
    std::vector<float> ar1 = x, rs1(block), ag1(count), bc1 = x;
    std::vector<bf16> hr1 = h;
    ByteCounters cost[5];
    ByteCounters t0 = comm.bytes();
    const auto step = [&](int k) { cost[k] = delta(comm.bytes(), t0); t0 = comm.bytes(); };
    comm.all_reduce(b(ar1), ReduceOp::sum);
    step(0);
    comm.reduce_scatter(cb(x), b(rs1), ReduceOp::avg);
    step(1);
    comm.all_gather(cb(rs1), b(ag1));
    step(2);
    comm.broadcast(b(bc1), n - 1);
    step(3);
    comm.all_reduce(b(hr1), ReduceOp::max);
    step(4);

    // The same through the async forms, each waited on alone so its bytes can be read.
    std::vector<float> ar2 = x, rs2(block), ag2(count), bc2 = x;
    std::vector<bf16> hr2 = h;
    const auto run = [&](int k, const std::shared_ptr<Work>& w) {
      w->wait();
      EXPECT_TRUE(w->done());
      EXPECT_TRUE(same_counters(delta(comm.bytes(), t0), cost[k])) << "op " << k << " rank " << r;
      t0 = comm.bytes();
    };
    run(0, comm.all_reduce_async(b(ar2), ReduceOp::sum));
    run(1, comm.reduce_scatter_async(cb(x), b(rs2), ReduceOp::avg));
    run(2, comm.all_gather_async(cb(rs1), b(ag2)));
    run(3, comm.broadcast_async(b(bc2), n - 1));
    run(4, comm.all_reduce_async(b(hr2), ReduceOp::max));
    EXPECT_TRUE(same_bits(ar1, ar2)) << "all_reduce, rank " << r;
    EXPECT_TRUE(same_bits(rs1, rs2)) << "reduce_scatter, rank " << r;
    EXPECT_TRUE(same_bits(ag1, ag2)) << "all_gather, rank " << r;
    EXPECT_TRUE(same_bits(bc1, bc2)) << "broadcast, rank " << r;
    EXPECT_TRUE(same_bits(hr1, hr2)) << "bf16 all_reduce, rank " << r;

    // And all at once, queued before any wait: same bits again.
    std::vector<float> ar3 = x, rs3(block), ag3(count), bc3 = x;
    auto w0 = comm.all_reduce_async(b(ar3), ReduceOp::sum);
    auto w1 = comm.reduce_scatter_async(cb(x), b(rs3), ReduceOp::avg);
    auto w2 = comm.all_gather_async(cb(rs1), b(ag3));
    auto w3 = comm.broadcast_async(b(bc3), n - 1);
    comm.wait_all();
    for (const auto& w : {w0, w1, w2, w3}) EXPECT_TRUE(w->done());
    EXPECT_TRUE(same_bits(ar1, ar3) && same_bits(rs1, rs3) && same_bits(ag1, ag3) && same_bits(bc1, bc3)) << r;
  });
}

TEST_P(AsyncTest, QueuedOpsCompleteInIssueOrder) {
  // A chain where each op reads the previous one's output, so any reordering changes the values:
  //   a = [r+1] -max-> [N] -all_gather-> g = [N]*N -reduce_scatter(sum)-> c = [N*N]
  //   -broadcast from N-1-> c = [N*N] (every rank)
  // (run out of order, all_gather would see [r+1] and c would be N(N+1)/2), followed by many
  // independent all-reduces. Waiting on the last Work must find every earlier one done.
  const int n = GetParam();
  const auto un = static_cast<std::size_t>(n);
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<float> a = {static_cast<float>(r + 1)}, g(un), c(1, -1.0f);
    std::vector<std::shared_ptr<Work>> works;
    works.push_back(comm.all_reduce_async(b(a), ReduceOp::max));
    works.push_back(comm.all_gather_async(cb(a), b(g)));
    works.push_back(comm.reduce_scatter_async(cb(g), b(c), ReduceOp::sum));
    works.push_back(comm.broadcast_async(b(c), n - 1));
    std::vector<std::vector<std::int32_t>> many(32, std::vector<std::int32_t>(257));
    for (std::size_t k = 0; k < many.size(); ++k) {
      for (std::size_t i = 0; i < many[k].size(); ++i) many[k][i] = static_cast<std::int32_t>(k * 1000 + i) * (r + 1);
      works.push_back(comm.all_reduce_async(b(many[k]), ReduceOp::sum));
    }
    works.back()->wait();
    for (std::size_t k = 0; k < works.size(); ++k) EXPECT_TRUE(works[k]->done()) << "work " << k << " rank " << r;
    EXPECT_EQ(a, std::vector<float>{static_cast<float>(n)});
    EXPECT_EQ(g, std::vector<float>(un, static_cast<float>(n)));
    EXPECT_EQ(c, std::vector<float>{static_cast<float>(n * n)});
    const auto ranks = n * (n + 1) / 2;  // sum of (r + 1)
    for (std::size_t k = 0; k < many.size(); ++k)
      for (std::size_t i = 0; i < many[k].size(); ++i)
        ASSERT_EQ(many[k][i], static_cast<std::int32_t>(k * 1000 + i) * ranks) << k << " " << i;
  });
}

TEST_P(AsyncTest, SyncCallWaitsForQueuedWork) {
  // A sync collective on the same buffer as a queued async one must run after it: sum twice is
  // N * N(N+1)/2 per element; and when it returns, the async op's Work is done and its bytes are
  // on the counters (ring all-reduce: each all-reduce moves E(2count - size(r) - size(r+1))).
  const int n = GetParam();
  const auto un = static_cast<std::size_t>(n);
  const std::size_t count = std::size_t{1} << 18;  // long enough that a race would show
  run_threads(n, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::int32_t> x(count);
    for (std::size_t i = 0; i < count; ++i) x[i] = (r + 1) * static_cast<std::int32_t>(i % 1000);
    const ByteCounters before = comm.bytes();
    auto w = comm.all_reduce_async(b(x), ReduceOp::sum);
    comm.all_reduce(b(x), ReduceOp::sum);
    EXPECT_TRUE(w->done());
    const std::int32_t factor = n * n * (n + 1) / 2;
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(x[i], factor * static_cast<std::int32_t>(i % 1000)) << "rank " << r << " element " << i;
    const auto chunk = [&](int c) {  // ring_allreduce.h: floor(count/N) + (c < count mod N)
      return count / un + (static_cast<std::size_t>(c) < count % un ? 1 : 0);
    };
    const std::uint64_t sent = 4 * (2 * count - chunk(r) - chunk((r + 1) % n));
    const std::uint64_t recv = 4 * (2 * count - chunk((r + n - 1) % n) - chunk(r));
    const ByteCounters want = n > 1 ? ByteCounters{2 * sent, 2 * recv, 4 * (un - 1)} : ByteCounters{};
    EXPECT_TRUE(same_counters(delta(comm.bytes(), before), want)) << "rank " << r;

    // A sync all_gather reading what a queued broadcast writes.
    std::vector<float> v = {static_cast<float>(r) + 0.5f}, g(static_cast<std::size_t>(n));
    comm.broadcast_async(b(v), 0);
    comm.all_gather(cb(v), b(g));
    EXPECT_EQ(g, std::vector<float>(static_cast<std::size_t>(n), 0.5f));
  });
}

// An async operation's bytes reach the counters when its issuer learns that it finished (its
// wait(), or a drain), never while it runs: a record read between issue and wait sees the same
// totals in every run. Before, they were counted as the bytes went out, and a metrics record taken
// while eager DiLoCo's outer sync was in flight read any part of it (a golden failed 1 run in ~3).
TEST_P(AsyncTest, BytesCountWhenTheIssuerWaits) {
  const int n = GetParam();
  run_threads(n, [&](Communicator& comm) {
    std::vector<float> x(4096, 1.0f), y(x);
    const ByteCounters before = comm.bytes();
    comm.all_reduce(b(x), ReduceOp::sum);
    const ByteCounters one = delta(comm.bytes(), before);

    Work w1, w2;
    const ByteCounters issued = comm.bytes();
    comm.run_async(w1, [&] { comm.all_reduce(b(y), ReduceOp::sum); });
    comm.run_async(w2, [&] { comm.all_reduce(b(y), ReduceOp::sum); });
    while (!w2.done()) std::this_thread::yield();  // both finished, neither waited for
    EXPECT_TRUE(same_counters(comm.bytes(), issued)) << "rank " << comm.rank() << ": counted before any wait";
    w2.wait();  // ops run in issue order: w2's end settles w1's bytes too
    EXPECT_TRUE(same_counters(delta(comm.bytes(), issued), one + one)) << "rank " << comm.rank();
    w1.wait();  // settles nothing twice
    EXPECT_TRUE(same_counters(delta(comm.bytes(), issued), one + one)) << "rank " << comm.rank();

    const ByteCounters drained = comm.bytes();
    auto w3 = comm.all_reduce_async(b(y), ReduceOp::sum);
    comm.wait_all();  // a drain settles what nobody waited for
    EXPECT_TRUE(same_counters(delta(comm.bytes(), drained), one)) << "rank " << comm.rank();
    w3->wait();
    EXPECT_TRUE(same_counters(delta(comm.bytes(), drained), one)) << "rank " << comm.rank();
  });
}

// A queue that never empties (eager DiLoCo: fragment f's reduction re-queued while another's is
// still pending) stays within what reserve_async() sized: the run items are dropped in place.
// Three Works, each op waiting for its turn: when w1 is re-queued, w2 runs and w3 is pending.
// It grew by one item per push before (the flaky EagerDiloco.NoAllocationInTheSteps).
TEST(Async, AQueueThatNeverEmptiesDoesNotGrow) {
  if (!new_counter::in_use()) GTEST_SKIP() << "another operator new replacement is linked in";
  run_threads(1, [&](Communicator& comm) {
    comm.reserve_async(3);
    Work w[3];
    std::atomic<int> released{0};
    int next = 0;  // the turn of the op queued next
    const auto queue = [&](Work& work) {
      const int turn = ++next;
      comm.run_async(work, [&released, turn] {
        while (released.load() < turn) std::this_thread::yield();
      });
    };
    for (Work& work : w) queue(work);  // turns 1, 2, 3
    long news = 0;
    for (int round = 0; round < 30; ++round) {
      Work& done = w[round % 3];
      released.store(round + 1);  // its op ends; the next one starts, the one after is pending
      done.wait();
      news += new_counter::during([&] { queue(done); });
    }
    released.store(1 << 30);
    for (Work& work : w) work.wait();
    EXPECT_EQ(news, 0);
  });
}

TEST(Async, AFailingPeerReachesEveryWaitPromptly) {
  // The last rank throws before issuing anything; the others wait on async all-reduces that need
  // it. Each Work::wait must throw, and run_threads must report the original failure, well
  // before the (short) timeout: the failure wakes the waiters, they do not time out.
  for (int n : {2, 4}) {
    ThreadsOptions opts;
    opts.timeout_s = 5;
    Stopwatch clock;
    int waits_threw = 0;
    std::mutex mu;
    const std::string what = error_of([&] {
      run_threads(n, [&](Communicator& comm) {
        if (comm.rank() == n - 1) throw std::runtime_error("boom");
        std::vector<float> x(1009, 1.0f);
        auto w1 = comm.all_reduce_async(b(x), ReduceOp::sum);
        auto w2 = comm.broadcast_async(b(x), 0);
        for (const auto& w : {w1, w2}) {
          try {
            w->wait();
          } catch (const Error&) {
            std::lock_guard lock(mu);
            ++waits_threw;
          }
        }
        // A sync call after the failure throws as well (the world is failed).
        EXPECT_THROW(comm.barrier(), Error);
      }, opts);
    });
    EXPECT_EQ(what, "rank " + std::to_string(n - 1) + " failed: boom");
    EXPECT_EQ(waits_threw, 2 * (n - 1));
    EXPECT_LT(clock.seconds(), 2.5);
  }
}

TEST(Async, AnOpsOwnErrorIsRethrownByWaitAndTheQueueKeepsGoing) {
  run_threads(3, [](Communicator& comm) {
    std::vector<float> send(7), recv(2);  // 7 is not 3 blocks of 2
    auto bad = comm.reduce_scatter_async(cb(send), b(recv), ReduceOp::sum);
    std::vector<float> x = {1.0f};
    auto good = comm.all_reduce_async(b(x), ReduceOp::sum);
    const std::string what = error_of([&] { bad->wait(); });
    EXPECT_NE(what.find("reduce_scatter"), std::string::npos) << what;
    EXPECT_NE(error_of([&] { bad->wait(); }), "");  // and again: the error stays with the Work
    good->wait();
    EXPECT_EQ(x[0], 3.0f);
  });
}

TEST(Async, DestroyingACommunicatorRunsItsQueuedWork) {
  // Every rank queues work and returns without waiting: the destructor drains the queue (all
  // ranks take part), so the buffers, which outlive run_threads, hold the results.
  const int n = 4;
  std::vector<std::vector<float>> out(n, std::vector<float>(1009));
  std::vector<std::vector<float>> gathered(n, std::vector<float>(n));
  run_threads(n, [&](Communicator& comm) {
    auto& x = out[static_cast<std::size_t>(comm.rank())];
    for (float& e : x) e = static_cast<float>(comm.rank());
    comm.all_reduce_async(b(x), ReduceOp::sum);
    comm.all_gather_async(CBuf(x.data(), 1, DType::f32), b(gathered[static_cast<std::size_t>(comm.rank())]));
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(out[r], std::vector<float>(1009, 6.0f)) << r;
    EXPECT_EQ(gathered[r], std::vector<float>(n, 6.0f)) << r;
  }

  // One rank alone, destroyed right after queuing.
  ThreadsWorld world(1);
  std::vector<float> y(100, 2.0f);
  {
    ThreadsCommunicator comm(world, 0);
    comm.all_reduce_async(b(y), ReduceOp::avg);
    comm.broadcast_async(b(y), 0);
  }
  EXPECT_EQ(y, std::vector<float>(100, 2.0f));
}

TEST(Async, DestroyingWithWorkNoPeerWillJoinDoesNotHang) {
  // Buffers of queued work must outlive the communicator (its destructor joins the communication
  // thread after fn's locals are gone), so they live out here.
  ThreadsOptions opts;
  opts.timeout_s = 5;
  std::vector<std::vector<float>> bufs(3, std::vector<float>(4096, 1.0f));

  // Rank 0 queues an all-reduce that rank 1 never joins; rank 1 returns. Rank 0's destructor must
  // come back (the queued op fails: its peer has returned), not wait for the timeout.
  Stopwatch clock;
  run_threads(2, [&](Communicator& comm) {
    if (comm.rank() == 0) static_cast<void>(comm.all_reduce_async(b(bufs[0]), ReduceOp::sum));
  }, opts);
  EXPECT_LT(clock.seconds(), 2.5);

  // A rank that throws with work queued: its peers' queued work fails too; no hang, and
  // run_threads reports the thrower.
  clock.reset();
  const std::string what = error_of([&] {
    run_threads(3, [&](Communicator& comm) {
      auto& x = bufs[static_cast<std::size_t>(comm.rank())];
      comm.all_reduce_async(b(x), ReduceOp::sum);
      if (comm.rank() == 1) throw std::runtime_error("gone");
      comm.all_reduce_async(b(x), ReduceOp::sum);
      comm.barrier();  // waits for the queue, then needs rank 1: throws
    }, opts);
  });
  EXPECT_EQ(what, "rank 1 failed: gone");
  EXPECT_LT(clock.seconds(), 2.5);
}

TEST(Async, WorldOfOne) {
  run_threads(1, [](Communicator& comm) {
    std::vector<float> x = {1.5f, -2.0f, 3.25f}, rs(3), ag(3);
    const std::vector<float> x0 = x;
    auto w1 = comm.all_reduce_async(b(x), ReduceOp::avg);
    auto w2 = comm.reduce_scatter_async(cb(x0), b(rs), ReduceOp::sum);
    auto w3 = comm.all_gather_async(cb(x0), b(ag));
    auto w4 = comm.broadcast_async(b(x), 0);
    for (const auto& w : {w1, w2, w3, w4}) w->wait();
    EXPECT_EQ(x, x0);
    EXPECT_EQ(rs, x0);
    EXPECT_EQ(ag, x0);
    EXPECT_TRUE(same_counters(comm.bytes(), {}));
    comm.wait_all();  // nothing queued: returns at once
  });
}

}  // namespace
}  // namespace laconic
