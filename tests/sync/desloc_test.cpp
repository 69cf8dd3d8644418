// DES-LOC (framework/sync/desloc.h): with equal periods it is Local Adam (AdamW on every rank,
// parameters and both moments averaged every K steps), checked against that loop written out here
// and against the mean of what the ranks held; with its own periods each state is averaged on its
// own schedule and nothing else moves; the bytes are one dense all-reduce per averaged state; an
// optimizer without Adam's moments is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "framework/sync/desloc.h"
#include "optimizers/adamw.h"
#include "optimizers/sgd.h"
#include "tests/sync/small_store.h"

namespace laconic {
namespace {

constexpr std::size_t kN = kSmallStoreSize;

// Rank-dependent gradients of a quadratic that move with the step (a fresh batch each step).
void grads(ParamStore& s, int rank, std::int64_t step) {
  for (std::size_t i = 0; i < kN; ++i)
    s.grads()[i] = (1.0f + 0.2f * static_cast<float>(rank)) * s.params()[i] -
                   std::sin(0.3f * static_cast<float>(i) + static_cast<float>(rank) + 0.1f * static_cast<float>(step));
}

std::span<float> named(const std::vector<StateTensor>& st, const std::string& name) {
  for (const StateTensor& t : st)
    if (t.name == name) return t.data;
  return {};
}

bool same(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

struct Held {
  std::vector<std::vector<float>> x, m, v;  // per step, after the strategy
};

// `steps` steps of AdamW on every rank: through DES-LOC, or (`reference`) through the loop that
// defines Local Adam-with-periods here: step, then average each due state with one all-reduce.
std::vector<Held> run(int world, int steps, DeslocOptions o, bool reference) {
  std::vector<Held> out(static_cast<std::size_t>(world));
  run_threads(world, [&](Communicator& comm) {
    Held& h = out[static_cast<std::size_t>(comm.rank())];
    ParamStore s = small_store();
    for (std::size_t i = 0; i < kN; ++i) s.params()[i] = std::cos(0.5f * static_cast<float>(i));
    AdamW opt({0.9, 0.99, 1e-8, 0.01});
    opt.prepare(s);
    const auto st = opt.state();
    Desloc sync(o);
    sync.start(s, comm);
    sync.set_optimizer_state(st);
    for (std::int64_t step = 0; step < steps; ++step) {
      grads(s, comm.rank(), step);
      opt.step(s, 0.05);
      if (reference) {
        if ((step + 1) % o.param_period == 0) comm.all_reduce(s.params(), ReduceOp::avg);
        if ((step + 1) % o.m_period == 0) comm.all_reduce(named(st, "exp_avg"), ReduceOp::avg);
        if ((step + 1) % o.v_period == 0) comm.all_reduce(named(st, "exp_avg_sq"), ReduceOp::avg);
      } else {
        EXPECT_EQ(sync.after_update(step), (step + 1) % o.param_period == 0);
      }
      h.x.emplace_back(s.params().begin(), s.params().end());
      const auto m = named(st, "exp_avg"), v = named(st, "exp_avg_sq");
      h.m.emplace_back(m.begin(), m.end());
      h.v.emplace_back(v.begin(), v.end());
    }
  });
  return out;
}

// Equal periods: Local Adam, bit for bit against the loop above; and after each sync every rank
// holds the same bits, the mean of what the ranks held before it (the step's values without sync).
TEST(Desloc, EqualPeriodsAreLocalAdam) {
  const int world = 3, steps = 12;
  const DeslocOptions o{4, 4, 4};
  const auto got = run(world, steps, o, false), want = run(world, steps, o, true);
  for (int r = 0; r < world; ++r)
    for (int t = 0; t < steps; ++t) {
      EXPECT_TRUE(same(got[r].x[t], want[r].x[t])) << "rank " << r << ", step " << t;
      EXPECT_TRUE(same(got[r].m[t], want[r].m[t])) << "rank " << r << ", step " << t;
      EXPECT_TRUE(same(got[r].v[t], want[r].v[t])) << "rank " << r << ", step " << t;
    }
  const auto none = run(world, 4, {1000, 1000, 1000}, false);  // the first 4 steps without a sync
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(same(got[r].x[3], got[0].x[3]) && same(got[r].m[3], got[0].m[3]) && same(got[r].v[3], got[0].v[3]));
    for (std::size_t i = 0; i < kN; ++i) {
      double x = 0, m = 0, v = 0;
      for (int q = 0; q < world; ++q) x += none[q].x[3][i] / world, m += none[q].m[3][i] / world, v += none[q].v[3][i] / world;
      EXPECT_NEAR(got[r].x[3][i], x, 1e-6);
      EXPECT_NEAR(got[r].m[3][i], m, 1e-7);
      EXPECT_NEAR(got[r].v[3][i], v, 1e-7);
    }
  }
  EXPECT_FALSE(same(got[1].x[4], got[0].x[4]));  // local steps again after the sync
}

// Periods of their own: after step 5 (K_u = 3, K_v = 6, K_x = 4) m and v agree across the ranks,
// after step 3 only x, after step 2 only m.
TEST(Desloc, EachStateOnItsOwnPeriod) {
  const int world = 2;
  const auto h = run(world, 8, {4, 3, 6}, false);
  const auto agree = [&](const std::vector<std::vector<float>> Held::*f, int t) {
    return same((h[0].*f)[t], (h[1].*f)[t]);
  };
  EXPECT_TRUE(agree(&Held::m, 2) && !agree(&Held::x, 2) && !agree(&Held::v, 2));
  EXPECT_TRUE(agree(&Held::x, 3) && !agree(&Held::m, 3) && !agree(&Held::v, 3));
  EXPECT_TRUE(agree(&Held::m, 5) && agree(&Held::v, 5) && !agree(&Held::x, 5));
  EXPECT_TRUE(agree(&Held::x, 7) && !agree(&Held::m, 7));
}

// Bytes: each averaging is one dense all-reduce of n floats: over 12 steps at (4, 3, 6), 3 + 4 + 2
// of them, exactly.
TEST(Desloc, BytesAreOneAllReducePerAveragedState) {
  const int world = 3;
  std::vector<std::uint64_t> sent(world), one(world);
  run_threads(world, [&](Communicator& comm) {
    ParamStore s = small_store();
    AdamW opt({});
    opt.prepare(s);
    Desloc sync({4, 3, 6});
    sync.start(s, comm);
    sync.set_optimizer_state(opt.state());
    const std::uint64_t b0 = comm.bytes().sent;
    for (std::int64_t step = 0; step < 12; ++step) {
      grads(s, comm.rank(), step);
      opt.step(s, 0.01);
      sync.after_update(step);
    }
    sent[static_cast<std::size_t>(comm.rank())] = comm.bytes().sent - b0;
    const std::uint64_t b1 = comm.bytes().sent;
    comm.all_reduce(s.params(), ReduceOp::avg);
    one[static_cast<std::size_t>(comm.rank())] = comm.bytes().sent - b1;
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(sent[r], 9 * one[r]) << "rank " << r;
}

TEST(Desloc, RefusesAnOptimizerWithoutAdamsMoments) {
  run_threads(1, [&](Communicator& comm) {
    ParamStore s = small_store();
    Sgd opt({0.9, false, 0.0});
    opt.prepare(s);
    Desloc sync({});
    sync.start(s, comm);
    EXPECT_THROW(sync.set_optimizer_state(opt.state()), InputError);
  });
  EXPECT_THROW(Desloc({0, 1, 1}), Error);
}

}  // namespace
}  // namespace laconic
