// Sharded optimizer state (sync.shard = "optimizer", ZeRO-1, framework/sync/zero.h): shards tile
// the flat buffer; a sharded run trains as the unsharded one does (bit for bit where the
// reduction order is the same, within float rounding where LAMB's and LARS's norms of a cut tensor
// are added from two ranks' partial sums); each rank holds 1/N of the optimizer state; the bytes
// on the wire are the all-reduce's; a sharded run resumes bit for bit; what sharding cannot do yet
// is refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "core/check.h"
#include "framework/recipe/recipe.h"
#include "framework/sync/zero.h"
#include "framework/train/trainer.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::blobs;
using testing::same_bits;

TrainData synthetic() { return image_data(blobs(600, 12, 5, 1), blobs(200, 12, 5, 2)); }

TEST(ShardRange, TilesTheBufferTheLastRankTakingTheRest) {
  for (const std::size_t size : {0u, 5u, 10u, 1000u})
    for (int n = 1; n <= 7; ++n) {
      std::size_t next = 0;
      for (int r = 0; r < n; ++r) {
        const ShardRange s = shard_range(size, r, n);
        EXPECT_EQ(s.begin, next);
        EXPECT_EQ(s.size(), r + 1 < n ? size / n : size - (size / n) * (n - 1));
        next = s.end;
      }
      EXPECT_EQ(next, size);
    }
}

TEST(ShardStore, CutsTensorsAtTheRangeAndKeepsTheirGroups) {
  ParamStore whole;
  whole.add("w", {4, 5}, ParamGroup::decay, ParamKind::hidden_matrix);  // [0, 20)
  whole.add("b", {5}, ParamGroup::no_decay);                            // [20, 25)
  whole.add("v", {3, 2}, ParamGroup::decay);                            // [25, 31)
  whole.finalize();
  std::vector<std::size_t> tensor_of;
  const ParamStore s = make_shard_store(whole, {18, 27}, tensor_of);
  ASSERT_EQ(s.views().size(), 3u);
  EXPECT_EQ(s.size(), 9u);
  EXPECT_EQ(tensor_of, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(s.view(0).numel, 2u);  // the last two elements of w, a piece: one dimension, no matrix
  EXPECT_EQ(s.view(0).shape, (std::vector<std::int64_t>{2}));
  EXPECT_EQ(s.view(0).kind, ParamKind::other);
  EXPECT_EQ(s.view(1).shape, (std::vector<std::int64_t>{5}));  // b whole
  EXPECT_EQ(s.view(1).group, ParamGroup::no_decay);
  EXPECT_EQ(s.view(2).numel, 2u);
  EXPECT_EQ(s.view(2).group, ParamGroup::decay);
}

class Shard : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("laconic_shard_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  TrainSummary run(const Recipe& r, const std::string& name, const std::string& resume = "") {
    TrainOptions o;
    o.run_dir = (dir_ / name).string();
    o.resume = resume;
    return train(r, data_, o);
  }
  std::filesystem::path dir_;
  TrainData data_ = synthetic();
};

// 12 -> 15 -> 5: tensors of 180, 15, 75 and 5 floats (275 = 5 x 55); every world size here but
// 1 cuts some.
constexpr std::size_t kParams = 275;

Recipe small(const OptimizerName& optimizer, int world, ShardKind shard) {
  Recipe r;
  r.run.seed = 11;
  r.model.hidden = {15};
  r.train.micro_batch = 8;
  r.train.steps = 12;
  r.train.log_every = 6;
  r.optimizer.name = optimizer;
  r.optimizer.lr = optimizer == "sgd" || optimizer == "lars" ? 0.05 : 0.01;
  r.optimizer.weight_decay = 0.01;
  r.distributed.world_size = world;
  r.distributed.timeout_s = 30;
  r.sync.shard = shard;
  return r;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(static_cast<double>(a[i]) - b[i]));
  return d;
}

// On 5 ranks the reduce-scatter cuts the buffer where the all-reduce's ring does (275 = 5 x 55,
// one bucket), so every element's average is added in the same order: element-wise optimizers
// step the same bits, and LAMB and LARS too up to a cut tensor's norm, added from two ranks'
// partial sums. On 3 and 4 ranks the cuts differ (the last rank's few extra elements are reduced
// on their own): the same run up to float rounding in the order of the sums.
TEST_F(Shard, TrainsAsTheUnshardedRun) {
  for (const OptimizerName opt : {"sgd", "adamw", "lamb", "lars"})
    for (const int world : {1, 3, 4, 5}) {
      SCOPED_TRACE(opt.value + " on " + std::to_string(world) + " ranks");
      Recipe whole = small(opt, world, ShardKind::none);
      if (opt == "adamw") whole.optimizer.grad_clip = 0.5;  // the global norm from the shards' squares
      Recipe sharded = whole;
      sharded.sync.shard = ShardKind::optimizer;
      const TrainSummary a = run(whole, opt.value + std::to_string(world) + "_whole");
      const TrainSummary b = run(sharded, opt.value + std::to_string(world) + "_sharded");
      const bool same_order = world == 1 || (world == 5 && (opt == "sgd" || opt == "adamw"));
      if (same_order) {
        EXPECT_TRUE(same_bits(a.final_params, b.final_params));
      } else {
        EXPECT_LE(max_abs_diff(a.final_params, b.final_params), 1e-5);
      }
      EXPECT_NEAR(a.final_loss, b.final_loss, 1e-5);
    }
}

// Rank 0 holds 1/N of the optimizer state (AdamW: two moments over its 275 / N elements, and the
// step count), the shard's weights and gradients as buffers; the wire carries the all-reduce's
// bytes exactly where the shards are equal, and where they are not, a few more: the last rank's
// leftover elements (fewer than N) reduced on their own.
TEST_F(Shard, HoldsOneNthOfTheStateAndSendsTheAllReducesBytes) {
  for (const int n : {4, 5}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    const TrainSummary a = run(small("adamw", n, ShardKind::none), "whole" + std::to_string(n));
    const TrainSummary b = run(small("adamw", n, ShardKind::optimizer), "sharded" + std::to_string(n));
    const std::uint64_t q = kParams / static_cast<std::size_t>(n), step_count = *a.memory_optimizer - 2 * 4 * kParams;
    EXPECT_EQ(*b.memory_optimizer, 2 * 4 * q + step_count);
    EXPECT_EQ(*b.memory_buffers, 2 * 4 * q);
    EXPECT_EQ(*a.memory_buffers, 0u);
    EXPECT_EQ(*b.memory_weights, *a.memory_weights);
    if (kParams % static_cast<std::size_t>(n) == 0) {
      EXPECT_EQ(b.bytes_sent, a.bytes_sent);
    } else {  // at most 2 (N - 1) messages of the leftover's < N floats, per step
      EXPECT_GT(b.bytes_sent, a.bytes_sent);
      EXPECT_LE(b.bytes_sent - a.bytes_sent, 12u * 2 * (n - 1) * n * 4);
    }
  }
}

// DiLoCo across two groups of 2 (sync.intra), the inner AdamW sharded inside each group: it trains
// as the unsharded run (the group's reduce-scatter cuts where its ring all-reduce did: 275 = 2 x
// 137 + 1, the leftover reduced on its own, so up to rounding), each rank holds half the inner
// state, and the leaders' outer state is the unsharded one.
TEST_F(Shard, InsideTheGroupsOfDiloco) {
  const auto recipe = [](ShardKind shard) {
    Recipe r = small("adamw", 4, shard);
    r.sync.strategy = "diloco";
    r.sync.intra = IntraKind::allreduce;
    r.sync.diloco.period = 4;
    r.network.groups = 2;
    return r;
  };
  const TrainSummary a = run(recipe(ShardKind::none), "diloco_whole");
  const TrainSummary b = run(recipe(ShardKind::optimizer), "diloco_sharded");
  EXPECT_LE(max_abs_diff(a.final_params, b.final_params), 1e-5);
  EXPECT_NEAR(a.final_loss, b.final_loss, 1e-5);
  const std::uint64_t step_count = *a.memory_optimizer - 2 * 4 * kParams;
  EXPECT_EQ(*b.memory_optimizer, 2 * 4 * (kParams / 2) + step_count);
  EXPECT_EQ(*b.memory_strategy, *a.memory_strategy);
  EXPECT_GT(*a.memory_strategy, 0u);
}

TEST_F(Shard, ResumesBitForBit) {
  for (const OptimizerName opt : {"adamw", "lamb"}) {
    Recipe r = small(opt, 3, ShardKind::optimizer);
    r.checkpoint.every = 6;
    const TrainSummary whole = run(r, opt.value + "_whole");
    const TrainSummary resumed =
        run(r, opt.value + "_resumed", (dir_ / (opt.value + "_whole") / "checkpoints" / "step-000000006").string());
    EXPECT_EQ(resumed.first_step, 6);
    EXPECT_TRUE(same_bits(whole.final_params, resumed.final_params));
    EXPECT_EQ(whole.final_loss, resumed.final_loss);
  }
}

std::string refusal(const std::string& text) {
  try {
    parse_recipe(text, "r.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(ShardRecipe, RefusesWhatShardingCannotDoYetInOneLine) {
  const std::string base = "[train]\nsteps = 1\n[optimizer]\nname = \"adamw\"\n[sync]\nshard = \"optimizer\"\n";
  EXPECT_EQ(refusal(base), "");
  const Recipe r = parse_recipe(base, "r.toml");  // the resolved recipe says it, and reads back
  EXPECT_NE(to_toml(r).find("\nshard = \"optimizer\"\n"), std::string::npos);
  EXPECT_EQ(parse_recipe(to_toml(r), "r.toml"), r);
  const std::string diloco = refusal(base + "strategy = \"diloco\"\n");
  EXPECT_NE(diloco.find("r.toml:"), std::string::npos) << diloco;
  EXPECT_NE(diloco.find("sync.shard: expected \"none\" with sync.strategy = \"diloco\" and no sync.intra"),
            std::string::npos) << diloco;
  const std::string inside = "[train]\nsteps = 1\n[distributed]\nworld_size = 4\n[network]\ngroups = 2\n"
                             "[sync]\nshard = \"optimizer\"\nintra = \"allreduce\"\n";
  EXPECT_EQ(refusal(inside + "strategy = \"diloco\"\n"), "");
  EXPECT_NE(refusal(inside + "strategy = \"topk\"\n").find("needs a periodic strategy"), std::string::npos);
  EXPECT_NE(refusal("[train]\nsteps = 1\n[optimizer]\nname = \"muon\"\n[sync]\nshard = \"optimizer\"\n").find("Muon needs whole matrices"),
            std::string::npos);
  EXPECT_NE(refusal(base + "[sync.allreduce]\ndtype = \"bf16\"\n").find("sync.allreduce.dtype = \"bf16\""),
            std::string::npos);
  EXPECT_NE(refusal("[train]\nsteps = 1\n[sync]\nshard = \"gradients\"\n").find("sync.shard"), std::string::npos);
  for (const std::string& e : {diloco}) EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace
}  // namespace laconic
