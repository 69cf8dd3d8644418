// Elastic training's replica group (framework/elastic) with replicas as threads of this process,
// each with its own store handle, over a file store: the quorum's weighted mean, a member that
// fails mid-sync dropped and the sync retried from the same inputs, a replica whose anchor is
// behind dropped, a joiner receiving a live member's checkpoint directory (over a plain and a
// signed store), forged outcomes failing an unsigned sync and not a signed one, and one that comes
// back after the end told so; the aggregators (aggregate.h) against closed forms, and members whose
// contribution fails a check (not finite, the wrong size, too many examples) dropped.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/timer.h"
#include "framework/elastic/elastic.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

struct Dir {
  explicit Dir(const std::string& name)
      : path((fs::temp_directory_path() / ("laconic-elastic-" + std::to_string(::getpid()) + "-" + name)).string()) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() { fs::remove_all(path); }
  std::string path;
};

ElasticOptions options(const std::string& store, int replica, int replicas) {
  ElasticOptions o;
  o.replica = replica;
  o.replicas = replicas;
  o.store = StoreSpec::parse(store);
  o.join_timeout_s = 1;
  o.sync_timeout_s = 3;
  o.join_wait_s = 30;
  o.examples_per_step = 1;
  return o;
}

// One sync of replica r: delta filled with `value`, `local_steps` inner steps, a dense average as
// the reducer, the anchor `anchor`.
void sync(ElasticGroup& g, std::vector<float>& delta, std::int64_t step, std::int64_t local_steps,
          const std::vector<float>& anchor, std::vector<StateTensor> state = {},
          std::function<void(Communicator&)> reduce = {}) {
  ReplicaSync s;
  s.step = step;
  s.local_steps = local_steps;
  s.delta = delta;
  s.anchor = anchor;
  s.reducer_state = std::move(state);
  s.reduce = reduce ? std::move(reduce) : [&](Communicator& c) { c.all_reduce(std::span<float>(delta), ReduceOp::avg); };
  g.reduce(s);
}

void run(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      try {
        fn(i);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(i)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int i = 0; i < n; ++i) EXPECT_EQ(errors[static_cast<std::size_t>(i)], "") << "replica " << i;
}

TEST(Elastic, TheSyncIsTheExamplesWeightedMeanOverTheQuorum) {
  Dir dir("weighted");
  const std::vector<float> anchor(100, 0.5f);
  std::vector<std::vector<float>> out(3);
  run(3, [&](int i) {
    ElasticGroup g(options("file:" + dir.path, i, 3));
    std::vector<float> delta(100, static_cast<float>(i + 1));  // 1, 2, 3
    sync(g, delta, 9, /*local_steps=*/i == 2 ? 2 : 1, anchor);  // replica 2 counts twice
    out[static_cast<std::size_t>(i)] = delta;
    ASSERT_EQ(g.history().size(), 1u);
    EXPECT_EQ(g.history()[0].members, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(g.last_quorum_size(), 3);
    EXPECT_GT(g.bytes().sent, 0u);
  });
  for (const auto& d : out) {
    ASSERT_EQ(d.size(), 100u);
    EXPECT_NEAR(d[0], (1.0 + 2.0 + 2 * 3.0) / 4.0, 1e-6);
    EXPECT_EQ(d, out[0]);  // the same bits on every replica
  }
}

TEST(Elastic, AMemberThatFailsMidSyncIsDroppedAndTheSyncRetriedFromTheSameInputs) {
  Dir dir("retry");
  const std::vector<float> anchor(10, 0.0f);
  std::vector<std::vector<float>> out(3);
  std::vector<float> residual0(4, 0.0f), residual1(4, 0.0f);
  run(3, [&](int i) {
    ElasticGroup g(options("file:" + dir.path, i, 3));
    std::vector<float> delta(10, static_cast<float>(10 * (i + 1)));  // 10, 20, 30
    if (i == 2) {  // it dies in the reduction, connected but before sending a byte
      EXPECT_THROW(sync(g, delta, 4, 1, anchor, {}, [](Communicator&) { throw std::runtime_error("process died"); }),
                   std::runtime_error);
      return;
    }
    std::vector<float>& residual = i == 0 ? residual0 : residual1;
    // The reducer's state moves with every attempt (as error feedback would); the retry must see
    // it as it was before the sync.
    sync(g, delta, 4, 1, anchor, {{"residual", residual}}, [&](Communicator& c) {
      for (float& x : residual) x += 1.0f;
      c.all_reduce(std::span<float>(delta), ReduceOp::avg);
    });
    out[static_cast<std::size_t>(i)] = delta;
    ASSERT_EQ(g.history().size(), 1u);
    EXPECT_EQ(g.history()[0].members, (std::vector<int>{0, 1}));
    EXPECT_EQ(g.history()[0].attempts, 2);
    EXPECT_EQ(g.history()[0].left, (std::vector<int>{2}));
  });
  EXPECT_EQ(out[0], std::vector<float>(10, 15.0f));  // (10 + 20) / 2: the first attempt's scaling undone
  EXPECT_EQ(out[1], out[0]);
  EXPECT_EQ(residual0, std::vector<float>(4, 1.0f));  // once: the failed attempt's change was restored
  EXPECT_EQ(residual1, std::vector<float>(4, 1.0f));
}

TEST(Elastic, AReplicaWhoseAnchorIsBehindIsDropped) {
  Dir dir("stale");
  std::vector<std::string> dropped(3);
  run(3, [&](int i) {
    ElasticGroup g(options("file:" + dir.path, i, 3));
    const std::vector<float> anchor(10, i == 1 ? 1.0f : 0.0f);  // replica 1 missed a sync
    std::vector<float> delta(10, 1.0f);
    try {
      sync(g, delta, 4, 1, anchor);
    } catch (const ReplicaDropped& e) {
      dropped[static_cast<std::size_t>(i)] = e.what();
      EXPECT_EQ(g.dropped(), e.what());
      return;
    }
    EXPECT_EQ(g.history().at(0).members, (std::vector<int>{0, 2}));
  });
  EXPECT_EQ(dropped[0], "");
  EXPECT_NE(dropped[1].find("replica 1 was left out of round 0"), std::string::npos) << dropped[1];
  EXPECT_NE(dropped[1].find("its anchor or aggregation rule differs"), std::string::npos) << dropped[1];
  EXPECT_EQ(dropped[2], "");
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Replica 2 joins after the first sync and receives replica 0's checkpoint after the second, over
// a store signed with `secret` ("": unsigned).
void join_after_the_first_sync(const std::string& name, const std::string& secret) {
  Dir dir(name), donor_root(name + "-donor"), joiner_root(name + "-joiner");
  const std::string store = "file:" + dir.path + "/store";
  auto options = [&](const std::string& spec, int replica, int replicas) {
    ElasticOptions o = laconic::options(spec, replica, replicas);
    o.secret = secret;
    o.max_state_bytes = 1 << 20;
    return o;
  };
  // The donor's "checkpoint": two files.
  const std::string ck = donor_root.path + "/step-000000008";
  fs::create_directories(ck);
  std::ofstream(ck + "/MANIFEST.json") << "{\"step\": 8}\n";
  std::string shard(100000, '\0');
  for (std::size_t k = 0; k < shard.size(); ++k) shard[k] = static_cast<char>(k * 7);
  std::ofstream(ck + "/rank-0.bin", std::ios::binary) << shard;
  {  // Before any sync, a starting replica has nothing to join: it starts as a member.
    ElasticGroup g(options(store, 2, 3));
    EXPECT_FALSE(g.join(joiner_root.path));
  }
  const std::vector<float> anchor(10, 0.0f);
  std::string joined;
  run(3, [&](int i) {
    ElasticGroup g(options(store, i, 3));
    if (i == 2) {  // it came back after the first sync: it joins
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      joined = g.join(joiner_root.path).value_or("");
      return;
    }
    std::vector<float> delta(10, 1.0f);
    sync(g, delta, 3, 4, anchor);  // replica 2 absent: a quorum of two after join_timeout_s
    EXPECT_EQ(g.history().back().members, (std::vector<int>{0, 1}));
    EXPECT_FALSE(g.donation_pending());
    std::this_thread::sleep_for(std::chrono::milliseconds(4000));  // replica 2 announces itself meanwhile
    sync(g, delta, 7, 4, anchor);
    EXPECT_EQ(g.history().back().joiners, (std::vector<int>{2}));
    EXPECT_EQ(g.history().back().joined, (std::vector<int>{2}));
    EXPECT_EQ(g.donation_pending(), i == 0);  // the lowest member gives the state
    if (g.donation_pending()) g.donate(ck);
  });
  ASSERT_EQ(joined, joiner_root.path + "/step-000000008");
  EXPECT_EQ(read(joined + "/MANIFEST.json"), "{\"step\": 8}\n");
  EXPECT_EQ(read(joined + "/rank-0.bin"), shard);
  // Signed, the keys are not where an unsigned store would look.
  EXPECT_EQ(KeyStore::open(StoreSpec::parse(store))->find("round.0.quorum").has_value(), secret.empty());
}

TEST(Elastic, AJoinerReceivesTheDonorsCheckpointAfterTheNextSync) { join_after_the_first_sync("join", ""); }

TEST(Elastic, AJoinerReceivesTheDonorsCheckpointOverASignedStore) { join_after_the_first_sync("join-signed", "s3cret"); }

// A writer of the store without the secret sets every coming round's outcome to "retry" first
// (set-once: the first writer wins): that fails an unsigned run's sync after max_attempts rounds;
// over a signed store the forged keys are not where the replicas look, and the sync commits.
TEST(Elastic, AForgedOutcomeFailsAnUnsignedSyncAndNotASignedOne) {
  for (const std::string secret : {"", "s3cret"}) {
    Dir dir("forged" + secret);
    const std::string store = "file:" + dir.path + "#run-a";
    auto forger = KeyStore::open(StoreSpec::parse(store));
    for (int r = 0; r < 10; ++r) forger->create("round." + std::to_string(r) + ".outcome", "retry");
    const std::vector<float> anchor(10, 0.0f);
    std::vector<std::string> errors(2);
    std::vector<std::size_t> syncs(2);
    std::vector<std::thread> ts;
    for (int i = 0; i < 2; ++i)
      ts.emplace_back([&, i] {
        try {
          ElasticOptions o = options(store, i, 2);
          o.secret = secret;
          ElasticGroup g(o);
          std::vector<float> delta(10, 1.0f);
          sync(g, delta, 3, 4, anchor);
          syncs[static_cast<std::size_t>(i)] = g.syncs();
        } catch (const Error& e) {
          errors[static_cast<std::size_t>(i)] = e.what();
        }
      });
    for (auto& t : ts) t.join();
    for (int i = 0; i < 2; ++i) {
      const std::size_t k = static_cast<std::size_t>(i);
      if (secret.empty()) {
        EXPECT_NE(errors[k].find("failed in 3 rounds (elastic.max_attempts)"), std::string::npos) << errors[k];
      } else {
        EXPECT_EQ(errors[k], "") << "replica " << i;
        EXPECT_EQ(syncs[k], 1u) << "replica " << i;
      }
    }
  }
}

TEST(Elastic, AReplicaComingBackAfterTheEndLearnsTheRunIsOver) {
  Dir dir("finished");
  const std::string store = "file:" + dir.path;
  const std::vector<float> anchor(10, 0.0f);
  run(2, [&](int i) {  // replicas 0 and 1 of 3 sync once (2 never came) and finish
    ElasticGroup g(options(store, i, 3));
    std::vector<float> delta(10, 1.0f);
    sync(g, delta, 3, 4, anchor);
    g.finished();
  });
  ElasticGroup late(options(store, 2, 3));
  EXPECT_THROW(late.join(dir.path + "/ck"), RunFinished);
}

// ---- recovery from correlated failure, min_quorum, the store's bounds ----

// A "checkpoint" directory of one file under root.
std::string checkpoint(const std::string& root, std::int64_t step, const std::string& body) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%09lld", static_cast<long long>(step));
  const std::string dir = root + "/" + name;
  fs::create_directories(dir);
  std::ofstream(dir + "/rank-0.bin", std::ios::binary) << body;
  return dir;
}

TEST(Elastic, ReplicasWithNoLiveMemberRecoverFromTheCheckpointMostOfThemHold) {
  Dir dir("recover"), r0("recover-0"), r1("recover-1"), r2("recover-2");
  const std::string store = "file:" + dir.path + "/store";
  KeyStore::open(StoreSpec::parse(store))->put("head", "6");  // the run had committed round 6, then every replica died
  // Replicas 0 and 1 hold theta_global "A" (at steps 40 and 35: the same anchor mid-period),
  // replica 2 an older "B" at step 20: A is the run's; 2 receives replica 0's checkpoint.
  const std::vector<HeldCheckpoint> held = {{checkpoint(r0.path, 40, "zero at 40"), 40, "A"},
                                            {checkpoint(r1.path, 35, "one at 35"), 35, "A"},
                                            {checkpoint(r2.path, 20, "two at 20"), 20, "B"}};
  const std::vector<std::string> roots = {r0.path, r1.path, r2.path};
  std::vector<std::string> resumed(3);
  Stopwatch t;
  run(3, [&](int i) {
    ElasticGroup g(options(store, i, 3));
    resumed[static_cast<std::size_t>(i)] = g.join(roots[static_cast<std::size_t>(i)], held[static_cast<std::size_t>(i)]).value_or("");
  });
  EXPECT_LT(t.seconds(), 10.0);  // all three came: no waiting for join_timeout_s or a heartbeat
  EXPECT_EQ(resumed[0], held[0].dir);
  EXPECT_EQ(resumed[1], held[1].dir);
  EXPECT_EQ(resumed[2], r2.path + "/step-000000040");
  EXPECT_EQ(read(resumed[2] + "/rank-0.bin"), "zero at 40");
  // The recovery is round 7 (the first after the head), committed as written.
  auto s = KeyStore::open(StoreSpec::parse(store));
  EXPECT_EQ(s->find("round.7.outcome").value_or(""), "commit");
  EXPECT_EQ(s->find("head").value_or(""), "7");
}

TEST(Elastic, AMinorityNeverSyncsAsTheRun) {
  Dir dir("minority");
  const std::string store = "file:" + dir.path;
  ElasticOptions o = options(store, 0, 3);  // min_quorum 0: a majority, 2
  o.join_wait_s = 2;
  ElasticGroup g(o);
  std::vector<float> delta(10, 1.0f);
  const std::vector<float> anchor(10, 0.0f);
  std::string error;
  try {
    sync(g, delta, 3, 4, anchor);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("1 replica(s) came within 2 s (elastic.join_wait_s), fewer than elastic.min_quorum = 2"),
            std::string::npos) << error;
  EXPECT_EQ(g.syncs(), 0u);
  o.min_quorum = 1;  // said so: one replica may go on alone
  o.store = StoreSpec::parse(store + "#alone");
  ElasticGroup alone(o);
  sync(alone, delta, 3, 4, anchor);
  EXPECT_EQ(alone.history().at(0).members, (std::vector<int>{0}));
}

// A replica asked to stop (a signal the supervisor forwarded to every replica) while it waits at a
// sync for a quorum does not wait join_wait_s for replicas that stopped before the sync: it stops
// at once, saying why. Without the request it waits (the case above).
TEST(Elastic, AReplicaAskedToStopDoesNotWaitForAQuorumThatStopped) {
  Dir dir("stop_wait");
  ElasticOptions o = options("file:" + dir.path, 0, 3);  // a majority: 2
  o.join_wait_s = 60;
  std::atomic<bool> asked{false};
  o.stop_requested = [&] { return asked.load(); };
  ElasticGroup g(o);
  std::vector<float> delta(10, 1.0f);
  const std::vector<float> anchor(10, 0.0f);
  std::thread signal([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    asked = true;  // as a signal handler sets SignalStop's flag
  });
  Stopwatch t;
  std::string error;
  try {
    sync(g, delta, 3, 4, anchor);
  } catch (const Error& e) {
    error = e.what();
  }
  signal.join();
  EXPECT_LT(t.seconds(), 20.0);
  EXPECT_NE(error.find("asked to stop while 1 replica(s) waited for elastic.min_quorum = 2"), std::string::npos) << error;
  EXPECT_EQ(g.syncs(), 0u);
}

TEST(Elastic, TheStoreStaysBoundedOver500Syncs) {
  Dir dir("bounded");
  const std::string store = "file:" + dir.path;
  const std::vector<float> anchor(10, 0.0f);
  auto files = [&] {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++n;
    return n;
  };
  std::size_t after_50 = 0;
  run(2, [&](int i) {
    ElasticGroup g(options(store, i, 2));
    for (int k = 0; k < 500; ++k) {
      std::vector<float> delta(10, 1.0f);
      sync(g, delta, 4 * k + 3, 4, anchor);
      if (i == 0 && k == 49) after_50 = files();
    }
    EXPECT_EQ(g.syncs(), 500u);
  });
  const std::size_t after_500 = files();
  // Every sync leaves its keys (hellos, quorum, oks, outcome, gloo's) but only the last 16 rounds
  // stay: the store is no larger after 500 syncs than after 50.
  EXPECT_LE(after_500, after_50 + 20) << after_50;
  EXPECT_LT(after_500, 400u);
  auto s = KeyStore::open(StoreSpec::parse(store));
  EXPECT_FALSE(s->find("round.0.quorum"));
  EXPECT_FALSE(s->find("round.480.quorum"));
  EXPECT_TRUE(s->find("round.499.quorum"));
  EXPECT_EQ(s->find("head").value_or(""), "499");
}

// ---- validated contributions and robust aggregation ----

// Five rows of three coordinates, each coordinate's values a permutation of {1, 2, 3, 4, 100}
// (one outlier): the median is 3; the 0.2-trimmed mean drops one at each end: (2 + 3 + 4) / 3 = 3;
// the mean is 22.
TEST(ElasticAggregate, MedianAndTrimmedMeanAgainstClosedForms) {
  const std::vector<float> rows = {1, 100, 3,  2, 4, 100,  3, 1, 2,  4, 3, 1,  100, 2, 4};
  const std::vector<std::size_t> all = {0, 1, 2, 3, 4};
  std::vector<double> scratch;
  std::vector<float> out(3);
  const AggregateOptions median{Aggregate::median}, trimmed{Aggregate::trimmed_mean, 0.2}, mean{Aggregate::mean};
  EXPECT_EQ(trim_count(median, 5), 2u);
  EXPECT_EQ(trim_count(trimmed, 5), 1u);
  trimmed_mean(rows, all, trim_count(median, 5), out, scratch);
  EXPECT_EQ(out, std::vector<float>(3, 3.0f));
  trimmed_mean(rows, all, trim_count(trimmed, 5), out, scratch);
  EXPECT_EQ(out, std::vector<float>(3, 3.0f));
  trimmed_mean(rows, all, trim_count(mean, 5), out, scratch);
  EXPECT_EQ(out, std::vector<float>(3, 22.0f));
  // Four rows (the last one left out): {1, 2, 4, 100} per coordinate, even: the median is the mean
  // of the two middle values, (2 + 4) / 2, as is the 0.25-trimmed mean.
  const std::vector<float> four = {1, 100, 4,  2, 4, 100,  4, 1, 2,  100, 2, 1,  7, 7, 7};
  const std::vector<std::size_t> first4 = {0, 1, 2, 3};
  trimmed_mean(four, first4, trim_count(median, 4), out, scratch);
  EXPECT_EQ(out, std::vector<float>(3, 3.0f));
  trimmed_mean(four, first4, trim_count({Aggregate::trimmed_mean, 0.25}, 4), out, scratch);
  EXPECT_EQ(out, std::vector<float>(3, 3.0f));
  // Only the rows listed count: rows 0, 1 and 4 give {1, 2, 7}, {100, 4, 7}, {4, 100, 7}.
  const std::vector<std::size_t> some = {0, 1, 4};
  trimmed_mean(four, some, trim_count(mean, 3), out, scratch);
  EXPECT_EQ(out, (std::vector<float>{10.0f / 3, 37.0f, 37.0f}));
  trimmed_mean(four, some, trim_count(median, 3), out, scratch);
  EXPECT_EQ(out, (std::vector<float>{2, 7, 7}));
  double v[] = {5, 1, 4, 2};
  EXPECT_EQ(median_of(v), 3.0);
}

// Norms {1, 2, 40, 3}: the median is 2.5, so with max_norm_ratio 2 the bound is 5 (only the 40
// exceeds it); over rows 0, 2 and 3 only, the median is 3 and the bound 6.
TEST(ElasticAggregate, MaxNormRatioBoundIsTheRatioTimesTheMedianMembersNorm) {
  const std::vector<double> norms = {1, 2, 40, 3};
  std::vector<double> scratch;
  EXPECT_EQ(norm_bound(norms, std::vector<std::size_t>{0, 1, 2, 3}, 2.0, scratch), 5.0);
  EXPECT_EQ(norm_bound(norms, std::vector<std::size_t>{0, 2, 3}, 2.0, scratch), 6.0);
  EXPECT_FALSE(std::isfinite(l2_norm(std::vector<float>{1, std::numeric_limits<float>::quiet_NaN()})));
  EXPECT_EQ(l2_norm(std::vector<float>{3, 4}), 5.0);
}

// Replica 2's contribution is bad in one way; replicas 0 and 1 average without it (values 1 and 2:
// 1.5) and it is dropped with the reason.
void expect_dropped_for(const std::string& name, const std::string& reason, std::size_t bad_size, float bad_value,
                        std::int64_t bad_local_steps) {
  Dir dir(name);
  const std::vector<float> anchor(10, 0.0f);
  std::vector<std::vector<float>> out(3);
  std::string dropped;
  run(3, [&](int i) {
    ElasticOptions o = options("file:" + dir.path, i, 3);
    o.max_local_steps = 4;
    ElasticGroup g(o);
    const bool bad = i == 2;
    std::vector<float> delta(bad ? bad_size : 10, bad ? bad_value : static_cast<float>(i + 1));
    try {
      sync(g, delta, 3, bad ? bad_local_steps : 4, anchor);
    } catch (const ReplicaDropped& e) {
      dropped = e.what();
      return;
    }
    out[static_cast<std::size_t>(i)] = delta;
    EXPECT_EQ(g.history().at(0).members, (std::vector<int>{0, 1}));
    EXPECT_EQ(g.history().at(0).left, (std::vector<int>{2}));
  });
  EXPECT_EQ(out[0], std::vector<float>(10, 1.5f));
  EXPECT_EQ(out[1], out[0]);
  EXPECT_NE(dropped.find("replica 2 was left out of round 0"), std::string::npos) << dropped;
  EXPECT_NE(dropped.find(reason), std::string::npos) << dropped;
}

TEST(ElasticAggregate, ANonFiniteMemberIsDropped) {
  expect_dropped_for("nan", "its pseudo-gradient is not finite", 10, std::numeric_limits<float>::quiet_NaN(), 4);
}

TEST(ElasticAggregate, AWrongSizeMemberIsDropped) {
  expect_dropped_for("size", "its pseudo-gradient has 9 values, expected 10", 9, 3.0f, 4);
}

TEST(ElasticAggregate, AMemberClaimingMoreExamplesThanItsPeriodAllowsIsDropped) {
  // Five steps' examples where the longest period is 4: it would outweigh the others.
  expect_dropped_for("examples", "it claims 5 examples since its last sync, expected 1 to 4", 10, 3.0f, 5);
}

// Three members sending 1, 2 and 1000 (per coordinate times 1 + k / 10): each rule's result, the
// same bits on every member.
std::vector<std::vector<float>> aggregate_three(const std::string& name, AggregateOptions a,
                                                double contributed_by_2 = 1) {
  Dir dir(name);
  const std::vector<float> anchor(10, 0.0f);
  std::vector<std::vector<float>> out(3);
  run(3, [&](int i) {
    ElasticOptions o = options("file:" + dir.path, i, 3);
    o.aggregate = a;
    ElasticGroup g(o);
    std::vector<float> delta(10);
    for (std::size_t k = 0; k < delta.size(); ++k)
      delta[k] = (i == 2 ? 1000.0f : static_cast<float>(i + 1)) * (1.0f + static_cast<float>(k) / 10);
    sync(g, delta, 3, 1, anchor);
    out[static_cast<std::size_t>(i)] = delta;
    EXPECT_EQ(g.history().at(0).members, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(g.history().at(0).contributed_steps, i == 2 ? contributed_by_2 : 1.0);
  });
  EXPECT_EQ(out[1], out[0]);
  EXPECT_EQ(out[2], out[0]);
  return out;
}

TEST(ElasticAggregate, TheMedianOfThreeMembersIgnoresTheOutlier) {
  const auto out = aggregate_three("median", {Aggregate::median});
  for (std::size_t k = 0; k < 10; ++k) EXPECT_FLOAT_EQ(out[0][k], 2.0f * (1.0f + static_cast<float>(k) / 10));
}

// max_norm_ratio 2: norms are proportional to 1, 2 and 1000; the median member's is the 2's, so
// the bound is 4 of it and the outlier is left out: (1 + 2) / 2 per unit, its member still in the
// quorum with no steps contributed. The same through the strategy's reducer (mean: by the norms
// the hellos declared, the outlier sending zeros) and through the gather (trimmed_mean, nothing
// trimmed of 2: by the received values).
TEST(ElasticAggregate, MaxNormRatioLeavesTheOutlierOutInBothPaths) {
  const auto reduced = aggregate_three("norm-mean", {Aggregate::mean, 0.25, 2.0}, 0.0);
  const auto gathered = aggregate_three("norm-gather", {Aggregate::trimmed_mean, 0.25, 2.0}, 0.0);
  for (std::size_t k = 0; k < 10; ++k) {
    const float unit = 1.0f + static_cast<float>(k) / 10;
    EXPECT_FLOAT_EQ(reduced[0][k], 1.5f * unit) << k;
    EXPECT_FLOAT_EQ(gathered[0][k], 1.5f * unit) << k;
  }
}

// A member with another rule is out of step (the collectives would differ): dropped.
TEST(ElasticAggregate, AMemberWithAnotherRuleIsDropped) {
  Dir dir("rule");
  const std::vector<float> anchor(10, 0.0f);
  std::string dropped;
  run(3, [&](int i) {
    ElasticOptions o = options("file:" + dir.path, i, 3);
    if (i == 2) o.aggregate.rule = Aggregate::median;
    ElasticGroup g(o);
    std::vector<float> delta(10, 1.0f);
    try {
      sync(g, delta, 3, 1, anchor);
    } catch (const ReplicaDropped& e) {
      dropped = e.what();
      return;
    }
    EXPECT_EQ(g.history().at(0).members, (std::vector<int>{0, 1}));
  });
  EXPECT_NE(dropped.find("replica 2 was left out of round 0"), std::string::npos) << dropped;
  EXPECT_NE(dropped.find("its anchor or aggregation rule differs"), std::string::npos) << dropped;
}

}  // namespace
}  // namespace laconic
