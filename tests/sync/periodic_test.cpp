// PeriodicAveraging (local SGD and DiLoCo): H = 1 local SGD is data parallel, DiLoCo with outer
// lr 1 and no momentum is local SGD bit for bit, 1/H of the bytes, replicas identical exactly at
// syncs, the outer Nesterov step against numbers computed by hand, the post-local SGD warm-up,
// lossy reducers, state and resuming at a sync, and no allocation in the step. SparseLoCo: a small
// tensor beside a large one moves (its chunks are its own), and the run calls itself SparseLoCo.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <vector>

#include "collectives/nominal_bytes.h"
#include "collectives/threads/threads_communicator.h"
#include "compression/reducer.h"
#include "compression/sparse.h"
#include "compression/topk.h"
#include "core/check.h"
#include "framework/sync/periodic.h"
#include "framework/sync/sparta.h"
#include "framework/sync/sync_strategy.h"
#include "optimizers/sgd.h"
#include "tests/support/new_counter.h"
#include "tests/sync/small_store.h"

namespace laconic {
namespace {

constexpr std::size_t kSize = kSmallStoreSize;

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// Rank-dependent starting points (start() must replace them with rank 0's).
void init_params(ParamStore& s, int rank) {
  for (std::size_t i = 0; i < s.size(); ++i)
    s.params()[i] = 0.5f * std::sin(0.7f * static_cast<float>(i) + 3.0f * static_cast<float>(rank));
}

// The gradient of rank r's quadratic loss 1/2 w'A_r w - b_r'w at step t: A_r has a rank-dependent
// diagonal in [1, 1.75] and a small coupling to the next coordinate, b_r moves with the step (as a
// fresh mini-batch would). Steps depend on the parameters, so local trajectories drift apart.
void quadratic_grads(ParamStore& s, int rank, std::int64_t step) {
  const std::size_t n = s.size();
  const float* w = s.params().data();
  float* g = s.grads().data();
  for (std::size_t i = 0; i < n; ++i) {
    const float a = 1.0f + 0.25f * static_cast<float>((i + static_cast<std::size_t>(rank)) % 4);
    const float b =
        std::sin(0.3f * static_cast<float>(i) + static_cast<float>(rank) + 0.1f * static_cast<float>(step));
    g[i] = a * w[i] + 0.05f * w[(i + 1) % n] - b;
  }
}

std::span<float> find_state(SyncStrategy& s, const std::string& name) {
  for (const StateTensor& t : s.state())
    if (t.name == name) return t.data;
  return {};
}

// One rank's run: what it held after each step.
struct Trace {
  std::vector<std::vector<float>> params;  // after after_update
  std::vector<std::vector<float>> grads;   // after after_backward (what the optimizer used)
  std::vector<std::vector<float>> anchor;  // "periodic.global" after after_update, if any
  std::vector<bool> changed;               // after_update's answer
  std::vector<std::uint64_t> step_sent;    // bytes sent during each step
  std::uint64_t sent = 0;                  // bytes sent by the steps (after start)
};

using MakeStrategy = std::function<std::unique_ptr<SyncStrategy>()>;

// One training step of the test loop: gradients, the strategy's hooks, inner SGD.
bool step_once(SyncStrategy& sync, ParamStore& s, Optimizer& opt, Communicator& comm, std::int64_t step,
               Trace* trace = nullptr) {
  quadratic_grads(s, comm.rank(), step);
  sync.after_backward(step);
  if (trace) trace->grads.emplace_back(s.grads().begin(), s.grads().end());
  opt.step(s, 0.05);
  return sync.after_update(step);
}

std::vector<Trace> train(int world, int steps, const MakeStrategy& make, SgdOptions inner = {}) {
  std::vector<Trace> out(static_cast<std::size_t>(world));
  run_threads(world, [&](Communicator& comm) {
    Trace& tr = out[static_cast<std::size_t>(comm.rank())];
    ParamStore s = small_store();
    init_params(s, comm.rank());
    const std::unique_ptr<SyncStrategy> sync = make();
    Sgd opt(inner);
    sync->start(s, comm);
    const std::uint64_t sent0 = comm.bytes().sent;
    for (std::int64_t step = 0; step < steps; ++step) {
      const std::uint64_t before = comm.bytes().sent;
      tr.changed.push_back(step_once(*sync, s, opt, comm, step, &tr));
      tr.step_sent.push_back(comm.bytes().sent - before);
      tr.params.emplace_back(s.params().begin(), s.params().end());
      const std::span<float> anchor = find_state(*sync, "periodic.global");
      tr.anchor.emplace_back(anchor.begin(), anchor.end());
    }
    tr.sent = comm.bytes().sent - sent0;
  });
  return out;
}

MakeStrategy periodic(PeriodicOptions o) {
  return [o] { return std::make_unique<PeriodicAveraging>(o, std::make_unique<DenseReducer>()); };
}
MakeStrategy data_parallel(double bucket_mb = 25.0) {
  return [bucket_mb] {
    return std::make_unique<DataParallel>(DataParallelOptions{bucket_mb, false},
                                          std::make_unique<DenseReducer>());
  };
}

// With H = 1 every step ends in the average of the ranks' parameters: theta - lr * g_r averaged
// is theta - lr * mean(g_r), data parallel's step, up to float rounding (the difference of
// parameters is rounded where data parallel rounds the mean gradient).
TEST(PeriodicAveraging, LocalSgdEveryStepIsDataParallel) {
  for (const int world : {2, 3, 4}) {
    SCOPED_TRACE(testing::Message() << "world " << world);
    const int steps = 12;
    const auto local = train(world, steps, periodic(local_sgd_options(1)));
    const auto dp = train(world, steps, data_parallel());
    double worst = 0;
    for (int r = 0; r < world; ++r) {
      for (int t = 0; t < steps; ++t) {
        EXPECT_TRUE(local[r].changed[t]);
        for (std::size_t i = 0; i < kSize; ++i) {
          const double want = dp[r].params[t][i], got = local[r].params[t][i];
          const double rel = std::abs(got - want) / std::max(1.0, std::abs(want));
          worst = std::max(worst, rel);
          ASSERT_LT(rel, 2e-6) << "rank " << r << ", step " << t << ", element " << i;
        }
      }
    }
    std::cout << "world " << world << ": local SGD (H = 1) vs data parallel, max relative diff " << worst
              << "\n";
  }
}

// The factory maps "diloco" with outer lr 1 and no momentum to the same options as "local_sgd":
// one class, one configuration, the same bits.
TEST(PeriodicAveraging, DilocoWithUnitOuterLrAndNoMomentumIsLocalSgd) {
  for (const std::int64_t h : {1, 4}) {
    SCOPED_TRACE(testing::Message() << "H = " << h);
    const auto local = train(3, 12, periodic(local_sgd_options(h)), SgdOptions{0.9, true, 1e-3});
    const auto diloco =
        train(3, 12, periodic(diloco_options(h, 1.0, 0.0, false)), SgdOptions{0.9, true, 1e-3});
    for (int r = 0; r < 3; ++r)
      for (int t = 0; t < 12; ++t) {
        EXPECT_TRUE(same_bits(local[r].params[t], diloco[r].params[t])) << "rank " << r << ", step " << t;
        EXPECT_EQ(local[r].changed[t], (t + 1) % h == 0);
      }
  }
  PeriodicAveraging plain(diloco_options(4, 1.0, 0.0, false), std::make_unique<DenseReducer>());
  EXPECT_EQ(plain.describe().rfind("local SGD (every 4 steps", 0), 0u) << plain.describe();
  PeriodicAveraging diloco(diloco_options(50), std::make_unique<DenseReducer>());
  EXPECT_NE(diloco.describe().find("DiLoCo (every 50 steps, outer SGD lr 0.7 Nesterov 0.9"),
            std::string::npos)
      << diloco.describe();
}

// Per rank, a ring all-reduce of n floats in N chunks sends 2(N-1) chunks of about n/N floats:
// about 2(N-1)/N * 4n bytes, the same bits every call. Data parallel runs it on every step, a
// sync every H steps on the same buckets, so over T = k*H steps: sent(periodic) * H == sent(DP),
// exactly, rank by rank.
TEST(PeriodicAveraging, SendsOneHthOfDataParallelBytes) {
  for (const int world : {2, 3, 4}) {
    for (const std::int64_t h : {1, 4, 5}) {
      SCOPED_TRACE(testing::Message() << "world " << world << ", H = " << h);
      const int steps = static_cast<int>(3 * h);
      PeriodicOptions o = diloco_options(h);
      o.bucket_mb = mib(12);  // two buckets
      const auto per = train(world, steps, periodic(o));
      const auto dp = train(world, steps, data_parallel(mib(12)));
      for (int r = 0; r < world; ++r) {
        EXPECT_GT(per[r].sent, 0u);
        EXPECT_EQ(per[r].sent * static_cast<std::uint64_t>(h), dp[r].sent) << "rank " << r;
        const double ring = 3.0 * 2.0 * (world - 1) / world * kSize * sizeof(float);  // 3 syncs
        EXPECT_NEAR(static_cast<double>(per[r].sent), ring, 3.0 * 2 * 2 * (world - 1) * sizeof(float));
      }
    }
  }
}

// Replicas hold the same bits right after each outer step (and the anchor equals them), and
// drift apart on local steps, whose gradients depend on the rank.
TEST(PeriodicAveraging, ReplicasAreIdenticalExactlyAfterEachSync) {
  for (const PeriodicOptions& o : {local_sgd_options(3), diloco_options(3)}) {
    const int world = 3, steps = 12;
    const auto tr = train(world, steps, periodic(o), SgdOptions{0.9, false, 0.0});
    for (int t = 0; t < steps; ++t) {
      const bool sync = (t + 1) % 3 == 0;
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(tr[r].changed[t], sync) << "step " << t;
        if (sync) {
          EXPECT_TRUE(same_bits(tr[r].params[t], tr[0].params[t])) << "rank " << r << ", step " << t;
          EXPECT_TRUE(same_bits(tr[r].anchor[t], tr[r].params[t])) << "rank " << r << ", step " << t;
        } else if (r > 0) {
          EXPECT_FALSE(same_bits(tr[r].params[t], tr[0].params[t])) << "rank " << r << ", step " << t;
        }
        // The anchor only moves at syncs, identically on every rank.
        EXPECT_TRUE(same_bits(tr[r].anchor[t], tr[0].anchor[t])) << "rank " << r << ", step " << t;
      }
    }
  }
}

// Two outer Nesterov steps (lr 0.7, mu 0.9) on 2 ranks with H = 2, the replicas' parameters set by
// hand at each sync (the local steps in between do not matter: Delta only reads the parameters at
// the sync). theta0 = (1, -2, 0.5), as tensors "a" (2) and "b" (1), one bucket each.
//   sync 1: replicas (0.5, -1, 0.5) and (0.7, -2.4, 1.5), mean (0.6, -1.7, 1)
//     Delta1 = theta0 - mean = (0.4, -0.3, -0.5);  b1 = Delta1;  d1 = Delta1 + 0.9 b1 = 1.9 Delta1
//     theta1 = theta0 - 0.7 d1 = (0.468, -1.601, 1.165)
//   sync 2: replicas (0.4, -1.5, 1) and (0.6, -1.7, 1.2), mean (0.5, -1.6, 1.1)
//     Delta2 = theta1 - mean = (-0.032, -0.001, 0.065)
//     b2 = 0.9 b1 + Delta2 = (0.328, -0.271, -0.385);  d2 = Delta2 + 0.9 b2 = (0.2632, -0.2449, -0.2815)
//     theta2 = theta1 - 0.7 d2 = (0.28376, -1.42957, 1.36205)
TEST(PeriodicAveraging, OuterNesterovStepMatchesHandComputedReference) {
  const float theta0[3] = {1.0f, -2.0f, 0.5f};
  const float sync1[2][3] = {{0.5f, -1.0f, 0.5f}, {0.7f, -2.4f, 1.5f}};
  const float sync2[2][3] = {{0.4f, -1.5f, 1.0f}, {0.6f, -1.7f, 1.2f}};
  const double theta1[3] = {0.468, -1.601, 1.165};
  const double theta2[3] = {0.28376, -1.42957, 1.36205};
  const double b2[3] = {0.328, -0.271, -0.385};
  run_threads(2, [&](Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    ParamStore s;
    s.add("a", {2}, ParamGroup::decay);
    s.add("b", {1}, ParamGroup::no_decay);
    s.finalize();
    for (std::size_t i = 0; i < 3; ++i) s.params()[i] = r == 0 ? theta0[i] : 42.0f;  // start() broadcasts
    PeriodicAveraging sync(diloco_options(2, 0.7, 0.9, true, mib(1)), std::make_unique<DenseReducer>());
    sync.start(s, comm);
    ASSERT_EQ(sync.buckets().size(), 2u);
    const auto set = [&](const float (&p)[2][3]) { std::copy(p[r], p[r] + 3, s.params().begin()); };
    set(sync2);  // a local step: nothing happens
    EXPECT_FALSE(sync.after_update(0));
    EXPECT_EQ(s.params()[0], sync2[r][0]);
    set(sync1);
    EXPECT_TRUE(sync.after_update(1));
    for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(s.params()[i], theta1[i], 1e-6) << i;
    EXPECT_FALSE(sync.after_update(2));
    set(sync2);
    EXPECT_TRUE(sync.after_update(3));
    const std::span<float> b = find_state(sync, "periodic.outer.momentum");
    ASSERT_EQ(b.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(s.params()[i], theta2[i], 2e-6) << i;
      EXPECT_NEAR(b[i], b2[i], 1e-6) << i;
    }
  });
}

// The outer Adam (Douillard et al. 2023's ablation): torch's Adam on the averaged pseudo-gradient,
// beta1 = outer_momentum, no decay. Its first step moves every coordinate by lr against the sign
// of Delta; the second is Adam's closed form, computed here in double.
TEST(PeriodicAveraging, OuterAdamStepMatchesHandComputedReference) {
  const double theta0[3] = {1.0, -2.0, 0.5};
  const float sync1[2][3] = {{0.5f, -1.0f, 0.5f}, {0.7f, -2.4f, 1.5f}};
  const float sync2[2][3] = {{0.4f, -1.5f, 1.0f}, {0.6f, -1.7f, 1.2f}};
  const double lr = 0.1, b1 = 0.9, b2 = 0.999;
  double theta1[3], theta2[3];
  for (std::size_t i = 0; i < 3; ++i) {
    const double g1 = theta0[i] - (sync1[0][i] + sync1[1][i]) / 2.0;
    theta1[i] = theta0[i] - lr * (g1 > 0 ? 1.0 : -1.0);
    const double g2 = theta1[i] - (sync2[0][i] + sync2[1][i]) / 2.0;
    const double m = b1 * (1 - b1) * g1 + (1 - b1) * g2, v = b2 * (1 - b2) * g1 * g1 + (1 - b2) * g2 * g2;
    theta2[i] = theta1[i] - lr * (m / (1 - b1 * b1)) / (std::sqrt(v / (1 - b2 * b2)) + 1e-8);
  }
  run_threads(2, [&](Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    ParamStore s;
    s.add("a", {3}, ParamGroup::decay);
    s.finalize();
    for (std::size_t i = 0; i < 3; ++i) s.params()[i] = static_cast<float>(theta0[i]);
    PeriodicOptions o = diloco_options(1, lr, b1, false);
    o.outer_optimizer = OuterOptimizer::adam;
    PeriodicAveraging sync(o, std::make_unique<DenseReducer>());
    sync.start(s, comm);
    EXPECT_NE(sync.describe().find("outer Adam lr 0.1 betas (0.9, 0.999)"), std::string::npos) << sync.describe();
    std::copy(sync1[r], sync1[r] + 3, s.params().begin());
    EXPECT_TRUE(sync.after_update(0));
    for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(s.params()[i], theta1[i], 1e-6) << i;
    std::copy(sync2[r], sync2[r] + 3, s.params().begin());
    EXPECT_TRUE(sync.after_update(1));
    for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(s.params()[i], theta2[i], 2e-6) << i;
    EXPECT_EQ(find_state(sync, "periodic.outer.exp_avg").size(), 3u);
    EXPECT_EQ(find_state(sync, "periodic.outer.exp_avg_sq").size(), 3u);
  });
  PeriodicOptions nesterov = diloco_options(1);
  nesterov.outer_optimizer = OuterOptimizer::adam;  // nesterov = true: SGD's, refused
  EXPECT_THROW(PeriodicAveraging(nesterov, std::make_unique<DenseReducer>()), std::exception);
}

// Post-local SGD: the first `warmup` steps are data parallel (same averaged gradients, same
// parameters, bit for bit with one bucket), the anchor follows the parameters, then local steps
// begin and the first sync comes H steps later.
TEST(PeriodicAveraging, WarmupIsDataParallelThenLocalSteps) {
  const int world = 3, warmup = 3, steps = 9;
  const std::int64_t h = 2;
  const auto per = train(world, steps, periodic(local_sgd_options(h, warmup)), SgdOptions{0.9, false, 0.0});
  const auto dp = train(world, warmup, data_parallel(), SgdOptions{0.9, false, 0.0});
  for (int r = 0; r < world; ++r) {
    for (int t = 0; t < warmup; ++t) {
      EXPECT_TRUE(same_bits(per[r].grads[t], dp[r].grads[t])) << "rank " << r << ", step " << t;
      EXPECT_TRUE(same_bits(per[r].params[t], dp[r].params[t])) << "rank " << r << ", step " << t;
      EXPECT_TRUE(same_bits(per[r].anchor[t], per[r].params[t])) << "rank " << r << ", step " << t;
      EXPECT_FALSE(per[r].changed[t]);
    }
    for (int t = warmup; t < steps; ++t) {
      const bool sync = (t + 1 - warmup) % h == 0;  // steps 4, 6, 8
      EXPECT_EQ(per[r].changed[t], sync) << "step " << t;
      if (!sync) {
        // Local gradients are not averaged; the anchor stays where the last sync (or the end of
        // the warm-up) left it.
        if (r > 0) {
          EXPECT_FALSE(same_bits(per[r].grads[t], per[0].grads[t])) << "step " << t;
        }
        EXPECT_TRUE(same_bits(per[r].anchor[t], per[r].anchor[t - 1])) << "step " << t;
      } else {
        EXPECT_TRUE(same_bits(per[r].params[t], per[0].params[t])) << "rank " << r << ", step " << t;
      }
    }
  }
}

// Averages densely and records the steps it is handed (unless given nowhere to record them).
class RecordingReducer final : public Reducer {
 public:
  explicit RecordingReducer(std::vector<std::int64_t>* steps) : steps_(steps) {}
  void reduce(std::span<float> data, const BucketLayout& b, std::int64_t step, Communicator& comm) override {
    if (b.id == 0 && steps_) steps_->push_back(step);
    comm.all_reduce(data, ReduceOp::avg);
  }
  std::string describe() const override { return "recording"; }

 private:
  std::vector<std::int64_t>* steps_;
};

// A reducer sees outer steps (syncs done before this one), so its own warm-up counts syncs.
TEST(PeriodicAveraging, ReducersSeeTheOuterStep) {
  std::vector<std::int64_t> seen;
  run_threads(1, [&](Communicator& comm) {
    ParamStore s = small_store();
    PeriodicAveraging sync(local_sgd_options(3, 2), std::make_unique<RecordingReducer>(&seen));
    Sgd opt({});
    sync.start(s, comm);
    for (std::int64_t step = 0; step < 12; ++step) step_once(sync, s, opt, comm, step);  // syncs at 4, 7, 10
  });
  EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1, 2}));
}

// What a composite relies on to tell other ranks what to expect: reduces_gradients(t) and
// averages_params(t) say exactly which steps communicate, known in advance.
TEST(PeriodicAveraging, ScheduleQueriesMatchWhatTheStepsDo) {
  const int world = 3, steps = 12;
  for (const PeriodicOptions& opts : {diloco_options(3), local_sgd_options(3, 2)}) {
    const auto tr = train(world, steps, periodic(opts));
    const PeriodicAveraging p(opts, std::make_unique<DenseReducer>());
    for (int t = 0; t < steps; ++t) {
      EXPECT_EQ(p.reduces_gradients(t), t < opts.warmup_steps) << "step " << t;
      EXPECT_EQ(p.averages_params(t), tr[0].changed[t]) << "step " << t;
      EXPECT_EQ(tr[0].step_sent[t] > 0, p.reduces_gradients(t) || p.averages_params(t)) << "step " << t;
    }
  }
}

// In a schedule of strategies: data parallel runs steps 0..4, this strategy takes over at 5 with
// warmup_steps = 5 (so its periods count from there: syncs at 7, 10) and hands over after 12,
// mid-period, with one more sync. finish() at a sync step does nothing.
TEST(PeriodicAveraging, BeginAndFinishHandOverIdenticalReplicas) {
  const int world = 3;
  std::vector<std::int64_t> outer_steps;
  std::vector<std::vector<float>> last(world);
  run_threads(world, [&](Communicator& comm) {
    ParamStore s = small_store();
    init_params(s, comm.rank());
    DataParallel dp({25.0, false}, std::make_unique<DenseReducer>());
    PeriodicOptions o = diloco_options(3);
    o.warmup_steps = 5;
    PeriodicAveraging per(o, std::make_unique<RecordingReducer>(comm.rank() == 0 ? &outer_steps : nullptr));
    Sgd opt({});
    dp.start(s, comm);
    per.start(s, comm);
    for (std::int64_t step = 0; step < 5; ++step) step_once(dp, s, opt, comm, step);
    per.begin(5);
    EXPECT_TRUE(same_bits(find_state(per, "periodic.global"), s.params()));
    for (std::int64_t step = 5; step <= 12; ++step) {
      EXPECT_EQ(step_once(per, s, opt, comm, step), step == 7 || step == 10) << "step " << step;
      if (step == 10) {
        const std::vector<float> before(s.params().begin(), s.params().end());
        const std::uint64_t sent = comm.bytes().sent;
        per.finish(10);
        EXPECT_EQ(comm.bytes().sent, sent);
        EXPECT_TRUE(same_bits(before, s.params()));
      }
    }
    per.finish(12);
    EXPECT_TRUE(same_bits(find_state(per, "periodic.global"), s.params()));
    last[static_cast<std::size_t>(comm.rank())].assign(s.params().begin(), s.params().end());
  });
  for (int r = 1; r < world; ++r) EXPECT_TRUE(same_bits(last[r], last[0])) << "rank " << r;
  EXPECT_EQ(outer_steps, (std::vector<std::int64_t>{0, 1, 2}));
}

// Top-k with error feedback at ratio 0.5 on the pseudo-gradients: lossy, but every rank decodes the
// same bits, so replicas still restart identical from each sync.
TEST(PeriodicAveraging, LossyReducerKeepsReplicasIdenticalAtSyncs) {
  const int world = 3, steps = 8;
  const auto make = [] {
    PeriodicOptions o = diloco_options(2);
    o.bucket_mb = mib(12);
    return std::make_unique<PeriodicAveraging>(o, std::make_unique<TopKReducer>(TopKOptions{0.5}));
  };
  const auto tr = train(world, steps, make);
  const auto dense = train(world, steps, periodic(diloco_options(2)));
  for (int t = 0; t < steps; ++t) {
    for (int r = 1; r < world; ++r)
      EXPECT_EQ(same_bits(tr[r].params[t], tr[0].params[t]), (t + 1) % 2 == 0)
          << "rank " << r << ", step " << t;
    for (const float x : tr[0].params[t]) ASSERT_TRUE(std::isfinite(x));
  }
  EXPECT_FALSE(same_bits(tr[0].params[steps - 1], dense[0].params[steps - 1]));  // it did compress
}

TEST(PeriodicAveraging, StateNamesAreUniqueAndSized) {
  run_threads(2, [&](Communicator& comm) {
    ParamStore s = small_store();
    PeriodicOptions o = diloco_options(4);
    o.bucket_mb = mib(12);  // buckets of 35 and 35
    PeriodicAveraging sync(o, std::make_unique<TopKReducer>(TopKOptions{0.5}));
    sync.start(s, comm);
    const auto st = sync.state();
    std::set<std::string> names;
    for (const auto& t : st) names.insert(t.name);
    EXPECT_EQ(names.size(), st.size());
    EXPECT_EQ(names, (std::set<std::string>{"periodic.global", "periodic.outer.momentum", "topk.residual.0",
                                            "topk.residual.1"}));
    EXPECT_EQ(find_state(sync, "periodic.global").size(), kSize);
    EXPECT_EQ(find_state(sync, "periodic.outer.momentum").size(), kSize);
    EXPECT_EQ(find_state(sync, "topk.residual.0").size(), 35u);
    // Local SGD keeps the anchor only.
    PeriodicAveraging local(local_sgd_options(4), std::make_unique<DenseReducer>());
    local.start(s, comm);
    ASSERT_EQ(local.state().size(), 1u);
    EXPECT_EQ(local.state()[0].name, "periodic.global");
  });
}

// Runs `steps` steps straight, and `cut` steps, a checkpoint (each rank's parameters and the
// strategy's state(), loaded after start() as the trainer does), then the rest in a fresh
// strategy: every step after the cut must match the straight run bit for bit. Returns the
// checkpoint's state names.
std::set<std::string> expect_resume_bit_for_bit(int world, int steps, int cut, const MakeStrategy& make) {
  const auto straight = train(world, steps, make);
  std::set<std::string> names;
  std::mutex mu;
  run_threads(world, [&](Communicator& comm) {
    ParamStore s = small_store();
    init_params(s, comm.rank());
    Sgd opt({});
    std::vector<std::vector<float>> saved;
    {
      auto sync = make();
      sync->start(s, comm);
      for (std::int64_t step = 0; step < cut; ++step) step_once(*sync, s, opt, comm, step);
      std::lock_guard lock(mu);
      for (const auto& t : sync->state()) {
        saved.emplace_back(t.data.begin(), t.data.end());
        names.insert(t.name);
      }
    }
    // Replicas may differ mid-period: each rank's shard holds its own parameters, loaded after
    // start() (whose broadcast then changes nothing that stays).
    const std::vector<float> mine(s.params().begin(), s.params().end());
    auto sync = make();
    sync->start(s, comm, cut);
    std::copy(mine.begin(), mine.end(), s.params().begin());
    const auto st = sync->state();
    ASSERT_EQ(st.size(), saved.size());
    for (std::size_t i = 0; i < st.size(); ++i) {
      ASSERT_EQ(st[i].data.size(), saved[i].size());
      std::copy(saved[i].begin(), saved[i].end(), st[i].data.begin());
    }
    for (std::int64_t step = cut; step < steps; ++step) {
      step_once(*sync, s, opt, comm, step);
      EXPECT_TRUE(same_bits(s.params(), straight[static_cast<std::size_t>(comm.rank())].params[step]))
          << "rank " << comm.rank() << ", step " << step;
    }
  });
  return names;
}

// A checkpoint taken at a sync (replicas identical) and loaded into a fresh strategy after start()
// continues bit for bit: the outer momentum travels in state(), the outer step is derived from
// the step, and start()'s broadcast of identical replicas changes nothing.
TEST(PeriodicAveraging, ResumingAtASyncContinuesBitForBit) {
  // H = 3: syncs at 2, 5, 8, 11; the checkpoint after step 5.
  expect_resume_bit_for_bit(2, 12, 6, [] {
    return std::make_unique<PeriodicAveraging>(diloco_options(3), std::make_unique<TopKReducer>(TopKOptions{0.5}));
  });
}

TEST(PeriodicAveraging, ResumingWithTheOuterAdamContinuesBitForBit) {
  expect_resume_bit_for_bit(2, 12, 6, [] {
    PeriodicOptions o = diloco_options(3, 0.01, 0.9, false);
    o.outer_optimizer = OuterOptimizer::adam;
    return std::make_unique<PeriodicAveraging>(o, std::make_unique<DenseReducer>());
  });
}

// After start() and one sync (which sizes the communicator's and top-k's world-dependent
// buffers), steps and syncs allocate nothing on any rank.
TEST(PeriodicAveraging, NoAllocationInTheStepAfterTheFirstSync) {
  if (!new_counter::in_use()) GTEST_SKIP() << "another operator new replacement is linked in";
  for (const bool topk : {false, true}) {
    SCOPED_TRACE(topk ? "top-k" : "dense");
    std::vector<long> news(2, -1);
    run_threads(2, [&](Communicator& comm) {
      ParamStore s = small_store();
      std::unique_ptr<Reducer> reducer;
      if (topk) reducer = std::make_unique<TopKReducer>(TopKOptions{0.5});
      else reducer = std::make_unique<DenseReducer>();
      PeriodicOptions o = diloco_options(2);
      o.warmup_steps = 2;
      o.bucket_mb = mib(12);
      PeriodicAveraging sync(o, std::move(reducer));
      Sgd opt({0.9, true, 0.0});
      sync.start(s, comm);
      for (std::int64_t step = 0; step < 4; ++step) step_once(sync, s, opt, comm, step);  // a sync at 3
      news[static_cast<std::size_t>(comm.rank())] = new_counter::during([&] {
        for (std::int64_t step = 4; step < 10; ++step) step_once(sync, s, opt, comm, step);  // syncs at 5, 7, 9
      });
    });
    EXPECT_EQ(news[0], 0);
    EXPECT_EQ(news[1], 0);
  }
}

TEST(PeriodicAveraging, RejectsBadOptions) {
  const auto make = [](PeriodicOptions o) { PeriodicAveraging p(o, std::make_unique<DenseReducer>()); };
  PeriodicOptions o;
  o.period = 0;
  EXPECT_THROW(make(o), Error);
  o = {};
  o.warmup_steps = -1;
  EXPECT_THROW(make(o), Error);
  o = {};
  o.nesterov = true;  // without momentum
  EXPECT_THROW(make(o), Error);
  o = {};
  o.outer_lr = 0;
  EXPECT_THROW(make(o), Error);
  EXPECT_THROW(PeriodicAveraging(PeriodicOptions{}, nullptr), Error);
}


// ---- streaming DiLoCo: fragments, staggered syncs, overlap, mixing, a period schedule ----

PeriodicOptions streaming_options(int fragments, std::int64_t period, std::int64_t tau, double mixing) {
  PeriodicOptions o = diloco_options(period);
  o.fragments = fragments;
  o.overlap_steps = tau;
  o.mixing = mixing;
  return o;
}

TEST(StreamingDiloco, FragmentsAreBalancedRunsOfWholeTensors) {
  const ParamStore s = small_store();  // 30, 5, 24, 4, 7
  EXPECT_EQ(fragment_bounds(s, 1), (std::vector<std::size_t>{0, 5}));
  EXPECT_EQ(fragment_bounds(s, 2), (std::vector<std::size_t>{0, 2, 5}));  // 35 | 35
  EXPECT_EQ(fragment_bounds(s, 3), (std::vector<std::size_t>{0, 1, 3, 5}));  // 30 | 29 | 11: peak 30
  ParamStore skewed;  // a large tensor last: the split minimises the largest fragment
  const char* names[] = {"t0", "t1", "t2", "t3", "t4"};
  for (int i = 0; i < 5; ++i) skewed.add(names[i], {i < 4 ? 10 : 60}, ParamGroup::decay);
  skewed.finalize();
  EXPECT_EQ(fragment_bounds(skewed, 2), (std::vector<std::size_t>{0, 4, 5}));  // 40 | 60
  EXPECT_EQ(fragment_bounds(s, 5), (std::vector<std::size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW(fragment_bounds(s, 6), Error);
}

// One fragment, no overlap, no mixing: DiLoCo's bits, rank by rank, step by step; and a schedule
// of one segment is the plain period.
TEST(StreamingDiloco, OneFragmentWithoutOverlapIsDiloco) {
  const SgdOptions inner{0.9, true, 1e-3};
  const auto diloco = train(3, 13, periodic(diloco_options(4)), inner);
  PeriodicOptions one = streaming_options(1, 4, 0, 0.0);
  const auto streaming = train(3, 13, periodic(one), inner);
  one.schedule = {{0, 4}};
  const auto scheduled = train(3, 13, periodic(one), inner);
  for (int r = 0; r < 3; ++r)
    for (int t = 0; t < 13; ++t) {
      EXPECT_TRUE(same_bits(diloco[r].params[t], streaming[r].params[t])) << "rank " << r << ", step " << t;
      EXPECT_TRUE(same_bits(diloco[r].params[t], scheduled[r].params[t])) << "rank " << r << ", step " << t;
      EXPECT_EQ(diloco[r].step_sent[t], streaming[r].step_sent[t]);
    }
}

// F = 2, H = 4: fragment 0 (a.*, 35 floats) syncs after steps 3, 7, 11, fragment 1 (b.*, c: 35)
// after 1, 5, 9, each with a ring all-reduce of its own 35 floats; DiLoCo sends all 70 at once,
// so the peak per sync halves while the total stays.
TEST(StreamingDiloco, StaggeredFragmentsSendTheirShareAndHalveThePeak) {
  const int world = 3, steps = 12;
  const auto diloco = train(world, steps, periodic(diloco_options(4)));
  const auto streaming = train(world, steps, periodic(streaming_options(2, 4, 0, 0.0)));
  for (int r = 0; r < world; ++r) {
    std::uint64_t peak_d = 0, peak_s = 0;
    for (int t = 0; t < steps; ++t) {
      const bool f0 = t == 3 || t == 7 || t == 11, f1 = t == 1 || t == 5 || t == 9;
      EXPECT_EQ(streaming[r].changed[t], f0 || f1) << "step " << t;
      const std::uint64_t want = (f0 || f1) ? nominal::all_reduce(35, DType::f32, r, world).sent : 0;
      EXPECT_EQ(streaming[r].step_sent[t], want) << "rank " << r << ", step " << t;
      peak_d = std::max(peak_d, diloco[r].step_sent[t]);
      peak_s = std::max(peak_s, streaming[r].step_sent[t]);
    }
    EXPECT_EQ(peak_d, nominal::all_reduce(70, DType::f32, r, world).sent);
    EXPECT_GE(static_cast<double>(peak_d) / static_cast<double>(peak_s), 2.0 / 1.2) << "rank " << r;
  }
  // After a fragment's sync its range is identical on every rank, the other fragment's is not.
  const auto range = [&](int r, int t, std::size_t b, std::size_t e) {
    return std::vector<float>(streaming[r].params[t].begin() + b, streaming[r].params[t].begin() + e);
  };
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(range(r, 3, 0, 35), range(0, 3, 0, 35));
    EXPECT_NE(range(r, 3, 35, 70), range(0, 3, 35, 70));
    EXPECT_EQ(range(r, 5, 35, 70), range(0, 5, 35, 70));
  }
}

// tau = 1: the reduction launched after step s runs on the communication thread during step
// s + 1, and the outer step lands after s + 1; with mixing 0 the fragment then equals the anchor
// on every rank, which is the anchor the tau = 0 run computes at s (same pseudo-gradient).
TEST(StreamingDiloco, OverlappedSyncMergesTauStepsLater) {
  const int world = 2, steps = 8;
  const auto now = train(world, steps, periodic(streaming_options(2, 4, 0, 0.0)));
  const auto later = train(world, steps, periodic(streaming_options(2, 4, 1, 0.0)));
  const PeriodicAveraging p(streaming_options(2, 4, 1, 0.0), std::make_unique<DenseReducer>());
  for (int t = 0; t < steps; ++t) {
    EXPECT_EQ(later[0].changed[t], t == 2 || t == 4 || t == 6) << "step " << t;  // merges of 1, 3, 5
    EXPECT_EQ(p.averages_params(t), later[0].changed[t]) << "step " << t;
  }
  for (int r = 0; r < world; ++r) {
    // Fragment 1 (35..70) launched after step 1: merged after step 2 to the anchor of step 1.
    const std::vector<float> got(later[r].params[2].begin() + 35, later[r].params[2].end());
    const std::vector<float> want(now[r].params[1].begin() + 35, now[r].params[1].end());
    EXPECT_EQ(got, want) << "rank " << r;
  }
}

// Mixing alpha: after the merge theta_f = alpha * theta_local + (1 - alpha) * theta_global, so the
// replicas differ by alpha times what they differed by before (with a common anchor): at
// alpha = 0.5, half the spread.
TEST(StreamingDiloco, MixingKeepsAlphaOfTheLocalParameters) {
  const int world = 2, steps = 2;  // fragment 1 syncs after step 1
  const auto mixed = train(world, steps, periodic(streaming_options(2, 4, 0, 0.5)));
  const auto local = train(world, steps, periodic(streaming_options(2, 1000, 0, 0.0)));  // never syncs
  for (std::size_t i = 35; i < 70; ++i) {
    const double spread_local = local[1].params[1][i] - local[0].params[1][i];
    const double spread_mixed = mixed[1].params[1][i] - mixed[0].params[1][i];
    EXPECT_NEAR(spread_mixed, 0.5 * spread_local, 1e-6) << i;
  }
  for (std::size_t i = 0; i < 35; ++i) EXPECT_EQ(mixed[0].params[1][i], local[0].params[1][i]);  // not synced yet
}

// A period schedule: H = 2 for the first 4 local steps, then H = 4: syncs after steps 1, 3, 7, 11,
// and the reducer sees outer steps 0, 1, 2, 3.
TEST(StreamingDiloco, PeriodScheduleChangesHAtItsBoundaries) {
  PeriodicOptions o = diloco_options(8);
  o.schedule = {{4, 2}, {0, 4}};
  std::vector<std::int64_t> seen;
  std::vector<bool> changed;
  run_threads(1, [&](Communicator& comm) {
    ParamStore s = small_store();
    PeriodicAveraging sync(o, std::make_unique<RecordingReducer>(&seen));
    Sgd opt({});
    sync.start(s, comm);
    for (std::int64_t step = 0; step < 12; ++step) changed.push_back(step_once(sync, s, opt, comm, step));
  });
  EXPECT_EQ(seen, (std::vector<std::int64_t>{0, 1, 2, 3}));
  for (int t = 0; t < 12; ++t) EXPECT_EQ(changed[t], t == 1 || t == 3 || t == 7 || t == 11) << "step " << t;
  o.schedule = {{5, 2}, {0, 4}};  // 5 steps are not whole periods of 2
  EXPECT_THROW(PeriodicAveraging(o, std::make_unique<DenseReducer>()), Error);
  o = streaming_options(2, 4, 4, 0.0);  // tau must be below the period
  EXPECT_THROW(PeriodicAveraging(o, std::make_unique<DenseReducer>()), Error);
}

// finish() with a fragment in flight completes it and syncs the other one: identical replicas.
TEST(StreamingDiloco, FinishLeavesIdenticalReplicasWithAFragmentInFlight) {
  const int world = 3;
  std::vector<std::vector<float>> last(world);
  run_threads(world, [&](Communicator& comm) {
    ParamStore s = small_store();
    init_params(s, comm.rank());
    PeriodicAveraging sync(streaming_options(2, 4, 1, 0.5), std::make_unique<DenseReducer>());
    Sgd opt({});
    sync.start(s, comm);
    for (std::int64_t step = 0; step < 6; ++step) step_once(sync, s, opt, comm, step);  // 5 launched fragment 1
    EXPECT_FALSE(sync.replicas_agree_after(5));
    sync.finish(5);
    last[static_cast<std::size_t>(comm.rank())].assign(s.params().begin(), s.params().end());
  });
  for (int r = 1; r < world; ++r) EXPECT_TRUE(same_bits(last[r], last[0])) << "rank " << r;
}

// A checkpoint taken after step 5, while fragment 1's sync of step 5 is in flight (tau = 2), and
// loaded into a fresh strategy continues bit for bit: state() waits for the reduction and saves
// the reduced pseudo-gradient, which the resumed run merges after step 7. With mixing, top-k's
// residuals and outer momentum per fragment.
TEST(StreamingDiloco, ResumingWithAFragmentInFlightContinuesBitForBit) {
  const std::set<std::string> names = expect_resume_bit_for_bit(2, 14, 6, [] {
    PeriodicOptions o = streaming_options(2, 4, 2, 0.25);
    return std::make_unique<PeriodicAveraging>(o, std::make_unique<TopKReducer>(TopKOptions{0.5}));
  });
  EXPECT_TRUE(names.count("periodic.delta.1") && names.count("periodic.global.0") &&
              names.count("periodic.outer.momentum.1"));
}

// Overlapped syncs allocate nothing either (the queue is reserved, the closure fits std::function),
// nor does freeze's hold (its one parameter-sized copy, allocated at start, is its buffer_bytes()).
TEST(StreamingDiloco, NoAllocationInOverlappedSteps) {
  if (!new_counter::in_use()) GTEST_SKIP() << "another operator new replacement is linked in";
  for (const bool freeze : {false, true}) {
    SCOPED_TRACE(freeze ? "freeze" : "no freeze");
    std::vector<long> news(2, -1);
    run_threads(2, [&](Communicator& comm) {
      ParamStore s = small_store();
      PeriodicOptions o = streaming_options(2, 4, 1, 0.5);
      o.freeze = freeze;
      PeriodicAveraging sync(o, std::make_unique<DenseReducer>());
      Sgd opt({0.9, true, 0.0});
      sync.start(s, comm);
      EXPECT_EQ(sync.buffer_bytes(), freeze ? kSize * sizeof(float) : 0u);
      for (std::int64_t step = 0; step < 5; ++step) step_once(sync, s, opt, comm, step);
      news[static_cast<std::size_t>(comm.rank())] = new_counter::during([&] {
        for (std::int64_t step = 5; step < 13; ++step) step_once(sync, s, opt, comm, step);
      });
    });
    EXPECT_EQ(news[0], 0);
    EXPECT_EQ(news[1], 0);
  }
}

// ---- freeze: the paper's FedPart-style ablation, only the fragment synced next trains ----

PeriodicOptions freeze_options() {  // F = 3, H = 6, tau = 2, alpha = 0.5, after 2 warm-up steps
  PeriodicOptions o = streaming_options(3, 6, 2, 0.5);
  o.warmup_steps = 2;
  o.freeze = true;
  return o;
}

// small_store at F = 3 is 30 | 29 | 11 floats; a fragment's values in one step of a trace.
std::vector<float> fragment_of(const Trace& tr, int step, int f) {
  const std::size_t bounds[] = {0, 30, 59, 70};
  const auto& p = tr.params[static_cast<std::size_t>(step)];
  return {p.begin() + static_cast<std::ptrdiff_t>(bounds[f]), p.begin() + static_cast<std::ptrdiff_t>(bounds[f + 1])};
}

// Fragments launch after local steps c = 2 (fragment 1), 4 (2), 6 (0), then every 6, so steps
// 2-3 train fragment 1, 4-5 fragment 2, 6-7 fragment 0, and so on: trains() is the first launch at
// or after the step by launches(). Each local step changes exactly the trained fragment, plus the
// one whose merge (launched tau = 2 steps before) lands; every other keeps its bits, though the
// inner SGD has momentum and weight decay. Warm-up steps train everything.
TEST(StreamingDiloco, FreezeTrainsOnlyTheFragmentSyncedNext) {
  const PeriodicOptions o = freeze_options();
  const PeriodicAveraging p(o, std::make_unique<DenseReducer>());
  const int world = 2, steps = 20;
  constexpr std::array kOrder = {1, 2, 0};  // the fragment trained in each pair of local steps
  const auto runs = train(world, steps, periodic(o), SgdOptions{0.9, true, 1e-3});
  for (int t = 1; t < steps; ++t) {
    std::int64_t next = t;
    while (!p.launches(next, 0) && !p.launches(next, 1) && !p.launches(next, 2)) ++next;
    for (int f = 0; f < 3; ++f) {
      const bool trained = t < 2 || p.launches(next, f);
      EXPECT_EQ(p.trains(t, f), trained) << "step " << t << ", fragment " << f;
      if (t >= 2) {
        EXPECT_EQ(trained, f == kOrder[static_cast<std::size_t>((t - 2) / 2 % 3)]) << "step " << t;
      }
      if (p.launches(t - o.overlap_steps, f)) continue;  // merged at t
      for (int r = 0; r < world; ++r)
        EXPECT_EQ(fragment_of(runs[r], t, f) != fragment_of(runs[r], t - 1, f), trained)
            << "rank " << r << ", step " << t << ", fragment " << f;
    }
  }
}

// Freeze off is the streaming run as it was: every fragment trains at every step. Freeze on, the
// first local step trains fragment 1 exactly as the run without freeze does (same gradients, same
// optimizer state), and holds the others at their bits.
TEST(StreamingDiloco, FreezeOffTrainsEveryFragmentAndOnChangesNothingElse) {
  PeriodicOptions off = freeze_options();
  off.freeze = false;
  const PeriodicAveraging p(off, std::make_unique<DenseReducer>());
  for (int t = 0; t < 20; ++t)
    for (int f = 0; f < 3; ++f) EXPECT_TRUE(p.trains(t, f)) << "step " << t << ", fragment " << f;
  const SgdOptions inner{0.9, true, 1e-3};
  const auto on = train(2, 3, periodic(freeze_options()), inner);
  const auto plain = train(2, 3, periodic(off), inner);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(same_bits(on[r].params[1], plain[r].params[1])) << "rank " << r;  // warm-up
    EXPECT_EQ(fragment_of(on[r], 2, 1), fragment_of(plain[r], 2, 1)) << "rank " << r;
    for (const int f : {0, 2}) {
      EXPECT_EQ(fragment_of(on[r], 2, f), fragment_of(on[r], 1, f)) << "rank " << r << ", fragment " << f;
      EXPECT_NE(fragment_of(plain[r], 2, f), fragment_of(plain[r], 1, f)) << "rank " << r << ", fragment " << f;
    }
  }
}

// The frozen copy is not checkpointed: a run resumed with fragment 2 in flight (launched after
// step 5, merged after 7) takes it again before its first optimizer step and continues bit for bit.
TEST(StreamingDiloco, ResumingUnderFreezeContinuesBitForBit) {
  expect_resume_bit_for_bit(2, 16, 6, [] {
    return std::make_unique<PeriodicAveraging>(freeze_options(), std::make_unique<DenseReducer>());
  });
}

TEST(StreamingDiloco, FreezeRejectsOneFragmentAndSparta) {
  PeriodicOptions o = freeze_options();
  o.fragments = 1;
  EXPECT_THROW(PeriodicAveraging(o, std::make_unique<DenseReducer>()), Error);
  o = freeze_options();
  o.sparta = SpartaOptions{};
  EXPECT_THROW(PeriodicAveraging(o, std::make_unique<DenseReducer>()), Error);
}


// A 5-element bias before a 40 x 40 weight in one bucket, the bias's pseudo-gradient 100 times
// smaller: with chunks cut over the whole bucket, the bias shared its chunk with 251 of the
// weight's elements and never made the top 4 (it moved 0.0 in three outer steps); chunked per
// tensor, it is a chunk of its own and moves at every sync.
TEST(PeriodicAveraging, SparseLocoMovesASmallTensorBesideLargeOnes) {
  const std::size_t bias = 5, n = bias + 1600;
  std::vector<std::vector<float>> moved(2, std::vector<float>(n));
  std::vector<std::string> described(2);
  run_threads(2, [&](Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    ParamStore s;
    s.add("bias", {5}, ParamGroup::no_decay);
    s.add("w", {40, 40}, ParamGroup::decay);
    s.finalize();
    PeriodicOptions o = diloco_options(2, 1.0, 0.0, false, mib(n));  // SparseLoCo: no outer momentum
    o.name = "SparseLoCo";
    PeriodicAveraging sync(o, std::make_unique<SparseLocoReducer>(SparseLocoOptions{{256, 4, Codec::int2}, 0.95}));
    sync.start(s, comm);
    ASSERT_EQ(sync.buckets().size(), 1u);
    const std::vector<float> theta0(s.params().begin(), s.params().end());
    for (std::int64_t step = 0; step < 6; ++step) {  // syncs at 1, 3, 5
      // A local step: the bias drifts by 1e-3 per step, the weight by up to 0.1.
      for (std::size_t i = 0; i < n; ++i)
        s.params()[i] -= (i < bias ? 1e-3f : 0.1f * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(r)));
      sync.after_update(step);
      if (step == 1) {  // the first sync: 4 of the bias's 5 equal drifts sent (ties to the lower position)
        for (std::size_t i = 0; i < bias; ++i)
          EXPECT_EQ(s.params()[i] != theta0[i], i < 4) << "bias " << i << " after the first sync";
      }
    }
    for (std::size_t i = 0; i < n; ++i) moved[r][i] = s.params()[i] - theta0[i];
    described[r] = sync.describe();
  });
  for (std::size_t i = 0; i < bias; ++i) {
    // Six local steps of -1e-3 on both ranks: about -6e-3, less what the accumulator still holds.
    EXPECT_LT(moved[0][i], -1e-3f) << "bias " << i;
    EXPECT_EQ(moved[1][i], moved[0][i]) << "bias " << i;
  }
  EXPECT_EQ(described[0].rfind("SparseLoCo (every 2 steps, outer SGD lr 1, pseudo-gradients by sparseloco", 0), 0u)
      << described[0];
}


// ---- eager DiLoCo (Kale et al. 2025): the outer all-reduce overlaps the next period ----

PeriodicOptions eager_options(std::int64_t period, int fragments = 1) {
  PeriodicOptions o = diloco_options(period);
  o.eager = true;
  o.fragments = fragments;
  return o;
}

// The paper's rule written out here, over an instant network (threads): at each sync replica r
// steps with G^(t-1) + (d_r^t - d_r^(t-1)) / M, its own fresh pseudo-gradient standing in for its
// share of a mean that arrives one period late; the anchors, momenta and parameters are each
// replica's own. Against the strategy on the quadratic, with outer Nesterov.
TEST(EagerDiloco, FollowsThePapersRuleOnAQuadratic) {
  const int world = 4, steps = 17;
  const std::int64_t h = 4;
  const auto tr = train(world, steps, periodic(eager_options(h)));
  const double olr = 0.7, mu = 0.9;
  const float lr = 0.05f;
  std::vector<ParamStore> rep;
  for (int r = 0; r < world; ++r) {
    rep.push_back(small_store());
    init_params(rep.back(), 0);  // start() gives every rank rank 0's parameters
  }
  const std::vector<double> w0(rep[0].params().begin(), rep[0].params().end()), zero(kSize, 0.0);
  std::vector<std::vector<double>> anchor(world, w0), mom(world, zero), own(world, zero);
  std::vector<double> global = zero;  // G^(t-1)
  double worst = 0;
  for (int step = 0; step < steps; ++step) {
    for (int r = 0; r < world; ++r) {
      quadratic_grads(rep[r], r, step);
      for (std::size_t i = 0; i < kSize; ++i) rep[r].params()[i] -= lr * rep[r].grads()[i];
    }
    if ((step + 1) % h == 0) {
      std::vector<double> next = zero;
      for (int r = 0; r < world; ++r)
        for (std::size_t i = 0; i < kSize; ++i) {
          const double d = anchor[r][i] - rep[r].params()[i];
          next[i] += d / world;
          const double delta = global[i] + (d - own[r][i]) / world;
          own[r][i] = d;
          mom[r][i] = mu * mom[r][i] + delta;
          anchor[r][i] -= olr * (delta + mu * mom[r][i]);
          rep[r].params()[i] = static_cast<float>(anchor[r][i]);
        }
      global = next;
    }
    for (int r = 0; r < world; ++r)
      for (std::size_t i = 0; i < kSize; ++i) {
        const double want = rep[r].params()[i], got = tr[r].params[step][i];
        const double rel = std::abs(got - want) / std::max(1.0, std::abs(want));
        worst = std::max(worst, rel);
        ASSERT_LT(rel, 1e-5) << "rank " << r << ", step " << step << ", element " << i;
      }
  }
  // Each replica stepped with its own pseudo-gradient: no two agree after a sync.
  for (int r = 1; r < world; ++r) EXPECT_FALSE(same_bits(tr[r].params[7], tr[0].params[7])) << "rank " << r;
  std::cout << "eager DiLoCo vs the paper's rule in double: max relative diff " << worst << "\n";
}

// One replica: G^(t-1) = d^(t-1), so its stand-in is its own pseudo-gradient, DiLoCo's step (up to
// the rounding of (G + d) - d).
TEST(EagerDiloco, OneReplicaIsDiloco) {
  const int steps = 13;
  const auto eager = train(1, steps, periodic(eager_options(3)));
  const auto plain = train(1, steps, periodic(diloco_options(3)));
  for (int t = 0; t < steps; ++t)
    for (std::size_t i = 0; i < kSize; ++i)
      ASSERT_NEAR(eager[0].params[t][i], plain[0].params[t][i], 1e-5 * std::max(1.0f, std::abs(plain[0].params[t][i])))
          << "step " << t << ", element " << i;
}

// Each sync's reduction is the same as DiLoCo's (the same buckets and collectives), run while the
// next period's steps are: after drain() the same bytes, and steps between syncs send nothing on
// the step loop's thread of their own.
TEST(EagerDiloco, SendsDilocosBytesAndDrainWaitsForTheLast) {
  const int world = 3, steps = 12;
  std::vector<std::uint64_t> sent[2];
  for (const bool eager : {false, true}) {
    sent[eager].assign(world, 0);
    run_threads(world, [&](Communicator& comm) {
      ParamStore s = small_store();
      init_params(s, comm.rank());
      PeriodicOptions o = eager ? eager_options(4, 2) : diloco_options(4);
      o.fragments = 2;
      o.bucket_mb = mib(12);
      PeriodicAveraging sync(o, std::make_unique<DenseReducer>());
      Sgd opt({});
      sync.start(s, comm);
      const std::uint64_t before = comm.bytes().sent;
      for (std::int64_t step = 0; step < steps; ++step) step_once(sync, s, opt, comm, step);
      sync.drain();
      sent[eager][static_cast<std::size_t>(comm.rank())] = comm.bytes().sent - before;
      if (eager) {
        EXPECT_FALSE(sync.replicas_agree_after(steps - 1));
      }
    });
  }
  for (int r = 0; r < world; ++r) {
    EXPECT_GT(sent[0][r], 0u);
    EXPECT_EQ(sent[1][r], sent[0][r]) << "rank " << r;
  }
}

// A checkpoint mid-period, the previous sync's reduction in flight: state() waits for it and saves
// G and the replica's own d, and the resumed run continues bit for bit (one and two fragments,
// top-k's residuals too).
TEST(EagerDiloco, ResumingWithAReductionInFlightContinuesBitForBit) {
  for (const int fragments : {1, 2}) {
    SCOPED_TRACE(testing::Message() << fragments << " fragments");
    const std::set<std::string> names = expect_resume_bit_for_bit(2, 14, 6, [fragments] {
      return std::make_unique<PeriodicAveraging>(eager_options(4, fragments),
                                                 std::make_unique<TopKReducer>(TopKOptions{0.5}));
    });
    const std::string suffix = fragments == 1 ? "" : ".1";
    EXPECT_TRUE(names.count("periodic.eager.global" + suffix) && names.count("periodic.eager.local" + suffix));
  }
}

// finish() (handing over to another strategy) leaves identical replicas: the average of theirs.
TEST(EagerDiloco, FinishAveragesTheReplicas) {
  const int world = 3;
  std::vector<std::vector<float>> before(world), last(world);
  run_threads(world, [&](Communicator& comm) {
    ParamStore s = small_store();
    init_params(s, comm.rank());
    PeriodicAveraging sync(eager_options(4), std::make_unique<DenseReducer>());
    Sgd opt({});
    sync.start(s, comm);
    for (std::int64_t step = 0; step < 6; ++step) step_once(sync, s, opt, comm, step);
    EXPECT_FALSE(sync.replicas_agree_after(5));
    before[static_cast<std::size_t>(comm.rank())].assign(s.params().begin(), s.params().end());
    sync.finish(5);
    last[static_cast<std::size_t>(comm.rank())].assign(s.params().begin(), s.params().end());
    EXPECT_TRUE(same_bits(find_state(sync, "periodic.global"), s.params()));
  });
  for (int r = 1; r < world; ++r) EXPECT_TRUE(same_bits(last[r], last[0])) << "rank " << r;
  for (std::size_t i = 0; i < kSize; ++i)
    EXPECT_NEAR(last[0][i], (before[0][i] + before[1][i] + before[2][i]) / 3.0f, 1e-6) << "element " << i;
}

TEST(EagerDiloco, NoAllocationInTheSteps) {
  if (!new_counter::in_use()) GTEST_SKIP() << "another operator new replacement is linked in";
  std::vector<long> news(2, -1);
  run_threads(2, [&](Communicator& comm) {
    ParamStore s = small_store();
    PeriodicAveraging sync(eager_options(2, 2), std::make_unique<DenseReducer>());
    Sgd opt({0.9, true, 0.0});
    sync.start(s, comm);
    for (std::int64_t step = 0; step < 8; ++step) step_once(sync, s, opt, comm, step);
    news[static_cast<std::size_t>(comm.rank())] = new_counter::during([&] {
      for (std::int64_t step = 8; step < 16; ++step) step_once(sync, s, opt, comm, step);
    });
    sync.drain();
  });
  EXPECT_EQ(news[0], 0);
  EXPECT_EQ(news[1], 0);
}

TEST(EagerDiloco, RejectsOverlapStepsAndDescribesItself) {
  PeriodicOptions o = eager_options(4, 2);
  o.overlap_steps = 1;
  EXPECT_THROW(PeriodicAveraging(o, std::make_unique<DenseReducer>()), Error);
  PeriodicAveraging eager(eager_options(4), std::make_unique<DenseReducer>());
  EXPECT_NE(eager.describe().find("eager outer steps"), std::string::npos) << eager.describe();
}

// ---- SPARTA between DiLoCo's syncs (Exo Labs' SPARTA-DiLoCo) ----

// Fraction 1 every step averages every parameter after every step: with local SGD's outer step
// (lr 1, no momentum) at H = 4, data parallelism up to the rounding of the parameter average.
TEST(SpartaDiloco, EveryElementEveryStepIsDataParallel) {
  const int world = 3, steps = 12;
  PeriodicOptions o = local_sgd_options(4);
  o.sparta = SpartaOptions{1.0, 1, 7};
  const auto sd = train(world, steps, periodic(o));
  const auto dp = train(world, steps, data_parallel());
  for (int r = 0; r < world; ++r)
    for (int t = 0; t < steps; ++t) {
      EXPECT_TRUE(sd[r].changed[t]);
      for (std::size_t i = 0; i < kSize; ++i)
        ASSERT_NEAR(sd[r].params[t][i], dp[r].params[t][i], 2e-6 * std::max(1.0f, std::abs(dp[r].params[t][i])))
            << "rank " << r << ", step " << t;
    }
}

// Between syncs the chosen elements agree across the ranks after each step; a local step's bytes
// are SPARTA's all-reduce of the chosen values (plain DiLoCo's: none), a sync step's SPARTA's plus
// DiLoCo's, exactly.
TEST(SpartaDiloco, ChosenElementsAgreeBetweenSyncsAndBytesAdd) {
  const int world = 3, steps = 8;
  PeriodicOptions o = diloco_options(4);
  o.sparta = SpartaOptions{0.3, 1, 7};
  const auto sd = train(world, steps, periodic(o));
  const auto plain = train(world, steps, periodic(diloco_options(4)));
  const Sparta probe(*o.sparta);
  for (int t : {0, 1, 2}) {
    std::size_t chosen = 0;
    for (std::size_t i = 0; i < kSize; ++i) {
      const bool c = probe.chosen(t, i);
      chosen += c;
      bool agree = true;
      for (int r = 1; r < world; ++r) agree = agree && sd[r].params[t][i] == sd[0].params[t][i];
      if (c) {
        EXPECT_TRUE(agree) << "step " << t << ", element " << i;
      }
    }
    EXPECT_GT(chosen, 0u);
    EXPECT_GT(sd[0].step_sent[t], 0u);
    EXPECT_EQ(plain[0].step_sent[t], 0u);
  }
  // Step 3 syncs: SPARTA's values, then DiLoCo's all-reduce of the same size as plain DiLoCo's.
  std::vector<std::uint64_t> sparta_bytes(world);
  std::size_t chosen3 = 0;
  for (std::size_t i = 0; i < kSize; ++i) chosen3 += probe.chosen(3, i);
  run_threads(world, [&](Communicator& comm) {
    std::vector<float> x(chosen3, 1.0f);
    const std::uint64_t b0 = comm.bytes().sent;
    comm.all_reduce(std::span<float>(x), ReduceOp::avg);
    sparta_bytes[static_cast<std::size_t>(comm.rank())] = comm.bytes().sent - b0;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(sd[r].step_sent[3], plain[r].step_sent[3] + sparta_bytes[r]) << "rank " << r;
  PeriodicAveraging d(o, std::make_unique<DenseReducer>());
  EXPECT_NE(d.describe().find("SPARTA between syncs"), std::string::npos) << d.describe();
}

}  // namespace
}  // namespace laconic
