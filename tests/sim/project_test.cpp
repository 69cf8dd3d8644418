// World-size projection (sim/project.h, `trainer simulate RUN --world N`): a run recorded at 8
// ranks replayed as 64 against the 64-rank run's own replay, rings as flows against their
// messages, and what does not project refused with its reason.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/check.h"
#include "framework/train/simulate.h"
#include "sim/project.h"
#include "tests/sim/traced_run.h"

namespace laconic {
namespace {

// A short run on two or four datacenters 30 ms and 1 Gbit/s apart, compute modeled from FLOPs
// (the same on every rank at any world size: measured compute of 64 threads on two cores would
// be the machine's contention, not the run's).
Recipe cross_dc(int world, int groups, const std::string& strategy) {
  Recipe r = traced_recipe(world);
  r.train.steps = 4;
  r.train.grad_accum = 1;
  r.train.log_every = 2;
  r.sync.bucket_mb = 25;
  r.sync.strategy = strategy;
  if (strategy == "diloco") {
    r.sync.intra = IntraKind::allreduce;  // inner all-reduce in each datacenter, DiLoCo between leaders
    r.sync.diloco.period = 2;
  }
  r.network.groups = groups;
  r.network.compute = ComputeKind::modeled;
  r.network.device_tflops = 100;
  return r;
}

std::vector<double> step_times(const Simulation& s) {
  std::vector<double> d;
  for (std::size_t i = 1; i < s.time_at.size(); ++i) d.push_back(s.time_at[i] - s.time_at[i - 1]);
  return d;
}

// One strategy per test (each records six runs, three of 64 ranks: minutes under a sanitizer).
class Projection8To64 : public ::testing::TestWithParam<const char*> {};

TEST_P(Projection8To64, MatchesTheSixtyFourRankRun) {
  TempDir dir;
  const std::string strategy = GetParam();
  for (const int groups : {2, 4}) {
    const std::string name = strategy + "-" + std::to_string(groups);
    TrainOptions small, large;
    small.run_dir = dir.str(name + "-8");
    large.run_dir = dir.str(name + "-64");
    train(cross_dc(8, groups, strategy), traced_data(), small);
    train(cross_dc(64, groups, strategy), traced_data(), large);
    SimulateOptions own, projected;
    own.out_dir = large.run_dir + "/sim";
    projected.out_dir = small.run_dir + "/sim-64";
    projected.world = 64;
    const Simulation want = simulate_run(large.run_dir, own);
    const Simulation got = simulate_run(small.run_dir, projected);
    ASSERT_EQ(got.replay.ranks.size(), 64u) << name;
    EXPECT_EQ(got.steps, want.steps) << name;
    const std::vector<double> a = step_times(got), b = step_times(want);
    ASSERT_EQ(a.size(), b.size()) << name;
    ASSERT_GE(a.size(), 3u) << name;
    for (std::size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 0.05 * b[i]) << name << ": step interval " << i;
    // The same collectives: every byte rank 0 sends, inside its datacenter and across.
    EXPECT_EQ(got.bytes_intra, want.bytes_intra) << name;
    EXPECT_EQ(got.bytes_inter, want.bytes_inter) << name;
    EXPECT_GT(got.bytes_inter, 0u) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Projection, Projection8To64, ::testing::Values("allreduce", "topk", "diloco"));

TEST(Projection, RingsAsFlowsTakeWhatTheirMessagesTake) {
  TempDir dir;
  TrainOptions o;
  o.run_dir = dir.str("run");
  train(cross_dc(8, 2, "allreduce"), traced_data(), o);
  SimulateOptions messages, flows;
  messages.world = flows.world = 64;
  messages.out_dir = o.run_dir + "/messages";
  flows.out_dir = o.run_dir + "/flows";
  flows.exact_up_to = 1;
  const Simulation m = simulate_run(o.run_dir, messages), f = simulate_run(o.run_dir, flows);
  const std::vector<double> a = step_times(f), b = step_times(m);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 0.02 * b[i]) << "step interval " << i;
  EXPECT_NEAR(static_cast<double>(f.bytes_inter), static_cast<double>(m.bytes_inter), 0.01 * static_cast<double>(m.bytes_inter));
}

// ---- what does not project ----

TraceEvent event(TraceKind k) {
  TraceEvent e;
  e.kind = k;
  return e;
}

// A world of `w` ranks whose lane 0 holds `events` (the same on every rank).
std::vector<RankTrace> world(int w, const std::vector<TraceEvent>& events, int version = 3) {
  std::vector<RankTrace> t(static_cast<std::size_t>(w));
  for (int r = 0; r < w; ++r)
    for (int l = 0; l < 2; ++l) {
      TraceLane& lane = t[static_cast<std::size_t>(r)].lanes[l];
      lane.rank = r;
      lane.size = w;
      lane.lane = l;
      lane.version = version;
      if (l == 0) lane.events = events;
    }
  return t;
}

// An all-reduce of `count` ranks starting at world rank `first`, `stride` apart.
std::vector<TraceEvent> all_reduce(int count, int first, int stride) {
  TraceEvent mark = event(TraceKind::collective);
  mark.sub = static_cast<std::uint8_t>(Collective::all_reduce);
  mark.bytes = 4096;
  mark.b = count;
  mark.bytes2 = CollectiveRanks{first, stride}.pack();
  mark.tier = static_cast<std::uint8_t>(Algorithm::ring);
  return {event(TraceKind::step), mark, event(TraceKind::collective_end)};
}

void expect_refused(const std::vector<RankTrace>& t, ProjectionOptions o, const std::string& reason) {
  try {
    project_trace(t, o);
    FAIL() << "projected; expected: " << reason;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(Projection, PlacesEachRankWhereTheRecordedOneStood) {
  ProjectionOptions o;
  o.recorded_groups = 2;
  o.world = 16;
  const ProjectedTrace p = project_trace(world(8, all_reduce(8, 0, 1)), o);
  // Groups of 4 recorded, of 8 projected: each group's leader replays its leader, the others
  // ranks 1..3 of the same group, spread evenly.
  const std::vector<int> want{0, 1, 1, 1, 2, 2, 3, 3, 4, 5, 5, 5, 6, 6, 7, 7};
  EXPECT_EQ(p.source, want);
  ASSERT_EQ(p.lanes[0].lanes[0].events.size(), 2u);  // the step mark and the regenerated all-reduce
  const TraceEvent& n = p.lanes[0].lanes[0].events[1];
  EXPECT_EQ(n.kind, TraceKind::native);
  EXPECT_EQ(n.b, 16);
  EXPECT_EQ(n.tier2, static_cast<std::uint8_t>(NativeScope::world));
  EXPECT_EQ(n.tier, expand_as(Algorithm::ring));
  // A group's collective (4 ranks from 4) and the leaders' (ranks 0 and 4) keep their parts.
  EXPECT_EQ(project_trace(world(8, all_reduce(4, 4, 1)), o).lanes[0].lanes[0].events[1].tier2,
            static_cast<std::uint8_t>(NativeScope::group));
  EXPECT_EQ(project_trace(world(8, all_reduce(2, 0, 4)), o).lanes[0].lanes[0].events[1].tier2,
            static_cast<std::uint8_t>(NativeScope::leaders));
}

TEST(Projection, RefusesWhatItCannotPlaceWithTheReason) {
  ProjectionOptions o;
  o.recorded_groups = 2;
  o.world = 16;
  expect_refused(world(8, {event(TraceKind::send)}), o, "point-to-point message outside any collective");
  expect_refused(world(8, all_reduce(4, 0, 0)), o, "not evenly spaced");
  expect_refused(world(8, all_reduce(2, 1, 4)), o, "neither the world");
  expect_refused(world(8, all_reduce(8, 0, 1), 2), o, "record the run again");
  expect_refused(world(8, {event(TraceKind::collective)}), o, "never ends");
  ProjectionOptions uneven = o;
  uneven.groups = 3;
  expect_refused(world(8, all_reduce(8, 0, 1)), uneven, "3 groups do not divide --world 16");
  ProjectionOptions lone;
  lone.recorded_groups = 2;
  lone.world = 8;
  expect_refused(world(2, all_reduce(2, 0, 1)), lone, "one rank per group");
  ProjectionOptions huge = o;
  huge.world = kMaxProjectedWorld + 1;
  expect_refused(world(8, all_reduce(8, 0, 1)), huge, "--world: expected 1 to");
}

}  // namespace
}  // namespace laconic
