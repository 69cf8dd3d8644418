// Goodput under simulated failures (sim/failures.h): closed forms and limits.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/check.h"
#include "sim/failures.h"

namespace laconic {
namespace {

FailureRun run(int hosts, int replicas, std::int64_t steps, std::int64_t period, std::int64_t checkpoint_every) {
  FailureRun r;
  r.hosts = hosts;
  r.replicas = replicas;
  r.steps = steps;
  r.period = period;
  r.checkpoint_every = checkpoint_every;
  r.step_s = 1.0;
  r.join_timeout_s = 10;
  return r;
}

TEST(Failures, WithoutFailuresEveryPolicyHasFullGoodput) {
  FailureModel m;
  m.mtbf_s = 1e15;
  m.restart_s = 60;
  const GoodputResult g = simulate_failures(m, run(8, 2, 1000, 50, 100));
  EXPECT_DOUBLE_EQ(g.goodput_dp, 1.0);
  EXPECT_DOUBLE_EQ(g.goodput_elastic, 1.0);
  EXPECT_DOUBLE_EQ(g.wall_dp_s, 1000.0);
  EXPECT_EQ(g.failures, 0.0);
}

// One host, checkpoints every C steps of T: each segment of w = C T seconds is retried until it
// runs failure-free, and the expected wall time of a segment under exponential failures (rate
// 1/mtbf) with a restart R after each is (e^{w / mtbf} - 1)(mtbf + R).
TEST(Failures, CheckpointRestartMatchesTheClosedFormExpectedTime) {
  FailureModel m;
  m.mtbf_s = 200;
  m.restart_s = 30;
  m.trials = 4000;
  const std::int64_t steps = 400, C = 50;
  const GoodputResult g = simulate_failures(m, run(1, 1, steps, C, C));
  const double w = static_cast<double>(C);
  const double expected = static_cast<double>(steps / C) * (std::exp(w / m.mtbf_s) - 1.0) * (m.mtbf_s + m.restart_s);
  EXPECT_NEAR(g.wall_dp_s, expected, 0.03 * expected);
  EXPECT_NEAR(g.goodput_dp, 1.0 * steps / expected, 0.05);
}

TEST(Failures, OneReplicaIsCheckpointRestartAtItsPeriod) {
  FailureModel m;
  m.mtbf_s = 300;
  m.restart_s = 20;
  m.trials = 50;
  const GoodputResult g = simulate_failures(m, run(1, 1, 1000, 40, 40));
  EXPECT_NEAR(g.wall_elastic_s, g.wall_dp_s, 1e-9 * g.wall_dp_s);
  EXPECT_NEAR(g.goodput_elastic, g.goodput_dp, 1e-9);
}

TEST(Failures, ReplicasThatFailAloneKeepTheOthersGoing) {
  FailureModel m;
  m.mtbf_s = 4 * 3600;
  m.restart_s = 600;
  const GoodputResult g = simulate_failures(m, run(16, 8, 20000, 100, 100));
  EXPECT_GT(g.failures, 10.0);
  EXPECT_GT(g.goodput_elastic, g.goodput_dp + 0.1);
  EXPECT_LT(g.goodput_elastic, 1.0);
  EXPECT_GT(g.lost_dp_steps, 0.0);
  EXPECT_GT(g.lost_elastic_replica_steps, 0.0);
  // Elastic time is the failure-free time plus at most a join wait per failure (the failures
  // counted are those within the failure-free time; the run's extra time may see a few more).
  EXPECT_LE(g.wall_elastic_s, 20000.0 + 2 * 10.0 * g.failures);
}

TEST(Failures, TheSpecParsesOrSaysWhatWasExpected) {
  const FailureModel m = parse_failures("mtbf=2h,restart=10m,seed=7,trials=5,checkpoint_every=100,period=25,steps=9");
  EXPECT_EQ(m.mtbf_s, 7200);
  EXPECT_EQ(m.restart_s, 600);
  EXPECT_EQ(m.seed, 7u);
  EXPECT_EQ(m.trials, 5);
  EXPECT_EQ(m.checkpoint_every, 100);
  EXPECT_EQ(m.period, 25);
  EXPECT_EQ(m.steps, 9);
  auto message = [](const std::string& spec) {
    try {
      parse_failures(spec);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("restart=10m"), "--failures: expected mtbf=DURATION,restart=DURATION, got 'restart=10m'");
  EXPECT_EQ(message("mtbf=2h,restart=10m,mtbf2=1"),
            "--failures: unknown key 'mtbf2' (keys: mtbf, restart, seed, trials, checkpoint_every, period, steps, replicas)");
  EXPECT_EQ(message("mtbf=soon,restart=1m"), "--failures: mtbf: expected a duration (e.g. 2h, 10m, 90s), got 'soon'");
  EXPECT_EQ(message("mtbf=0s,restart=1m"), "--failures: mtbf: expected a duration > 0, got '0s'");
  EXPECT_EQ(message("mtbf=1h,restart=1m,trials=0"), "--failures: trials: expected an integer >= 1, got '0'");
}

}  // namespace
}  // namespace laconic
