// The run ledger (framework/train/ledger.h): the counters a run reports and checkpoints, across a
// resume. Its totals after a resume are the checkpoint's plus exactly what the resumed process
// counted since (not its start, not what it counted before the load).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

#include "collectives/threads/threads_communicator.h"
#include "compression/reducer.h"
#include "framework/sync/sync_strategy.h"
#include "framework/train/checkpoint.h"
#include "framework/train/ledger.h"
#include "tests/sync/small_store.h"

namespace laconic {
namespace {

RunCounters sample(std::uint64_t base) {
  RunCounters c;
  c.bytes = {base + 1, base + 2, base + 3};
  std::uint64_t v = base + 4;
  for (auto count : kReducerCounts) c.reducer.*count = v++;
  return c;
}

TEST(RunCounters, ValuesRoundTripEveryField) {
  const RunCounters c = sample(100);
  const auto v = c.values();
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], 101 + i) << "value " << i;
  EXPECT_EQ(RunCounters::from_values(v).values(), v);
}

TEST(RunCounters, SubtractionUndoesAddition) {
  const RunCounters a = sample(1000), b = sample(7);
  EXPECT_EQ(((a + b) - b).values(), a.values());
  EXPECT_EQ((a - a).values(), RunCounters{}.values());
}

// Two ranks of dense data parallelism: one reduction, a checkpoint, then a "resumed process" (a
// fresh world and strategy, whose start broadcast counts bytes of its own) loads it at step 5.
TEST(RunLedger, AResumeContinuesFromTheCheckpointsTotals) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("ledger_test_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  auto one_step = [](SyncStrategy& sync, ParamStore& s, Communicator& comm) {
    for (float& g : s.grads()) g = static_cast<float>(comm.rank() + 1);
    sync.after_backward(0);
  };
  auto make_sync = [] { return std::make_unique<DataParallel>(DataParallelOptions{25.0, false}, std::make_unique<DenseReducer>()); };
  std::vector<RunCounters> saved(2), step_cost(2);
  run_threads(2, [&](Communicator& comm) {
    ParamStore s = small_store();
    auto sync = make_sync();
    RunLedger ledger(comm, nullptr, *sync, nullptr);
    sync->start(s, comm);
    const RunCounters started = ledger.totals();
    EXPECT_GT(started.bytes.sent + started.bytes.recv, 0u);  // a fresh run counts its start broadcast
    one_step(*sync, s, comm);
    const auto r = static_cast<std::size_t>(comm.rank());
    step_cost[r] = ledger.totals() - started;
    EXPECT_GT(step_cost[r].bytes.sent, 0u);
    EXPECT_EQ(step_cost[r].reducer.calls, 1u);
    saved[r] = ledger.totals();
    ShardWriter w;
    ledger.save(w);
    w.write(dir + "/rank-" + std::to_string(comm.rank()) + ".bin");
  });
  run_threads(2, [&](Communicator& comm) {
    ParamStore s = small_store();
    auto sync = make_sync();
    RunLedger ledger(comm, nullptr, *sync, nullptr);
    sync->start(s, comm);  // the resumed process's own start: not counted again
    const auto r = static_cast<std::size_t>(comm.rank());
    EXPECT_FALSE(ledger.resumed());
    ledger.load(ShardReader(dir + "/rank-" + std::to_string(comm.rank()) + ".bin"), 5);
    EXPECT_TRUE(ledger.resumed());
    EXPECT_EQ(ledger.first_step(), 5);
    EXPECT_EQ(ledger.totals().values(), saved[r].values());
    one_step(*sync, s, comm);
    EXPECT_EQ(ledger.totals().values(), (saved[r] + step_cost[r]).values());
  });
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace laconic
