// NoLoCo (framework/sync/noloco.h): every pairing is a perfect matching of the ranks (one rank sits
// out when their number is odd), the same on every rank; the outer step keeps the replicas' mean
// anchor moving by the mean pseudo-gradient and momentum only (the pull cancels inside each pair);
// it follows the rule written out in double over several syncs (4 ranks, and 3 with a sit-out);
// 2 x 4n bytes per rank per sync, none for the one sitting out; a run resumed mid-period is the
// uninterrupted one bit for bit; no allocation in the step loop after the first sync.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "framework/sync/noloco.h"
#include "optimizers/sgd.h"
#include "tests/support/new_counter.h"
#include "tests/sync/small_store.h"

namespace laconic {
namespace {

float value(int rank, std::size_t i, std::int64_t step) {
  return std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(rank) + 0.2f * static_cast<float>(step));
}

std::span<float> find_state(SyncStrategy& s, const std::string& name) {
  for (const StateTensor& t : s.state())
    if (t.name == name) return t.data;
  ADD_FAILURE() << "no state " << name;
  return {};
}

bool same_bits(std::span<const float> a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), b.size() * sizeof(float)) == 0;
}

TEST(NoLoco, EveryPairingIsAPerfectMatchingTheSameOnEveryRank) {
  for (int world = 2; world <= 9; ++world) {
    SCOPED_TRACE(::testing::Message() << "world " << world);
    constexpr int kSyncs = 200;
    std::vector<std::vector<int>> peers(static_cast<std::size_t>(world), std::vector<int>(kSyncs));
    run_threads(world, [&](Communicator& comm) {
      std::vector<int> perm;
      for (int k = 0; k < kSyncs; ++k)
        peers[static_cast<std::size_t>(comm.rank())][static_cast<std::size_t>(k)] =
            NoLoco::peer(11, k, comm.size(), comm.rank(), perm);
    });
    std::set<std::vector<int>> matchings;
    for (int k = 0; k < kSyncs; ++k) {
      std::vector<int> perm;
      NoLoco::pairing(11, k, world, perm);
      std::vector<int> sorted = perm;
      std::sort(sorted.begin(), sorted.end());
      for (int r = 0; r < world; ++r) ASSERT_EQ(sorted[static_cast<std::size_t>(r)], r);  // a permutation
      int alone = 0;
      std::vector<int> of(static_cast<std::size_t>(world));
      for (int r = 0; r < world; ++r) {
        const int p = peers[static_cast<std::size_t>(r)][static_cast<std::size_t>(k)];
        of[static_cast<std::size_t>(r)] = p;
        ASSERT_GE(p, 0);
        ASSERT_LT(p, world);
        ASSERT_EQ(peers[static_cast<std::size_t>(p)][static_cast<std::size_t>(k)], r) << "sync " << k;  // mutual
        alone += p == r;
      }
      EXPECT_EQ(alone, world % 2) << "sync " << k;
      if (world % 2 == 1) {
        EXPECT_EQ(of[static_cast<std::size_t>(perm.back())], perm.back());
      }
      matchings.insert(of);
    }
    // Random: every one of the matchings of 4 ranks shows up (3 of them), and more than one elsewhere.
    if (world == 4) {
      EXPECT_EQ(matchings.size(), 3u);
    }
    if (world > 2) {
      EXPECT_GT(matchings.size(), 1u);
    }
  }
  // Another seed, another sequence.
  std::vector<int> a, b;
  int differ = 0;
  for (int k = 0; k < 20; ++k) {
    NoLoco::pairing(1, k, 8, a);
    NoLoco::pairing(2, k, 8, b);
    differ += a != b;
  }
  EXPECT_GT(differ, 10);
}

// Per rank: parameters, anchors and momenta that differ, then one sync.
struct Replica {
  std::vector<float> theta, phi, delta;
};

Replica replica(int rank, std::size_t n) {
  Replica x;
  for (std::size_t i = 0; i < n; ++i) {
    x.phi.push_back(value(rank, i, 1));
    x.theta.push_back(x.phi.back() + 0.3f * value(rank, i, 2));
    x.delta.push_back(0.1f * value(rank, i, 3));
  }
  return x;
}

TEST(NoLoco, TheMeanAnchorMovesByTheMeanPseudoGradientAndMomentum) {
  constexpr int kRanks = 4;
  const NoLocoOptions o{1, 0.7, 0.5, 0.9, 5, 0};
  std::vector<Replica> before(kRanks), after(kRanks);
  run_threads(kRanks, [&](Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    ParamStore s = small_store();
    NoLoco sync(o);
    sync.bind(s, comm);  // replicas that differ (start() would broadcast rank 0's)
    before[r] = replica(comm.rank(), s.size());
    std::copy(before[r].theta.begin(), before[r].theta.end(), s.params().begin());
    std::span<float> phi = find_state(sync, "noloco.anchor"), delta = find_state(sync, "noloco.momentum");
    std::copy(before[r].phi.begin(), before[r].phi.end(), phi.begin());
    std::copy(before[r].delta.begin(), before[r].delta.end(), delta.begin());
    EXPECT_TRUE(sync.after_update(0));
    after[r].theta.assign(s.params().begin(), s.params().end());
    after[r].phi.assign(phi.begin(), phi.end());
    EXPECT_EQ(after[r].theta, after[r].phi);  // every replica restarts from its anchor
  });
  for (std::size_t i = 0; i < kSmallStoreSize; ++i) {
    double was = 0, now = 0, momentum = 0, pseudo = 0;
    for (const Replica& x : before) {
      was += x.phi[i] / double{kRanks};
      momentum += x.delta[i] / double{kRanks};
      pseudo += (double{x.theta[i]} - x.phi[i]) / kRanks;
    }
    for (const Replica& x : after) now += x.phi[i] / double{kRanks};
    EXPECT_NEAR(now, was + o.momentum * momentum + o.outer_lr * pseudo, 1e-5) << i;
  }
}

// The rule in double: `syncs` syncs of period 2 over ranks whose inner "steps" add value(rank, i,
// step) / 50 to each parameter, from anchors equal at start.
void expect_the_rule(int world, int syncs) {
  SCOPED_TRACE(::testing::Message() << "world " << world);
  const NoLocoOptions o{2, 0.7, 0.5, 0.6, 9, 0};
  const std::int64_t steps = 2 * syncs;
  std::vector<std::vector<std::vector<float>>> got(static_cast<std::size_t>(world));  // [rank][step]
  run_threads(world, [&](Communicator& comm) {
    ParamStore s = small_store();
    for (std::size_t i = 0; i < s.size(); ++i) s.params()[i] = value(0, i, 0);
    NoLoco sync(o);
    sync.start(s, comm);
    for (std::int64_t step = 0; step < steps; ++step) {
      for (std::size_t i = 0; i < s.size(); ++i) s.params()[i] += value(comm.rank(), i, step) / 50;
      EXPECT_EQ(sync.after_update(step), step % 2 == 1);
      got[static_cast<std::size_t>(comm.rank())].emplace_back(s.params().begin(), s.params().end());
    }
  });
  const std::size_t n = kSmallStoreSize;
  std::vector<std::vector<double>> theta(static_cast<std::size_t>(world)), phi, delta;
  for (auto& t : theta)
    for (std::size_t i = 0; i < n; ++i) t.push_back(value(0, i, 0));
  phi = theta;
  delta.assign(static_cast<std::size_t>(world), std::vector<double>(n, 0.0));
  std::vector<int> perm;
  int sat_out = 0;
  for (std::int64_t step = 0; step < steps; ++step) {
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < n; ++i) theta[static_cast<std::size_t>(r)][i] += value(r, i, step) / 50.0;
    if (step % 2 == 1) {
      auto new_phi = phi;
      for (int r = 0; r < world; ++r) {
        const int p = NoLoco::peer(o.seed, step / 2, world, r, perm);
        sat_out += p == r;
        const auto a = static_cast<std::size_t>(r), b = static_cast<std::size_t>(p);
        for (std::size_t i = 0; i < n; ++i) {
          const double phi_mean = (phi[a][i] + phi[b][i]) / 2;
          const double d_mean = ((theta[a][i] - phi[a][i]) + (theta[b][i] - phi[b][i])) / 2;
          delta[a][i] = o.momentum * delta[a][i] + o.outer_lr * d_mean + o.pull * (phi_mean - phi[a][i]);
          new_phi[a][i] = phi[a][i] + delta[a][i];
        }
      }
      phi = new_phi;
      theta = phi;
    }
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_NEAR(got[static_cast<std::size_t>(r)][static_cast<std::size_t>(step)][i],
                    theta[static_cast<std::size_t>(r)][i], 2e-5)
            << "rank " << r << ", step " << step << ", element " << i;
  }
  EXPECT_EQ(sat_out, world % 2 == 1 ? syncs : 0);
  // The anchors drifted apart (the pairs differ from sync to sync): not one average.
  bool differ = false;
  for (int r = 1; r < world; ++r) differ = differ || got[static_cast<std::size_t>(r)].back() != got[0].back();
  EXPECT_TRUE(differ);
}

TEST(NoLoco, SyncsFollowTheRuleInDouble) {
  expect_the_rule(4, 6);
  expect_the_rule(3, 6);  // one rank sits out of every sync
}

TEST(NoLoco, TwoModelSizedVectorsPerRankPerSyncAndNoneSittingOut) {
  for (const int world : {2, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "world " << world);
    std::vector<std::vector<std::uint64_t>> sent(static_cast<std::size_t>(world)), recv = sent;
    run_threads(world, [&](Communicator& comm) {
      ParamStore s = small_store();
      NoLoco sync({2, 0.7, 0.5, 0.7, 3, 0});
      sync.start(s, comm);
      for (std::int64_t step = 0; step < 8; ++step) {
        const ByteCounters b0 = comm.bytes();
        sync.after_update(step);
        const ByteCounters d = comm.bytes() - b0;
        sent[static_cast<std::size_t>(comm.rank())].push_back(d.sent);
        recv[static_cast<std::size_t>(comm.rank())].push_back(d.recv);
      }
      EXPECT_EQ(sync.reducer_stats().compression_ratio(), sync.reducer_stats().calls ? 0.5 : 1.0);
    });
    std::vector<int> perm;
    for (std::int64_t step = 0; step < 8; ++step)
      for (int r = 0; r < world; ++r) {
        const bool alone = NoLoco::peer(3, step / 2, world, r, perm) == r;
        const std::uint64_t want = step % 2 == 1 && !alone ? 2 * kSmallStoreSize * sizeof(float) : 0;
        EXPECT_EQ(sent[static_cast<std::size_t>(r)][static_cast<std::size_t>(step)], want) << "rank " << r << " step " << step;
        EXPECT_EQ(recv[static_cast<std::size_t>(r)][static_cast<std::size_t>(step)], want) << "rank " << r << " step " << step;
      }
  }
}

// Inner training: plain SGD on each rank's own gradient; every step's parameters per rank.
void step_once(SyncStrategy& sync, ParamStore& s, Sgd& opt, int rank, std::int64_t step) {
  for (std::size_t i = 0; i < s.size(); ++i)
    s.grads()[i] = s.params()[i] * (1.0f + 0.1f * static_cast<float>(rank)) - value(rank, i, step);
  sync.after_backward(step);
  opt.step(s, 0.1);
  sync.after_update(step);
}

NoLocoOptions resume_options() { return {3, 0.7, 0.5, 0.6, 21, 0}; }

TEST(NoLoco, ResumingMidPeriodContinuesBitForBit) {
  constexpr int kWorld = 3, kSteps = 14, kCut = 7;  // syncs after 2, 5, 8, 11; the cut after step 6
  std::vector<std::vector<std::vector<float>>> straight(kWorld);
  run_threads(kWorld, [&](Communicator& comm) {
    ParamStore s = small_store();
    for (std::size_t i = 0; i < s.size(); ++i) s.params()[i] = value(0, i, 0);
    Sgd opt({});
    NoLoco sync(resume_options());
    sync.start(s, comm);
    for (std::int64_t step = 0; step < kSteps; ++step) {
      step_once(sync, s, opt, comm.rank(), step);
      straight[static_cast<std::size_t>(comm.rank())].emplace_back(s.params().begin(), s.params().end());
    }
  });
  std::set<std::string> names;
  std::mutex mu;
  run_threads(kWorld, [&](Communicator& comm) {
    ParamStore s = small_store();
    for (std::size_t i = 0; i < s.size(); ++i) s.params()[i] = value(0, i, 0);
    Sgd opt({});
    std::vector<std::vector<float>> saved;
    {
      NoLoco sync(resume_options());
      sync.start(s, comm);
      for (std::int64_t step = 0; step < kCut; ++step) step_once(sync, s, opt, comm.rank(), step);
      std::lock_guard lock(mu);
      for (const auto& t : sync.state()) {
        saved.emplace_back(t.data.begin(), t.data.end());
        names.insert(t.name);
      }
    }
    const std::vector<float> mine(s.params().begin(), s.params().end());
    NoLoco sync(resume_options());
    sync.start(s, comm, kCut);
    std::copy(mine.begin(), mine.end(), s.params().begin());
    const auto st = sync.state();
    ASSERT_EQ(st.size(), saved.size());
    for (std::size_t i = 0; i < st.size(); ++i) {
      ASSERT_EQ(st[i].data.size(), saved[i].size());
      std::copy(saved[i].begin(), saved[i].end(), st[i].data.begin());
    }
    for (std::int64_t step = kCut; step < kSteps; ++step) {
      step_once(sync, s, opt, comm.rank(), step);
      EXPECT_TRUE(same_bits(s.params(), straight[static_cast<std::size_t>(comm.rank())][static_cast<std::size_t>(step)]))
          << "rank " << comm.rank() << ", step " << step;
    }
  });
  EXPECT_EQ(names, (std::set<std::string>{"noloco.anchor", "noloco.momentum"}));
  // The replicas differ at the end (no sync makes them agree).
  EXPECT_NE(straight[0].back(), straight[1].back());
}

// The threads communicator sizes each link's buffers on its first message of a size: every link is
// used once first (a rank meets a new peer at later syncs), so what is counted is the strategy's.
TEST(NoLoco, NoAllocationInTheStepAfterTheFirstSync) {
  if (!new_counter::in_use()) GTEST_SKIP() << "another operator new replacement is linked in";
  std::vector<long> news(3, -1);
  run_threads(3, [&](Communicator& comm) {
    ParamStore s = small_store();
    NoLoco sync({2, 0.7, 0.5, 0.7, 4, 0});
    Sgd opt({});
    sync.start(s, comm);
    std::vector<float> out(2 * s.size()), in(2 * s.size());
    for (int shift = 1; shift < comm.size(); ++shift)
      comm.sendrecv(out.data(), out.size() * sizeof(float), (comm.rank() + shift) % comm.size(), in.data(),
                    in.size() * sizeof(float), (comm.rank() + comm.size() - shift) % comm.size());
    for (std::int64_t step = 0; step < 2; ++step) step_once(sync, s, opt, comm.rank(), step);  // a sync at 1
    news[static_cast<std::size_t>(comm.rank())] = new_counter::during([&] {
      for (std::int64_t step = 2; step < 12; ++step) step_once(sync, s, opt, comm.rank(), step);  // 5 syncs
    });
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(news[static_cast<std::size_t>(r)], 0) << "rank " << r;
}

// In a schedule of strategies: finish() leaves identical replicas (their average), begin() takes
// the parameters as the anchor with zero momentum.
TEST(NoLoco, FinishAveragesTheReplicasAndBeginReanchors) {
  constexpr int kWorld = 3;
  std::vector<std::vector<float>> before(kWorld), last(kWorld);
  run_threads(kWorld, [&](Communicator& comm) {
    ParamStore s = small_store();
    for (std::size_t i = 0; i < s.size(); ++i) s.params()[i] = value(0, i, 0);
    NoLoco sync({2, 0.7, 0.5, 0.7, 8, 0});
    Sgd opt({});
    sync.start(s, comm);
    for (std::int64_t step = 0; step < 5; ++step) step_once(sync, s, opt, comm.rank(), step);
    const auto r = static_cast<std::size_t>(comm.rank());
    before[r].assign(s.params().begin(), s.params().end());
    sync.finish(4);
    last[r].assign(s.params().begin(), s.params().end());
    sync.begin(5);
    EXPECT_TRUE(same_bits(find_state(sync, "noloco.anchor"), last[r]));
    for (const float m : find_state(sync, "noloco.momentum")) ASSERT_EQ(m, 0.0f);
  });
  EXPECT_NE(before[0], before[1]);
  for (int r = 1; r < kWorld; ++r) EXPECT_TRUE(same_bits(last[r], last[0])) << "rank " << r;
  for (std::size_t i = 0; i < kSmallStoreSize; ++i)
    EXPECT_NEAR(last[0][i], (before[0][i] + before[1][i] + before[2][i]) / 3.0f, 1e-6) << "element " << i;
}

TEST(NoLoco, ScheduleDescriptionAndBadOptions) {
  NoLoco a({50, 0.7, 0.5, 0.7, 0, 0});
  EXPECT_EQ(a.describe(), "NoLoCo (every 50 steps, pairwise averaging with a random peer, outer heavy-ball lr 0.7 "
                          "momentum 0.5 pull 0.7; no gradient reduction)");
  EXPECT_FALSE(a.syncs(0));
  EXPECT_TRUE(a.syncs(49));
  EXPECT_TRUE(a.syncs(99));
  EXPECT_FALSE(a.replicas_agree_after(49));
  EXPECT_FALSE(a.reduces_gradients(0));
  NoLoco phase({4, 0.7, 0.5, 0.7, 0, 10});  // a phase from step 10: syncs after 13, 17, ...
  EXPECT_FALSE(phase.syncs(3));
  EXPECT_FALSE(phase.syncs(11));
  EXPECT_TRUE(phase.syncs(13));
  EXPECT_TRUE(phase.syncs(17));
  EXPECT_THROW(NoLoco({0, 0.7, 0.5, 0.7, 0, 0}), Error);
  EXPECT_THROW(NoLoco({5, 0.0, 0.5, 0.7, 0, 0}), Error);
  EXPECT_THROW(NoLoco({5, 0.7, 1.0, 0.7, 0, 0}), Error);
  EXPECT_THROW(NoLoco({5, 0.7, 0.5, -0.1, 0, 0}), Error);
}

}  // namespace
}  // namespace laconic
