#include "framework/recipe/recipe.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/check.h"

namespace laconic {
namespace {

namespace fs = std::filesystem;

class RecipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("laconic_recipe_") + info->name() + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes a recipe file and returns its path.
  std::string write(const std::string& text, const std::string& name = "r.toml") const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // The InputError message of load_recipe(path, overrides); fails the test when it succeeds.
  static std::string error_of(const std::string& path, const std::vector<std::string>& overrides = {}) {
    try {
      load_recipe(path, overrides);
    } catch (const InputError& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an InputError for " << path;
    return "";
  }

  fs::path dir_;
};

constexpr const char* kMinimal = "[train]\nsteps = 10\n";
constexpr const char* kTrainKeys = "steps, epochs, micro_batch, grad_accum, eval_every, log_every, noise_scale, trace, time_limit, precision, tensorboard";

TEST_F(RecipeTest, NearlyEmptyFileGivesDefaults) {
  const std::string path = write(kMinimal);
  const Recipe r = load_recipe(path);
  Recipe expected;
  expected.path = path;
  expected.train.steps = 10;
  EXPECT_EQ(r, expected);
  EXPECT_EQ(r.model.hidden, (std::vector<int>{512, 256}));
  EXPECT_EQ(r.distributed.backend, BackendKind::auto_);
  EXPECT_DOUBLE_EQ(r.optimizer.lr, 0.1);
}

TEST_F(RecipeTest, FullRecipeParses) {
  const Recipe r = load_recipe(write(R"(# every section
[run]
name = "big"
seed = 42
out_dir = "/tmp/out"

[model]
name = "mlp"
hidden = [1024, 64, 8]
activation = "gelu"
dropout = 0.25
layernorm = true

[data]
name = "fashion_mnist"
path = "/data/fm"

[train]
epochs = 2.5
micro_batch = 32
grad_accum = 4
eval_every = 100
log_every = 10

[optimizer]
name = "sgd"
lr = 1          # an integer is fine where a number is expected
momentum = 0.0
nesterov = false
weight_decay = 5e-4

[schedule]
warmup_steps = 500
decay = "cosine"
min_lr_ratio = 1

[distributed]
backend = "threads"
device = "cpu"
world_size = 1024
timeout_s = 30

[sync]
strategy = "allreduce"
bucket_mb = 0.5
)"));
  EXPECT_EQ(r.run.name, "big");
  EXPECT_EQ(r.run.seed, 42u);
  EXPECT_EQ(r.run.out_dir, "/tmp/out");
  EXPECT_EQ(r.model.hidden, (std::vector<int>{1024, 64, 8}));
  EXPECT_EQ(r.model.activation, MlpActivation::gelu);
  EXPECT_EQ(r.model.dropout, 0.25f);
  EXPECT_TRUE(r.model.layernorm);
  EXPECT_EQ(r.data.path, "/data/fm");
  EXPECT_EQ(r.train.steps, 0);
  EXPECT_EQ(r.train.epochs, 2.5);
  EXPECT_EQ(r.train.micro_batch, 32);
  EXPECT_EQ(r.train.grad_accum, 4);
  EXPECT_EQ(r.train.eval_every, 100);
  EXPECT_EQ(r.train.log_every, 10);
  EXPECT_EQ(r.optimizer.lr, 1.0);
  EXPECT_EQ(r.optimizer.momentum, 0.0);
  EXPECT_EQ(r.optimizer.weight_decay, 5e-4);
  EXPECT_EQ(r.schedule.warmup_steps, 500);
  EXPECT_EQ(r.schedule.decay, LrDecay::cosine);
  EXPECT_EQ(r.schedule.min_lr_ratio, 1.0);
  EXPECT_EQ(r.distributed.backend, BackendKind::threads);
  EXPECT_EQ(r.distributed.world_size, 1024);
  EXPECT_EQ(r.distributed.timeout_s, 30.0);
  EXPECT_EQ(r.sync.bucket_mb, 0.5);
}

TEST_F(RecipeTest, EnumNames) {
  EXPECT_STREQ(name_of(MlpActivation::gelu), "gelu");
  EXPECT_STREQ(name_of(LrDecay::cosine), "cosine");
  EXPECT_STREQ(name_of(BackendKind::auto_), "auto");
  EXPECT_STREQ(name_of(BackendKind::threads), "threads");
  EXPECT_STREQ(name_of(DeviceKind::cpu), "cpu");
  EXPECT_EQ(component_names(Component::model), (std::vector<std::string>{"mlp", "bert", "gpt"}));
  EXPECT_EQ(component_names(Component::reducer), (std::vector<std::string>{"allreduce", "topk", "powersgd", "onebit"}));
}

TEST_F(RecipeTest, UnknownKeySuggestsTheNearestKey) {
  const std::string path = write("[train]\nsteps = 1\n  micro_bach = 4\n");
  EXPECT_EQ(error_of(path), path + ":3:3: unknown key 'train.micro_bach' (did you mean "
                                   "'train.micro_batch'? valid keys in [train]: " + kTrainKeys + ")");
}

TEST_F(RecipeTest, KeyInTheWrongSectionSuggestsItsHome) {
  const std::string path = write("[train]\nsteps = 1\nlr = 0.5\n");
  EXPECT_EQ(error_of(path), path + ":3:1: unknown key 'train.lr' (did you mean 'optimizer.lr'? "
                                   "valid keys in [train]: " + kTrainKeys + ")");
}

TEST_F(RecipeTest, UnknownSection) {
  const std::string path = write("[train]\nsteps = 1\n\n[trian]\nsteps = 2\n");
  EXPECT_EQ(error_of(path), path + ":4:1: unknown section [trian] (did you mean [train]? valid "
                                   "sections: run, model, data, train, optimizer, schedule, "
                                   "distributed, sync, sync.allreduce, sync.topk, sync.powersgd, sync.onebit, sync.local_sgd, sync.diloco, "
                         "sync.streaming_diloco, sync.sparseloco, sync.demo, network, network.inter, checkpoint, guards, elastic, fault, "
                         "optimizer.muon, sync.sparta, sync.desloc, sync.noloco, sync.async_diloco)");
  const std::string top = write("steps = 1\n", "top.toml");
  const std::string msg = error_of(top);
  EXPECT_NE(msg.find(top + ":1:1: unknown key 'steps' (did you mean 'train.steps'?"), std::string::npos)
      << msg;
  const std::string scalar = write("train = 3\n", "scalar.toml");
  EXPECT_EQ(error_of(scalar), scalar + ":1:1: train: expected a table, got 3");
}

TEST_F(RecipeTest, WrongTypeNamesKeyExpectationAndValue) {
  const std::string path = write("[run]\nseed = 1\n\n[train]\nsteps = 1\n\nmicro_batch = \"64\"\n");
  EXPECT_EQ(error_of(path), path + ":7:1: train.micro_batch: expected an integer >= 1, got \"64\"");
  const std::string b = write("[model]\nlayernorm = 1\n[train]\nsteps = 1\n", "b.toml");
  EXPECT_EQ(error_of(b), b + ":2:1: model.layernorm: expected a boolean (true or false), got 1");
}

TEST_F(RecipeTest, FloatWhereIntegerExpectedIsRejected) {
  const std::string path = write("[train]\nsteps = 1\nmicro_batch = 64.0\n");
  EXPECT_EQ(error_of(path), path + ":3:1: train.micro_batch: expected an integer >= 1, got 64.0");
}

TEST_F(RecipeTest, IntegerWhereNumberExpectedIsAccepted) {
  const Recipe r = load_recipe(write("[train]\nepochs = 3\n[optimizer]\nlr = 2\n"));
  EXPECT_EQ(r.train.epochs, 3.0);
  EXPECT_EQ(r.optimizer.lr, 2.0);
}

TEST_F(RecipeTest, BadEnumListsTheChoices) {
  const std::string path = write("[train]\nsteps = 1\n[sync]\nstrategy = \"allreduc\"\n");
  EXPECT_EQ(error_of(path), path + ":4:1: sync.strategy: expected one of \"allreduce\", \"topk\", \"powersgd\", \"onebit\", \"local_sgd\", \"diloco\", \"streaming_diloco\", \"sparseloco\", \"demo\", \"sparta\", \"desloc\", \"noloco\", \"async_diloco\", got \"allreduc\"");
  const std::string b = write("[train]\nsteps = 1\n[distributed]\nbackend = \"nccl\"\n", "b.toml");
  EXPECT_EQ(error_of(b),
            b + ":4:1: distributed.backend: expected one of \"auto\", \"threads\", \"mpi\", \"gloo\", got \"nccl\"");
}

TEST_F(RecipeTest, OutOfRangeValuesAreRejected) {
  struct Case {
    const char* section;
    const char* line;
    const char* expected;  // the message tail after "KEY: "
  };
  const Case cases[] = {
      {"train", "micro_batch = 0", "train.micro_batch: expected an integer >= 1, got 0"},
      {"train", "grad_accum = 0", "train.grad_accum: expected an integer >= 1, got 0"},
      {"train", "log_every = 0", "train.log_every: expected an integer >= 1, got 0"},
      {"train", "eval_every = -1", "train.eval_every: expected an integer >= 0, got -1"},
      {"train", "steps = -1", "train.steps: expected an integer >= 0, got -1"},
      {"train", "epochs = -0.5", "train.epochs: expected a number >= 0, got -0.5"},
      {"train", "micro_batch = 3000000000", "train.micro_batch: expected an integer >= 1, got 3000000000"},
      {"distributed", "world_size = 0", "distributed.world_size: expected an integer in [1, 1024], got 0"},
      {"distributed", "world_size = 1025", "distributed.world_size: expected an integer in [1, 1024], got 1025"},
      {"distributed", "timeout_s = 0", "distributed.timeout_s: expected a number > 0, got 0"},
      {"optimizer", "lr = 0.0", "optimizer.lr: expected a number > 0, got 0.0"},
      {"optimizer", "lr = inf", "optimizer.lr: expected a number > 0, got inf"},
      {"optimizer", "lr = nan", "optimizer.lr: expected a number > 0, got nan"},
      {"optimizer", "momentum = 1.0", "optimizer.momentum: expected a number in [0, 1), got 1.0"},
      {"optimizer", "weight_decay = -0.1", "optimizer.weight_decay: expected a number >= 0, got -0.1"},
      {"model", "dropout = 1", "model.dropout: expected a number in [0, 1), got 1"},
      {"model", "hidden = []", "model.hidden: expected a non-empty array of integers >= 1, got []"},
      {"model", "hidden = [8, 0]", "model.hidden: expected a non-empty array of integers >= 1, got [8, 0]"},
      {"model", "hidden = [8, 2.0]", "model.hidden: expected a non-empty array of integers >= 1, got [8, 2.0]"},
      {"schedule", "warmup_steps = -1", "schedule.warmup_steps: expected an integer >= 0, got -1"},
      {"schedule", "min_lr_ratio = 1.5", "schedule.min_lr_ratio: expected a number in [0, 1], got 1.5"},
      {"sync", "bucket_mb = 0", "sync.bucket_mb: expected a number > 0, got 0"},
      {"sync", "strategy = \"dgc\"",
       "sync.strategy: expected one of \"allreduce\", \"topk\", \"powersgd\", \"onebit\", \"local_sgd\", \"diloco\", \"streaming_diloco\", \"sparseloco\", \"demo\", \"sparta\", \"desloc\", \"noloco\", \"async_diloco\", got \"dgc\""},
      {"sync.diloco", "period = 0", "sync.diloco.period: expected an integer >= 1, got 0"},
      {"sync.diloco", "reducer = \"diloco\"",
       "sync.diloco.reducer: expected one of \"allreduce\", \"topk\", \"powersgd\", \"onebit\", got \"diloco\""},
      {"sync", "intra = \"ring\"", "sync.intra: expected one of \"none\", \"allreduce\", got \"ring\""},
      {"sync.topk", "ratio = 1.5", "sync.topk.ratio: expected a number in (0, 1], got 1.5"},
      {"sync.topk", "ratio = 0", "sync.topk.ratio: expected a number in (0, 1], got 0"},
      {"sync.powersgd", "rank = 0", "sync.powersgd.rank: expected an integer in [1, 1024], got 0"},
      {"sync.onebit", "scale = \"max\"", "sync.onebit.scale: expected one of \"l2\", \"mean_abs\", got \"max\""},
      {"sync.allreduce", "dtype = \"int8\"",
       "sync.allreduce.dtype: expected one of \"fp32\", \"bf16\", \"fp16\", got \"int8\""},
      {"run", "seed = -1", "run.seed: expected an integer >= 0, got -1"},
      {"run", "name = \"\"", "run.name: expected a non-empty string, got \"\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    const std::string section = c.section;
    const std::string train = section == "train" ? "" : "[train]\nsteps = 1\n";
    const std::string path = write(train + "[" + section + "]\n" + c.line + "\n");
    const int line = section == "train" ? 2 : 4;
    EXPECT_EQ(error_of(path), path + ":" + std::to_string(line) + ":1: " + c.expected);
  }
}

TEST_F(RecipeTest, BoundaryValuesAreAccepted) {
  const Recipe r = load_recipe(write(
      "[train]\nsteps = 1\neval_every = 0\n[optimizer]\nmomentum = 0\n[model]\ndropout = 0\nhidden = [1]\n"
      "[schedule]\nmin_lr_ratio = 0\n[distributed]\nworld_size = 1\n"));
  EXPECT_EQ(r.optimizer.momentum, 0.0);
  EXPECT_EQ(r.model.hidden, std::vector<int>{1});
  EXPECT_EQ(r.distributed.world_size, 1);
}

TEST_F(RecipeTest, CrossFieldChecks) {
  const std::string none = write("[run]\nseed = 1\n[train]\nmicro_batch = 8\n");
  EXPECT_EQ(error_of(none), none + ":3:1: train.steps, train.epochs: expected train.steps >= 1 or "
                                   "train.epochs > 0, got both 0");
  const std::string explicit_zero = write("[train]\nsteps = 0\n", "zero.toml");
  EXPECT_EQ(error_of(explicit_zero).rfind(explicit_zero + ":2:1: train.steps, train.epochs:", 0), 0u);
  const std::string empty = write("", "empty.toml");
  EXPECT_EQ(error_of(empty).rfind(empty + ": train.steps, train.epochs:", 0), 0u);

  const std::string nesterov = write("[train]\nsteps = 1\n[optimizer]\nmomentum = 0.0\nnesterov = true\n",
                                     "nesterov.toml");
  EXPECT_EQ(error_of(nesterov), nesterov + ":5:1: optimizer.nesterov: expected optimizer.momentum > 0 "
                                           "with nesterov = true, got optimizer.momentum = 0.0");
  EXPECT_TRUE(load_recipe(nesterov, {"optimizer.momentum=0.9"}).optimizer.nesterov);
  // The override that broke the pair is the place to point at.
  const std::string ok = write("[train]\nsteps = 1\n[optimizer]\nnesterov = true\n", "ok.toml");
  EXPECT_EQ(error_of(ok, {"optimizer.momentum=0"}).rfind("--optimizer.momentum=0: optimizer.nesterov:", 0),
            0u);
}

TEST_F(RecipeTest, SyntaxErrorHasFileLineColumn) {
  const std::string path = write("[train]\nsteps = = 2\n");
  const std::string msg = error_of(path);
  EXPECT_EQ(msg.rfind(path + ":2:9: TOML syntax error: ", 0), 0u) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_THROW(parse_recipe("[train]\nsteps = 1\nsteps = 2\n", "dup.toml"), InputError);
}

TEST_F(RecipeTest, MissingFile) {
  const std::string path = (dir_ / "nope.toml").string();
  EXPECT_EQ(error_of(path), path + ": cannot open recipe: No such file or directory");
}

TEST_F(RecipeTest, OverridesWinOverTheFile) {
  const std::string path =
      write("[train]\nsteps = 10\nmicro_batch = 16\n[model]\nhidden = [4]\n[run]\nname = \"file\"\n");
  const Recipe r = load_recipe(path, {"train.micro_batch=128", "model.hidden=[256, 128]",
                                      "sync.strategy=allreduce", "distributed.backend=threads",
                                      "run.name=2024", "optimizer.lr=1", "data.path=/a b/c",
                                      "run.out_dir=\"quoted\"", "train.micro_batch=64"});
  EXPECT_EQ(r.train.steps, 10);
  EXPECT_EQ(r.train.micro_batch, 64);  // the last override of a key wins
  EXPECT_EQ(r.model.hidden, (std::vector<int>{256, 128}));
  EXPECT_EQ(r.distributed.backend, BackendKind::threads);
  EXPECT_EQ(r.run.name, "2024");  // not an integer: run.name is a string key
  EXPECT_EQ(r.optimizer.lr, 1.0);
  EXPECT_EQ(r.data.path, "/a b/c");
  EXPECT_EQ(r.run.out_dir, "quoted");
  // Overrides may supply what the file lacks.
  EXPECT_EQ(parse_recipe("", "empty.toml", {"train.epochs=1.5"}).train.epochs, 1.5);
}

TEST_F(RecipeTest, NetworkUnitsAndCrossChecks) {
  const Recipe r = parse_recipe("[train]\nsteps = 1\n[distributed]\nworld_size = 8\n[network]\ngroups = 2\n"
                                "inter_bandwidth = \"1 Gbit/s\"\ninter_latency = \"30 ms\"\nintra_bandwidth = 5e9\n"
                                "stragglers = [3]\nstraggler_slowdown = 2\n", "n.toml");
  EXPECT_EQ(r.network.groups, 2);
  EXPECT_DOUBLE_EQ(r.network.inter_bandwidth.bytes_per_s, 125e6);
  EXPECT_DOUBLE_EQ(r.network.inter_latency.seconds, 0.03);
  EXPECT_DOUBLE_EQ(r.network.intra_bandwidth.bytes_per_s, 5e9);  // plain numbers are bytes/s
  EXPECT_EQ(r.network.stragglers.ranks, std::vector<int>{3});
  const std::string path = write("[train]\nsteps = 1\n[network]\ninter_bandwidth = \"1 Gbit\"\n", "u.toml");
  EXPECT_EQ(error_of(path), path + ":4:1: network.inter_bandwidth: expected a bandwidth like \"100 Gbit/s\" or "
                                   "\"450 GB/s\" (units bit/s..Tbit/s, B/s..TB/s), got \"1 Gbit\"");
  const std::string g = write("[train]\nsteps = 1\n[distributed]\nworld_size = 6\n[network]\ngroups = 4\n", "g.toml");
  EXPECT_EQ(error_of(g), g + ":6:1: network.groups: expected a divisor of distributed.world_size = 6 (groups of "
                             "equal size), got 4");
  const std::string st = write("[train]\nsteps = 1\n[network]\nstragglers = [1]\n", "s.toml");
  EXPECT_EQ(error_of(st), st + ":4:1: network.stragglers: expected ranks below distributed.world_size = 1, got 1");
}

// [network.inter]: every key "auto" (the [network] key's value) unless set, in the file, by an
// override or in a network file; out-of-bound values are refused naming "auto" as a choice.
TEST_F(RecipeTest, TheInterTierKeysDefaultToAuto) {
  const Recipe d = load_recipe(write(kMinimal));
  EXPECT_EQ(d.network.inter, InterProtocolConfig{});
  EXPECT_EQ(d.network.inter.rendezvous_round_trips.resolve(3), 3);
  const Recipe r = load_recipe(write("[train]\nsteps = 1\n[network.inter]\neager_limit_kib = 64\nbuffered_sends = true\n"),
                               {"network.inter.rendezvous_round_trips=1", "network.inter.buffered_sends=auto"});
  EXPECT_EQ(r.network.inter.eager_limit_kib.value, 64.0);
  EXPECT_EQ(r.network.inter.rendezvous_round_trips.value, 1);
  EXPECT_FALSE(r.network.inter.buffered_sends.value.has_value());  // the override wins
  EXPECT_FALSE(r.network.inter.tcp_initial_window_segments.value.has_value());
  const std::string net = write("[network]\ngroups = 2\n[network.inter]\ntcp_initial_window_segments = 10\n", "net.toml");
  const Recipe w = with_network_file(load_recipe(write("[train]\nsteps = 1\n[distributed]\nworld_size = 2\n")), net);
  EXPECT_EQ(w.network.inter.tcp_initial_window_segments.value, 10);
  const std::string bad = write("[train]\nsteps = 1\n[network.inter]\nrendezvous_round_trips = 9\n");
  EXPECT_EQ(error_of(bad), bad + ":4:1: network.inter.rendezvous_round_trips: expected an integer in [0, 8] or \"auto\", got 9");
  const std::string word = write("[train]\nsteps = 1\n[network.inter]\neager_limit_kib = \"none\"\n");
  EXPECT_EQ(error_of(word), word + ":4:1: network.inter.eager_limit_kib: expected a number >= 0 or \"auto\", got \"none\"");
}

TEST_F(RecipeTest, BadOverrides) {
  const std::string path = write(kMinimal);
  EXPECT_EQ(error_of(path, {"train.micro_batch=abc"}),
            "--train.micro_batch=abc: expected an integer >= 1, got \"abc\"");
  EXPECT_EQ(error_of(path, {"train.micro_batch=1.5"}),
            "--train.micro_batch=1.5: expected an integer >= 1, got 1.5");
  EXPECT_EQ(error_of(path, {"sync.strategy=allreduc"}),
            "--sync.strategy=allreduc: expected one of \"allreduce\", \"topk\", \"powersgd\", \"onebit\", \"local_sgd\", \"diloco\", \"streaming_diloco\", \"sparseloco\", \"demo\", \"sparta\", \"desloc\", \"noloco\", \"async_diloco\", got \"allreduc\"");
  EXPECT_EQ(error_of(path, {"train.nosuch=1"}),
            std::string("--train.nosuch=1: unknown key 'train.nosuch' (valid keys in [train]: ") +
                kTrainKeys + ")");
  EXPECT_EQ(error_of(path, {"train.micro_bach=1"}).rfind(
                "--train.micro_bach=1: unknown key 'train.micro_bach' (did you mean 'train.micro_batch'?", 0),
            0u);
  EXPECT_EQ(error_of(path, {"trian.steps=1"}).rfind("--trian.steps=1: unknown section [trian] (did you mean [train]?", 0),
            0u);
  EXPECT_EQ(error_of(path, {"train.steps"}), "--train.steps: expected section.key=value");
}

// A Recipe where every field differs from its default, with floats that print awkwardly.
// GCC 12 takes the nested aggregates' temporary vectors (PeriodSchedule::segments) for
// maybe-uninitialized when it inlines their destructors: a false positive, silenced here only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
Recipe unusual_recipe() {
  Recipe r;
  r.run = {"we\"ird\\name\tx", 18446744073709551ull, "out dir/ü"};
  r.model = {"mlp", {3, 1, 4096}, MlpActivation::gelu, 0.1f, true, 96, 3, 6, 200, {"w \"x\".safetensors"}};
  r.data = {"fashion_mnist", "/tmp/data", 128, 4000, 0.05, EvalSplit::test, 0.15, {".md", ""}, false, {"t*.bin"}, {"v.bin"}, TokenFormat::u16};
  r.train = {12345, 1.0 / 3.0, 7, 3, 11, 13, true, {false}, {5400.5}, nn::Precision::bf16, true};
  r.optimizer = {"sgd", 2.0, 0.30000000000000004, true, 1e-7};
  r.schedule = {17, LrDecay::cosine, 1e-300};
  r.distributed = {BackendKind::threads, DeviceKind::cpu, 6, 12.5, Algorithm::rabenseifner, 5};
  r.sync = {"powersgd", 1e20, false, 0.375, {WireKind::bf16},
            {1.0 / 3.0, false, TopKOptions::Selection::sampled, 0.125, 7},
            {3, 9, 1.5, false, false},
            {11, false, OneBitOptions::Scale::mean_abs},
            {{laconic::Codec::fp32, 32, true, {{{8, 4}, {0, 2}}}}, 13, 5, "onebit"},
            {{laconic::Codec::bf16, 64, false, {}}, 77, 3, 0.25, 0.5, false, OuterOptimizer::adam, 0.99, 1e-6, "allreduce", true},
            {{{laconic::Codec::fp8_e4m3, 16, true, {{{0, 5}}}}, 40, 2, 0.5, 0.25, true, OuterOptimizer::sgd, 0.95, 1e-7,
              "allreduce"}, 4, 3, 0.75, true},
            {30, 2, 0.8, 0.03, 1024, 0.9, laconic::Codec::int4, {{{60, 30}, {0, 10}}}},
            {32, 3, 0.9, laconic::Codec::bf16, DemoDct::one_d, DemoAverage::ranks, false},
            IntraKind::allreduce,
            ShardKind::none,  // "optimizer" refuses phases (its round trip: tests/train/shard_test.cpp)
            {{{"allreduce", 500}, {"topk", 0}}}};
  // Units that print back exactly ("25 Gbit/s") and ones that only round-trip as plain numbers.
  r.network = {3, {25e9 / 8}, {7e-6}, {123456.789}, {0.1 + 0.2}, {{0, 5}}, 2.5, ComputeKind::modeled, 312.5, 0.45,
               InterLink::per_pair, {"plat form.xml"}, 32.5, 2, true, 3, 96.25, 10,
               {{12.5}, {3}, {false}, {}}};  // the inter tier's window left "auto"
  r.checkpoint = {25, 3, "/tmp/ck pts"};
  r.guards = {NonfiniteKind::skip, 4, 9};
  r.fault = {FaultKind::stall, 5, 123};
  r.elastic = {2.5, 7.25, 90, 5, "10.0.0.2", Aggregate::trimmed_mean, 0.3, 3, 2, {"secret dir/k\"ey"}};
  return r;
}
#pragma GCC diagnostic pop

TEST_F(RecipeTest, SubsectionsParseAsTablesAndOverrides) {
  const std::string path = write(
      "[train]\nsteps = 1\n[sync]\nstrategy = \"topk\"\n[sync.topk]\nratio = 0.05\nselection = \"sampled\"\n"
      "[sync.powersgd]\nrank = 2\n");
  const Recipe r = load_recipe(path, {"sync.onebit.warmup_steps=7"});
  EXPECT_EQ(r.sync.strategy, "topk");
  EXPECT_EQ(r.sync.topk.ratio, 0.05);
  EXPECT_EQ(r.sync.topk.selection, TopKOptions::Selection::sampled);
  EXPECT_EQ(r.sync.powersgd.rank, 2);
  EXPECT_EQ(r.sync.onebit.warmup_steps, 7);
  // A dotted table without its parent, and inline tables, are the same TOML.
  EXPECT_EQ(load_recipe(write("[train]\nsteps = 1\n[sync.topk]\nratio = 0.5\n")).sync.topk.ratio, 0.5);
  EXPECT_EQ(load_recipe(write("[train]\nsteps = 1\n[sync]\ntopk = { ratio = 0.25 }\n")).sync.topk.ratio, 0.25);
}

TEST_F(RecipeTest, SubsectionErrorsNameTheFullPath) {
  std::string path = write("[train]\nsteps = 1\n[sync.topk]\nratoi = 0.1\n");
  EXPECT_EQ(error_of(path), path + ":4:1: unknown key 'sync.topk.ratoi' (did you mean 'sync.topk.ratio'? valid keys in "
                                   "[sync.topk]: ratio, error_feedback, selection, sample_fraction, warmup_steps)");
  path = write("[train]\nsteps = 1\n[sync]\ntopk = 0.1\n");
  EXPECT_EQ(error_of(path), path + ":4:1: sync.topk: expected a table, got 0.1");
  path = write("[train]\nsteps = 1\n[sync]\nratio = 0.1\n");
  EXPECT_EQ(error_of(path), path + ":4:1: unknown key 'sync.ratio' (did you mean 'sync.sparseloco.ratio'? valid keys in "
                                   "[sync]: strategy, bucket_mb, overlap, momentum, intra, shard, phases)");
  path = write("[train]\nsteps = 1\n");
  EXPECT_EQ(error_of(path, {"sync.topk.rank=2"}).substr(0, 50), "--sync.topk.rank=2: unknown key 'sync.topk.rank' (");
}

TEST_F(RecipeTest, PhasesParseAndBadOnesAreRejected) {
  std::string path = write("[train]\nsteps = 1\n[sync]\nphases = [{strategy = \"allreduce\", steps = 500}, "
                           "{strategy = \"diloco\"}]\n");
  const Recipe r = load_recipe(path);
  ASSERT_EQ(r.sync.phases.phases.size(), 2u);
  EXPECT_EQ(r.sync.phases.phases[0].strategy, "allreduce");
  EXPECT_EQ(r.sync.phases.phases[0].steps, 500);
  EXPECT_EQ(r.sync.phases.phases[1].strategy, "diloco");
  for (const char* bad : {"[{strategy = \"allreduce\"}, {strategy = \"topk\"}]",  // only the last may run to the end
                          "[{steps = 5}]", "[{strategy = \"dgc\", steps = 5}]", "[{strategy = \"topk\", every = 5}]",
                          "\"allreduce\""}) {
    SCOPED_TRACE(bad);
    path = write(std::string("[train]\nsteps = 1\n[sync]\nphases = ") + bad + "\n");
    EXPECT_TRUE(error_of(path).starts_with(path + ":4:1: sync.phases: expected an array")) << error_of(path);
  }
}

TEST_F(RecipeTest, CompositionCrossChecks) {
  std::string path = write("[train]\nsteps = 1\n[sync]\nintra = \"allreduce\"\n");
  EXPECT_EQ(error_of(path), path + ":4:1: sync.intra: expected network.groups >= 2 for \"allreduce\" inside groups "
                                   "(the groups are the network's), got network.groups = 0");
  path = write("[train]\nsteps = 1\n[sync]\nstrategy = \"diloco\"\nmomentum = 0.9\n");
  EXPECT_TRUE(error_of(path).starts_with(path + ":4:1: sync.momentum: expected 0 with local_sgd")) << error_of(path);
}

TEST_F(RecipeTest, ToTomlRoundTrips) {
  const Recipe r = unusual_recipe();
  const std::string text = to_toml(r);
  Recipe back = parse_recipe(text, "resolved.toml");
  EXPECT_EQ(back.path, "resolved.toml");
  back.path = r.path;
  EXPECT_EQ(back, r) << text;
  // Floats stay floats, whole or not, so a float key never reads back as an integer one.
  EXPECT_NE(text.find("\nlr = 2.0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nbackend = \"threads\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nintra_bandwidth = \"25 Gbit/s\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nintra_latency = \"7 us\"\n"), std::string::npos) << text;
  EXPECT_EQ(text.rfind("#", 0), 0u) << "starts with a header comment";
  // Sections in the fixed order.
  EXPECT_LT(text.find("[run]"), text.find("[model]"));
  EXPECT_LT(text.find("[distributed]"), text.find("[sync]"));
}

// A recipe of defaults prints and reads back too: no default is a value the reader refuses
// (elastic.secret_file = "" was, which made every elastic run's recipe.resolved.toml unreadable).
TEST_F(RecipeTest, ADefaultsRecipeToTomlRoundTrips) {
  const Recipe r = parse_recipe("[train]\nsteps = 1\n", "defaults.toml");
  EXPECT_EQ(parse_recipe(to_toml(r), "defaults.toml"), r) << to_toml(r);
}

// Every line to_toml() writes is also a valid override, and applying them all reproduces the recipe.
TEST_F(RecipeTest, EveryKeyWorksAsAnOverride) {
  const Recipe r = unusual_recipe();
  std::istringstream in(to_toml(r));
  std::vector<std::string> overrides;
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const auto eq = line.find(" = ");
    overrides.push_back(section + "." + line.substr(0, eq) + "=" + line.substr(eq + 3));
  }
  EXPECT_EQ(overrides.size(), 181u);  // every key of the schema
  Recipe back = parse_recipe("", "empty.toml", overrides);
  back.path = r.path;
  EXPECT_EQ(back, r);
}

}  // namespace
}  // namespace laconic
