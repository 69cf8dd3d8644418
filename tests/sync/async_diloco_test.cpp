// Asynchronous DiLoCo (framework/sync/async_diloco.h): with equal speeds and the buffered outer
// step it is DiLoCo bit for bit, and with Delayed Nesterov DiLoCo up to rounding; with replicas of
// different speeds (DyLU or not, momentum activation or not) it follows the paper's per-arrival
// rule written out in double over an independent event loop; a slower replica computes on its
// share of the steps only; equal speeds cost DiLoCo's bytes; measured speeds come from the first
// round's times; a run resumed mid-round is the uninterrupted one bit for bit; the last step
// leaves every replica with the server's parameters; bad options are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "compression/reducer.h"
#include "core/check.h"
#include "framework/sync/async_diloco.h"
#include "framework/sync/periodic.h"
#include "tests/sync/small_store.h"

namespace laconic {
namespace {

constexpr float kLr = 0.1f;

// Rank r's quadratic: its gradient at step s pulls toward a target of its own that drifts.
double target(int rank, std::size_t i, std::int64_t step) {
  return std::sin(0.37 * static_cast<double>(i) + 1.3 * rank) + 0.05 * std::cos(0.7 * static_cast<double>(step) + rank);
}

void init(ParamStore& s) {
  for (std::size_t i = 0; i < s.size(); ++i) s.params()[i] = 0.3f * std::cos(0.11f * static_cast<float>(i));
}

// One tick of the step loop: a local SGD step where the strategy says this rank computes.
void tick(SyncStrategy& sync, ParamStore& s, int rank, std::int64_t step) {
  if (sync.computes(step)) {
    const std::span<float> p = s.params();
    for (std::size_t i = 0; i < p.size(); ++i)
      p[i] -= kLr * (p[i] - static_cast<float>(target(rank, i, step)));
  }
  sync.after_update(step);
}

bool same_bits(std::span<const float> a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), b.size() * sizeof(float)) == 0;
}

AsyncDilocoOptions options(std::int64_t period, bool dn) {
  AsyncDilocoOptions o;
  o.period = period;
  o.delayed_nesterov = dn;
  return o;
}

// Every rank's parameters after every tick.
using History = std::vector<std::vector<std::vector<float>>>;

History run_async(int world, std::int64_t steps, const AsyncDilocoOptions& o) {
  History h(static_cast<std::size_t>(world));
  run_threads(world, [&](Communicator& comm) {
    ParamStore s = small_store();
    init(s);
    AsyncDiloco sync(o);
    sync.start(s, comm);
    for (std::int64_t step = 0; step < steps; ++step) {
      tick(sync, s, comm.rank(), step);
      h[static_cast<std::size_t>(comm.rank())].emplace_back(s.params().begin(), s.params().end());
    }
  });
  return h;
}

History run_diloco(int world, std::int64_t steps, std::int64_t period) {
  History h(static_cast<std::size_t>(world));
  run_threads(world, [&](Communicator& comm) {
    ParamStore s = small_store();
    init(s);
    PeriodicAveraging sync(diloco_options(period, 0.7, 0.9, true, 1.0), std::make_unique<DenseReducer>());
    sync.start(s, comm);
    for (std::int64_t step = 0; step < steps; ++step) {
      tick(sync, s, comm.rank(), step);
      h[static_cast<std::size_t>(comm.rank())].emplace_back(s.params().begin(), s.params().end());
    }
  });
  return h;
}

TEST(AsyncDiloco, EqualSpeedsBufferedIsDilocoBitForBit) {
  for (const int world : {1, 2, 4}) {
    SCOPED_TRACE(::testing::Message() << "world " << world);
    const History a = run_async(world, 13, options(3, /*dn=*/false));
    const History d = run_diloco(world, 13, 3);
    for (int r = 0; r < world; ++r)
      for (std::size_t t = 0; t < a[0].size(); ++t)
        ASSERT_TRUE(same_bits(a[static_cast<std::size_t>(r)][t], d[static_cast<std::size_t>(r)][t]))
            << "rank " << r << ", step " << t;
  }
}

// With c = 0 a window of N arrivals is one Nesterov step on their mean: DiLoCo, up to the order
// the same sums are rounded in.
TEST(AsyncDiloco, EqualSpeedsWithDelayedNesterovIsDilocoUpToRounding) {
  const History a = run_async(4, 13, options(3, /*dn=*/true));
  const History d = run_diloco(4, 13, 3);
  for (std::size_t t = 0; t < a[0].size(); ++t)
    for (std::size_t i = 0; i < kSmallStoreSize; ++i)
      ASSERT_NEAR(a[1][t][i], d[1][t][i], 1e-5) << "step " << t << ", element " << i;
}

// The paper's rule, per arrival, in double, over an event loop of its own: replica r with slowdown
// f_r finishes a local step at times k f_r; after H_r of them it arrives; arrivals are applied one
// at a time in order of time (then rank); a tick's arrivals up to a window's boundary restart from
// the server's parameters together, after the last of them (async_diloco.h).
struct Reference {
  int world;
  std::vector<double> slowdown;
  std::int64_t period;
  bool dylu;
  double eps = 0.7, beta = 0.9, c = 0;
  std::int64_t window = 0;

  std::vector<std::vector<double>> run(std::int64_t steps, std::int64_t last_step) const {
    const std::size_t n = kSmallStoreSize;
    const auto w = static_cast<std::size_t>(world);
    const std::int64_t N = window > 0 ? window : world;
    std::vector<double> theta(n), m(n, 0), D(n, 0);
    for (std::size_t i = 0; i < n; ++i) theta[i] = 0.3f * std::cos(0.11f * static_cast<float>(i));
    std::vector<std::vector<double>> x(w, theta), anchor(w, theta);
    std::vector<std::int64_t> done(w, 0), H(w, period);
    const double fastest = *std::min_element(slowdown.begin(), slowdown.end());
    if (dylu)
      for (std::size_t r = 0; r < w; ++r)
        H[r] = std::max<std::int64_t>(1, period * std::llround(100 * fastest) / std::llround(100 * slowdown[r]));
    std::int64_t t = 0;
    for (std::int64_t u = 0; u < steps; ++u) {
      // Local steps finishing in (u, u + 1] (time in ticks of the fastest replica).
      struct Arr { double when; int r; };
      std::vector<Arr> arr;
      for (std::size_t r = 0; r < w; ++r) {
        const double f = slowdown[r] / fastest;
        const auto l = static_cast<std::int64_t>(std::floor((static_cast<double>(u) + 1) / f + 1e-9));
        const bool computes = l > done[r];
        if (computes) {
          for (std::size_t i = 0; i < n; ++i)
            x[r][i] -= static_cast<double>(kLr) * (x[r][i] - target(static_cast<int>(r), i, u));
          done[r] = l;
        }
        // After its H_r-th step since the last arrival; at the last step, every replica.
        if ((computes && l % H[r] == 0) || u == last_step)
          arr.push_back({static_cast<double>(done[r]) * f, static_cast<int>(r)});
      }
      std::sort(arr.begin(), arr.end(), [](const Arr& a, const Arr& b) { return a.when != b.when ? a.when < b.when : a.r < b.r; });
      std::vector<int> waiting;  // arrived, restarting at the boundary or the tick's end
      for (const Arr& a : arr) {
        const auto r = static_cast<std::size_t>(a.r);
        std::vector<double> g(n);
        for (std::size_t i = 0; i < n; ++i) g[i] = anchor[r][i] - x[r][i];
        const bool boundary = (t + 1) % N == 0;
        for (std::size_t i = 0; i < n; ++i) {
          D[i] += g[i] / static_cast<double>(N);
          if (boundary) {
            m[i] = beta * m[i] + D[i];
            theta[i] -= eps * ((1 - c * static_cast<double>(N) + c) * beta * m[i] + g[i] / static_cast<double>(N));
          } else {
            theta[i] -= eps * (c * beta * m[i] + g[i] / static_cast<double>(N));
          }
        }
        if (boundary) std::fill(D.begin(), D.end(), 0.0);
        ++t;
        waiting.push_back(a.r);
        if (boundary || &a == &arr.back()) {
          for (const int q : waiting) {
            x[static_cast<std::size_t>(q)] = theta;
            anchor[static_cast<std::size_t>(q)] = theta;
          }
          waiting.clear();
        }
      }
    }
    return x;
  }
};

void expect_reference(const Reference& ref, std::int64_t steps, std::int64_t last_step) {
  SCOPED_TRACE(::testing::Message() << "slowdowns " << ref.slowdown[0] << " " << ref.slowdown[1] << " " << ref.slowdown[2] << (ref.dylu ? " DyLU" : "") << ", c " << ref.c << ", window " << ref.window << ", " << steps << " steps");
  AsyncDilocoOptions o = options(ref.period, true);
  o.slowdown = ref.slowdown;
  o.dylu = ref.dylu;
  o.activation = ref.c;
  o.window = ref.window;
  o.outer_lr = ref.eps;
  o.momentum = ref.beta;
  o.last_step = last_step;
  const History a = run_async(ref.world, steps, o);
  const std::vector<std::vector<double>> want = ref.run(steps, last_step);
  for (int r = 0; r < ref.world; ++r)
    for (std::size_t i = 0; i < kSmallStoreSize; ++i)
      ASSERT_NEAR(a[static_cast<std::size_t>(r)].back()[i], want[static_cast<std::size_t>(r)][i], 2e-5)
          << "rank " << r << ", element " << i;
}

TEST(AsyncDiloco, FollowsThePerArrivalRuleInDouble) {
  // A replica 2x and one 1.5x slower; windows of 3 and of 2 arrivals; activation 0 and 0.2.
  expect_reference({3, {1.0, 2.0, 1.5}, 4, false}, 41, -1);
  expect_reference({3, {1.0, 2.0, 1.5}, 4, false, 0.7, 0.9, 0.2, 0}, 41, -1);
  expect_reference({3, {2.0, 1.0, 1.5}, 4, false, 0.5, 0.8, 0.0, 2}, 41, -1);
  // DyLU: H_r = floor(4 * 1 / f_r): 4, 2 and 2 local steps.
  expect_reference({3, {1.0, 2.0, 1.5}, 4, true}, 41, -1);
  // The last step: every replica arrives with what it did.
  expect_reference({3, {1.0, 2.0, 1.5}, 4, false}, 23, 22);
}

TEST(AsyncDiloco, ASlowerReplicaComputesOnItsShareOfTheSteps) {
  AsyncDilocoOptions o = options(4, true);
  o.slowdown = {1.0, 2.0, 2.5};
  std::vector<std::vector<int>> computed(3);
  std::vector<std::vector<int>> arrived(3);
  run_threads(3, [&](Communicator& comm) {
    ParamStore s = small_store();
    init(s);
    AsyncDiloco sync(o);
    sync.start(s, comm);
    for (std::int64_t step = 0; step < 40; ++step) {
      computed[static_cast<std::size_t>(comm.rank())].push_back(sync.computes(step) ? 1 : 0);
      if (comm.rank() == 0)
        for (int r = 0; r < 3; ++r)
          if (sync.arrives(r, step)) arrived[static_cast<std::size_t>(r)].push_back(static_cast<int>(step));
      tick(sync, s, comm.rank(), step);
    }
  });
  auto count = [](const std::vector<int>& v) { return std::count(v.begin(), v.end(), 1); };
  EXPECT_EQ(count(computed[0]), 40);
  EXPECT_EQ(count(computed[1]), 20);
  EXPECT_EQ(count(computed[2]), 16);
  EXPECT_EQ(computed[1][0], 0);
  EXPECT_EQ(computed[1][1], 1);
  EXPECT_EQ(arrived[0], (std::vector<int>{3, 7, 11, 15, 19, 23, 27, 31, 35, 39}));
  EXPECT_EQ(arrived[1], (std::vector<int>{7, 15, 23, 31, 39}));
  EXPECT_EQ(arrived[2], (std::vector<int>{9, 19, 29, 39}));  // its 4th step ends at 10 ticks
}

TEST(AsyncDiloco, EqualSpeedsCostDilocosBytes) {
  ByteCounters async_bytes, diloco_bytes;
  std::mutex mu;
  for (const bool async : {true, false}) {
    run_threads(4, [&](Communicator& comm) {
      ParamStore s = small_store();
      init(s);
      std::unique_ptr<SyncStrategy> sync;
      if (async) {
        sync = std::make_unique<AsyncDiloco>(options(3, true));
      } else {
        sync = std::make_unique<PeriodicAveraging>(diloco_options(3, 0.7, 0.9, true, 1.0), std::make_unique<DenseReducer>());
      }
      sync->start(s, comm);
      const ByteCounters before = comm.bytes();
      for (std::int64_t step = 0; step < 12; ++step) tick(*sync, s, comm.rank(), step);
      if (comm.rank() == 1) {
        std::lock_guard lock(mu);
        ByteCounters& b = async ? async_bytes : diloco_bytes;
        b = comm.bytes() - before;
      }
    });
  }
  EXPECT_GT(async_bytes.sent, 0u);
  EXPECT_EQ(async_bytes.sent, diloco_bytes.sent);
  EXPECT_EQ(async_bytes.recv, diloco_bytes.recv);
  EXPECT_EQ(async_bytes.messages_sent, diloco_bytes.messages_sent);
}

TEST(AsyncDiloco, MeasuredSpeedsComeFromTheFirstRound) {
  AsyncDilocoOptions o = options(4, true);
  o.speeds = ReplicaSpeeds::measured;
  std::vector<std::vector<float>> q(3);
  std::vector<int> computed(3, 0);
  run_threads(3, [&](Communicator& comm) {
    ParamStore s = small_store();
    init(s);
    AsyncDiloco sync(o);
    sync.start(s, comm);
    // Rank 2 takes 2x rank 0's time per step, rank 1 1.27x (rounded to 1.3); one outlier each.
    const double per[] = {0.010, 0.0127, 0.020};
    for (std::int64_t step = 0; step < 24; ++step) {
      EXPECT_TRUE(step >= 4 || sync.computes(step));  // the timed round
      computed[static_cast<std::size_t>(comm.rank())] += sync.computes(step);
      sync.step_computed(step, step == 1 ? 1.0 : per[comm.rank()]);
      tick(sync, s, comm.rank(), step);
    }
    q[static_cast<std::size_t>(comm.rank())].assign(sync.speeds().begin(), sync.speeds().end());
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(q[static_cast<std::size_t>(r)], (std::vector<float>{100, 130, 200}));
  EXPECT_EQ(computed[0], 24);
  EXPECT_EQ(computed[1], 4 + 20 * 100 / 130);
  EXPECT_EQ(computed[2], 4 + 10);
}

TEST(AsyncDiloco, ResumingMidRoundContinuesBitForBit) {
  for (const ReplicaSpeeds speeds : {ReplicaSpeeds::network, ReplicaSpeeds::measured}) {
    AsyncDilocoOptions o = options(4, true);
    o.slowdown = {1.0, 2.0, 1.5};
    o.speeds = speeds;
    o.activation = 0.1;
    constexpr std::int64_t kSteps = 30;
    for (const std::int64_t cut : {2, 9, 18}) {
      SCOPED_TRACE(::testing::Message() << "cut " << cut << (speeds == ReplicaSpeeds::measured ? " measured" : ""));
      auto seconds = [](int rank, std::int64_t step) { return 0.01 * (1 + rank) + 1e-4 * static_cast<double>(step % 3); };
      History straight(3);
      run_threads(3, [&](Communicator& comm) {
        ParamStore s = small_store();
        init(s);
        AsyncDiloco sync(o);
        sync.start(s, comm);
        for (std::int64_t step = 0; step < kSteps; ++step) {
          sync.step_computed(step, seconds(comm.rank(), step));
          tick(sync, s, comm.rank(), step);
          straight[static_cast<std::size_t>(comm.rank())].emplace_back(s.params().begin(), s.params().end());
        }
      });
      run_threads(3, [&](Communicator& comm) {
        ParamStore s = small_store();
        init(s);
        std::vector<std::vector<float>> saved;
        {
          AsyncDiloco sync(o);
          sync.start(s, comm);
          for (std::int64_t step = 0; step < cut; ++step) {
            sync.step_computed(step, seconds(comm.rank(), step));
            tick(sync, s, comm.rank(), step);
          }
          for (const auto& t : sync.state()) saved.emplace_back(t.data.begin(), t.data.end());
        }
        const std::vector<float> mine(s.params().begin(), s.params().end());
        AsyncDiloco sync(o);
        sync.start(s, comm, cut);
        std::copy(mine.begin(), mine.end(), s.params().begin());
        const auto st = sync.state();
        ASSERT_EQ(st.size(), saved.size());
        for (std::size_t i = 0; i < st.size(); ++i) std::copy(saved[i].begin(), saved[i].end(), st[i].data.begin());
        for (std::int64_t step = cut; step < kSteps; ++step) {
          sync.step_computed(step, seconds(comm.rank(), step));
          tick(sync, s, comm.rank(), step);
          ASSERT_TRUE(same_bits(s.params(), straight[static_cast<std::size_t>(comm.rank())][static_cast<std::size_t>(step)]))
              << "rank " << comm.rank() << ", step " << step;
        }
      });
    }
  }
}

TEST(AsyncDiloco, TheLastStepLeavesEveryReplicaWithTheServersParameters) {
  AsyncDilocoOptions o = options(4, true);
  o.slowdown = {1.0, 2.0, 1.5};
  o.last_step = 13;
  const History a = run_async(3, 14, o);
  EXPECT_EQ(a[0].back(), a[1].back());
  EXPECT_EQ(a[0].back(), a[2].back());
  EXPECT_NE(a[0][12], a[1][12]);
}

TEST(AsyncDiloco, DescriptionAndBadOptions) {
  AsyncDilocoOptions o = options(8, true);
  o.dylu = true;
  const std::string d = AsyncDiloco(o).describe();
  EXPECT_NE(d.find("Delayed Nesterov"), std::string::npos) << d;
  EXPECT_NE(d.find("DyLU"), std::string::npos) << d;
  o.period = 0;
  EXPECT_THROW(AsyncDiloco{o}, Error);
  o = options(8, true);
  o.activation = 0.5;  // above 1/N with 3 replicas
  run_threads(3, [&](Communicator& comm) {
    ParamStore s = small_store();
    AsyncDiloco sync(o);
    EXPECT_THROW(sync.start(s, comm), Error);
  });
}

}  // namespace
}  // namespace laconic
