// The threads backend: point-to-point semantics, counters, failure propagation and timeouts.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "core/timer.h"

namespace laconic {
namespace {

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

TEST(ThreadsCommunicator, RankSizeBackend) {
  std::vector<int> seen(5, -1);
  run_threads(5, [&](Communicator& comm) {
    EXPECT_EQ(comm.size(), 5);
    EXPECT_EQ(comm.backend(), "threads");
    seen[comm.rank()] = comm.rank();
  });
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(ThreadsCommunicator, MessagesArriveInOrderAndAreCounted) {
  // Rank 0 sends 50 messages of growing size (buffers are reused and must grow) before rank 1
  // reads any of them; then a few to itself.
  run_threads(2, [](Communicator& comm) {
    if (comm.rank() == 0) {
      for (int k = 0; k < 50; ++k) {
        std::vector<int> msg(k, k);
        comm.send(msg.data(), msg.size() * sizeof(int), 1);
      }
      const int self = 42;
      comm.send(&self, sizeof self, 0);
      int back = 0;
      comm.recv(&back, sizeof back, 0);
      EXPECT_EQ(back, 42);
      EXPECT_EQ(comm.bytes().sent, 4u * (49 * 50 / 2) + 4);
      EXPECT_EQ(comm.bytes().messages_sent, 51u);
      EXPECT_EQ(comm.bytes().recv, 4u);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      for (int k = 0; k < 50; ++k) {
        std::vector<int> msg(k, -1);
        comm.recv(msg.data(), msg.size() * sizeof(int), 0);
        EXPECT_EQ(msg, std::vector<int>(k, k)) << "message " << k;
      }
      EXPECT_EQ(comm.bytes().recv, 4u * (49 * 50 / 2));
      EXPECT_EQ(comm.bytes().sent, 0u);
    }
  });
}

TEST(ThreadsCommunicator, SendrecvAroundTheRingDoesNotDeadlock) {
  run_threads(7, [](Communicator& comm) {
    const int n = comm.size(), r = comm.rank();
    std::vector<double> out(4096, r), in(4096, -1);
    comm.sendrecv(out.data(), out.size() * 8, (r + 1) % n, in.data(), in.size() * 8, (r + n - 1) % n);
    EXPECT_EQ(in, std::vector<double>(4096, (r + n - 1) % n));
    EXPECT_EQ(comm.bytes().sent, 4096u * 8);
    EXPECT_EQ(comm.bytes().recv, 4096u * 8);
    EXPECT_EQ(comm.bytes().messages_sent, 1u);
  });
}

TEST(ThreadsCommunicator, SizeMismatchAndBadPeerAreErrors) {
  EXPECT_NE(error_of([] {
              run_threads(2, [](Communicator& comm) {
                char buf[8] = {};
                if (comm.rank() == 0) comm.send(buf, 8, 1);
                else comm.recv(buf, 4, 0);
              });
            }).find("rank 1 failed: rank 1: expected 4 bytes from rank 0, got 8"),
            std::string::npos);
  EXPECT_NE(error_of([] { run_threads(2, [](Communicator& comm) { comm.send("x", 1, 2); }); })
                .find("peer 2 outside a world of 2 ranks"),
            std::string::npos);
}

TEST(ThreadsCommunicator, AFailingRankStopsEveryRankPromptly) {
  // Rank 2 throws while the others wait in an all-reduce that needs it: everyone must wake up and
  // run_threads must report rank 2's own error, not the echoes, long before the timeout.
  for (int trial = 0; trial < 3; ++trial) {
    Stopwatch clock;
    ThreadsOptions opts;
    opts.timeout_s = 30;
    const std::string what = error_of([&] {
      run_threads(4, [](Communicator& comm) {
        std::vector<float> v(1000, 1.0f);
        comm.all_reduce(v, ReduceOp::sum);  // one good all-reduce first
        if (comm.rank() == 2) throw std::runtime_error("boom");
        comm.all_reduce(v, ReduceOp::sum);
        comm.barrier();
      }, opts);
    });
    EXPECT_EQ(what, "rank 2 failed: boom");
    EXPECT_LT(clock.seconds(), 5.0);
  }
}

TEST(ThreadsCommunicator, AWaiterWakesOnFailureEvenIfItsPeerIsBusy) {
  // Rank 0 waits on rank 1, which is busy (not in a collective) for 600 ms; rank 2 fails at once.
  // Rank 0 must give up on the failure, not when rank 1 comes back.
  double rank0_waited = -1;
  const std::string what = error_of([&] {
    run_threads(3, [&](Communicator& comm) {
      if (comm.rank() == 2) throw std::runtime_error("early");
      if (comm.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(600));
        return;
      }
      Stopwatch clock;
      int x = 0;
      try {
        comm.recv(&x, sizeof x, 1);
      } catch (const Error&) {
        rank0_waited = clock.seconds();
        throw;
      }
    });
  });
  EXPECT_EQ(what, "rank 2 failed: early");
  EXPECT_GE(rank0_waited, 0.0);
  EXPECT_LT(rank0_waited, 0.3);
}

TEST(ThreadsCommunicator, InputErrorKeepsItsType) {
  EXPECT_THROW(run_threads(3, [](Communicator& comm) {
                 if (comm.rank() == 1) throw InputError("bad recipe");
                 comm.barrier();
               }),
               InputError);
}

TEST(ThreadsCommunicator, RecvFromARankThatReturnedFailsAtOnce) {
  Stopwatch clock;
  const std::string what = error_of([] {
    run_threads(3, [](Communicator& comm) {
      if (comm.rank() != 2) return;
      int x = 0;
      comm.recv(&x, sizeof x, 1);
    });
  });
  EXPECT_EQ(what, "rank 2 failed: rank 2: waiting for 4 bytes from rank 1, which has already returned");
  EXPECT_LT(clock.seconds(), 5.0);
}

TEST(ThreadsCommunicator, RecvTimesOut) {
  ThreadsOptions opts;
  opts.timeout_s = 0.05;
  Stopwatch clock;
  const std::string what = error_of([&] {
    run_threads(3, [](Communicator& comm) {
      if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
      if (comm.rank() != 2) return;
      std::vector<char> buf(4096);
      comm.recv(buf.data(), buf.size(), 1);
    }, opts);
  });
  EXPECT_EQ(what, "rank 2 failed: rank 2: timed out after 0.05 s waiting for 4096 bytes from rank 1");
  EXPECT_GE(clock.seconds(), 0.05);
}

TEST(ThreadsCommunicator, WorldSizeMustBePositive) {
  EXPECT_THROW(run_threads(0, [](Communicator&) {}), Error);
}

// A wrapper built with Communicator::ShowInner (as device staging is) and the communicator it
// wraps see one algorithm, chooser and groups, whichever of the two they were set on, and one
// ledger: every byte is counted once, by the inner that moves it.
class Forwarding final : public Communicator {
 public:
  explicit Forwarding(Communicator& inner) : Communicator(ShowInner{}, inner), inner_(inner) {}
  ~Forwarding() override { stop_async(); }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backend() const override { return inner_.backend() + "+forwarding"; }

 protected:
  void do_send(const void* d, std::size_t n, int peer) override { inner_.send(d, n, peer); }
  void do_recv(void* d, std::size_t n, int peer) override { inner_.recv(d, n, peer); }
  void do_sendrecv(const void* s, std::size_t sn, int to, void* r, std::size_t rn, int from) override {
    inner_.sendrecv(s, sn, to, r, rn, from);
  }

 private:
  Communicator& inner_;
};

TEST(ThreadsCommunicator, AWrapperSharesItsInnersPolicy) {
  run_threads(2, [&](Communicator& comm) {
    Forwarding wrapper(comm);
    wrapper.set_algorithm(Algorithm::recursive_doubling);
    wrapper.set_groups({0, 1});
    EXPECT_EQ(comm.algorithm(), Algorithm::recursive_doubling);
    EXPECT_EQ(comm.groups(), (std::vector<int>{0, 1}));
    comm.set_algorithm(Algorithm::auto_);
    int chosen = 0;
    comm.set_algorithm_chooser([&](std::size_t) {
      ++chosen;
      return Algorithm::ring;
    });
    EXPECT_EQ(wrapper.algorithm(), Algorithm::auto_);
    float x = static_cast<float>(comm.rank());
    wrapper.all_reduce(std::span(&x, 1), ReduceOp::sum);  // the wrapper's all-reduce asks the shared chooser
    EXPECT_EQ(x, 1.0f);
    EXPECT_EQ(chosen, 1);
    // Counted once: the same all-reduce run directly on the inner adds what the wrapper's did.
    const ByteCounters through_wrapper = comm.bytes();
    EXPECT_GT(through_wrapper.sent, 0u);
    EXPECT_EQ(wrapper.bytes().sent, through_wrapper.sent);
    comm.all_reduce(std::span(&x, 1), ReduceOp::sum);
    EXPECT_EQ(comm.bytes().sent, 2 * through_wrapper.sent);
    EXPECT_EQ(comm.bytes().recv, 2 * through_wrapper.recv);
    EXPECT_EQ(comm.bytes().messages_sent, 2 * through_wrapper.messages_sent);
    // A run's traffic over several communicators counts each ledger once.
    EXPECT_EQ(total_bytes({&comm, &wrapper, nullptr}).sent, comm.bytes().sent);
  });
}

// Every communicator counts its traffic per link tier of its groups() in the one place it counts
// bytes: a message to a rank of another group is tier 1, within the group tier 0.
TEST(ThreadsCommunicator, CountsBytesPerTierOfItsGroups) {
  run_threads(4, [&](Communicator& comm) {
    comm.set_groups({0, 0, 1, 1});
    const int r = comm.rank();
    std::vector<std::byte> out(100), in(100);
    comm.sendrecv(out.data(), 100, r ^ 1, in.data(), 100, r ^ 1);  // inside the group
    comm.sendrecv(out.data(), 40, r ^ 2, in.data(), 40, r ^ 2);    // across
    EXPECT_EQ(comm.tier_bytes(0).sent, 100u);
    EXPECT_EQ(comm.tier_bytes(0).recv, 100u);
    EXPECT_EQ(comm.tier_bytes(1).sent, 40u);
    EXPECT_EQ(comm.tier_bytes(1).recv, 40u);
    EXPECT_EQ(comm.tier_bytes(1).messages_sent, 1u);
    EXPECT_EQ(comm.bytes().sent, 140u);
    EXPECT_EQ(comm.bytes().messages_sent, 2u);
  });
}

}  // namespace
}  // namespace laconic
