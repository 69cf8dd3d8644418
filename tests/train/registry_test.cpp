// Components registered by user code (framework/recipe/registry.h): their recipe sections parse,
// print and round trip like the built-in ones and reject unknown keys and bad values with
// FILE:LINE:COL (the corpus in tests/recipe/bad/registered/); a registered model, dataset,
// optimizer, reducer and strategy train; a reducer that does what the built-in one does gives
// the built-in strategy's run bit for bit, as a gradient strategy and as DiLoCo's reducer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/check.h"
#include "workloads/models/mlp.h"
#include "framework/sync/periodic.h"
#include "framework/recipe/registry.h"
#include "framework/train/trainer.h"
#include "optimizers/sgd.h"
#include "tests/train/synthetic.h"

namespace laconic {
namespace {

using testing::same_bits;

namespace fs = std::filesystem;

struct WideOptions {
  int width = 8;
  MlpActivation activation = MlpActivation::relu;
  double dropout = 0.0;
  bool operator==(const WideOptions&) const = default;
};
struct BlobOptions {
  int examples = 600;
  int features = 12;
  bool operator==(const BlobOptions&) const = default;
};
struct EveryOptions {
  std::int64_t period = 3;
  bool operator==(const EveryOptions&) const = default;
};

// Registered once per process (the registry is the process's).
void register_test_components() {
  static const bool done = [] {
    registry()
        .add_model("test_wide",
                   [](const Recipe& r, const TrainData& data) -> std::unique_ptr<Model> {
                     const auto& o = r.section<WideOptions>("model.test_wide");
                     MlpOptions m;
                     m.inputs = data.features;
                     m.classes = data.classes;
                     m.hidden = {o.width};
                     m.activation = o.activation;
                     m.dropout = static_cast<float>(o.dropout);
                     return std::make_unique<Mlp>(m);
                   },
                   Section<WideOptions>()
                       .add<&WideOptions::width>("width", at_least(1))
                       .add<&WideOptions::activation>("activation")
                       .add<&WideOptions::dropout>("dropout", half_open(0, 1)))
        .add_dataset("test_blobs",
                     [](const Recipe& r, const LoadOptions&) {
                       const auto& o = r.section<BlobOptions>("data.test_blobs");
                       return image_data(testing::blobs(o.examples, o.features, 5, 1), testing::blobs(200, o.features, 5, 2));
                     },
                     Section<BlobOptions>()
                         .add<&BlobOptions::examples>("examples", at_least(100))
                         .add<&BlobOptions::features>("features", closed(5, 1000)))
        .add_optimizer("test_plain_sgd",
                       [](const Recipe& r) -> std::unique_ptr<Optimizer> {
                         return std::make_unique<Sgd>(SgdOptions{r.optimizer.momentum, false, 0.0});
                       })
        // The dense fp32 average under another name: what allreduce does.
        .add_reducer("test_exact",
                     [](const Recipe&, Device device) -> std::unique_ptr<Reducer> {
                       return std::make_unique<DenseReducer>(DType::f32, device);
                     })
        .add_strategy("test_every",
                      [](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
                        const auto& o = r.section<EveryOptions>("sync.test_every");
                        return std::make_unique<PeriodicAveraging>(local_sgd_options(o.period, c.first_step, r.sync.bucket_mb),
                                                                   std::make_unique<DenseReducer>(DType::f32, c.device));
                      },
                      Section<EveryOptions>().add<&EveryOptions::period>("period", at_least(1)));
    return true;
  }();
  (void)done;
}

class Registered : public ::testing::Test {
 protected:
  void SetUp() override { register_test_components(); }
};

std::string error_of(const std::string& text, const std::string& name = "r.toml",
                     const std::vector<std::string>& overrides = {}) {
  try {
    parse_recipe(text, name, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

const char* kWide = R"([model]
name = "test_wide"
[model.test_wide]
width = 24
activation = "gelu"
[data]
name = "test_blobs"
[data.test_blobs]
features = 16
[train]
steps = 20
micro_batch = 8
[distributed]
world_size = 2
)";

TEST_F(Registered, SectionsParsePrintAndRoundTrip) {
  const Recipe r = parse_recipe(kWide, "wide.toml", {"model.test_wide.dropout=0.25"});
  const auto& w = r.section<WideOptions>("model.test_wide");
  EXPECT_EQ(w.width, 24);
  EXPECT_EQ(w.activation, MlpActivation::gelu);
  EXPECT_EQ(w.dropout, 0.25);
  EXPECT_EQ(r.section<BlobOptions>("data.test_blobs").features, 16);
  EXPECT_EQ(r.section<BlobOptions>("data.test_blobs").examples, 600);  // the struct's default
  const std::string toml = to_toml(r);
  EXPECT_NE(toml.find("[model.test_wide]\nwidth = 24\nactivation = \"gelu\"\ndropout = 0.25\n"), std::string::npos) << toml;
  EXPECT_NE(toml.find("[data.test_blobs]\nexamples = 600\nfeatures = 16\n"), std::string::npos) << toml;
  EXPECT_EQ(toml.find("[sync.test_every]"), std::string::npos) << "an unused component's section is not printed";
  Recipe back = parse_recipe(toml, "wide.toml");
  EXPECT_EQ(back, r);
  back = parse_recipe(toml, "wide.toml", {"model.test_wide.width=25"});
  EXPECT_NE(back, r);  // sections compare by value
  EXPECT_EQ(r.section<WideOptions>("model.test_wide").width, 24);  // copies do not share them

  // A built-in run's resolved recipe does not mention registered components (the stock trainer reads it).
  EXPECT_EQ(to_toml(parse_recipe("[train]\nsteps = 1\n", "plain.toml")).find("test_"), std::string::npos);
}

TEST_F(Registered, NamesAreListedInMessagesAndChecked) {
  EXPECT_EQ(error_of("[model]\nname = \"test_wid\"\n"),
            "r.toml:2:1: model.name: expected one of \"mlp\", \"bert\", \"gpt\", \"test_wide\", got \"test_wid\"");
  EXPECT_NE(error_of("[sync]\nstrategy = \"nope\"\n").find("\"demo\", \"sparta\", \"desloc\", \"noloco\", \"async_diloco\", \"test_exact\", \"test_every\", got \"nope\""),
            std::string::npos);
  EXPECT_THROW(registry().add_model("test_wide", nullptr), Error);        // taken
  EXPECT_THROW(registry().add_reducer("Bad-Name", nullptr), Error);       // not [a-z0-9_]
  EXPECT_THROW(registry().add_strategy("test_exact", nullptr), Error);    // a reducer's strategy
}

fs::path corpus_dir() { return fs::path(LACONIC_SOURCE_DIR) / "tests" / "recipe" / "bad" / "registered"; }

// The corpus format of tests/recipe/bad (corpus_test.cpp): the first line "# expect: MESSAGE".
TEST_F(Registered, BadRecipeCorpusOfRegisteredSections) {
  int files = 0;
  for (const auto& entry : fs::directory_iterator(corpus_dir())) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    std::ifstream in(path);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const std::string first = text.substr(0, text.find('\n'));
    ASSERT_TRUE(first.starts_with("# expect: ")) << first;
    std::string got = "no error";
    try {
      load_recipe(path);
    } catch (const InputError& e) {
      got = e.what();
    }
    EXPECT_EQ(got, path + ":" + first.substr(10));
  }
  EXPECT_GE(files, 5);
}

TEST_F(Registered, RegisteredComponentsTrain) {
  Recipe r = parse_recipe(kWide, "wide.toml", {"optimizer.name=test_plain_sgd", "optimizer.lr=0.05", "train.steps=40"});
  const TrainData data = load_data(r);
  const TrainSummary s = train(r, data, {});
  EXPECT_EQ(s.final_params.size(), 16u * 24 + 24 + 24 * 5 + 5);  // the registered model's sizes
  EXPECT_LT(s.eval_loss, std::log(5.0) - 0.3);                     // it learned the blobs
}

TEST_F(Registered, AReducerLikeAllReduceGivesAllReducesRunBitForBit) {
  const TrainData data = image_data(testing::blobs(600, 12, 5, 1), testing::blobs(200, 12, 5, 2));
  const std::string base = "[model]\nhidden = [16]\n[train]\nsteps = 12\nmicro_batch = 8\n[distributed]\nworld_size = 3\n";
  const auto run = [&](std::vector<std::string> overrides) { return train(parse_recipe(base, "b.toml", overrides), data, {}).final_params; };
  EXPECT_TRUE(same_bits(run({"sync.strategy=test_exact"}), run({"sync.strategy=allreduce"})));
  EXPECT_TRUE(same_bits(run({"sync.strategy=diloco", "sync.diloco.reducer=test_exact", "sync.diloco.period=4"}),
                   run({"sync.strategy=diloco", "sync.diloco.period=4"})));
  EXPECT_TRUE(same_bits(run({"sync.strategy=test_every", "sync.test_every.period=4"}),
                   run({"sync.strategy=local_sgd", "sync.local_sgd.period=4"})));
  EXPECT_FALSE(same_bits(run({"sync.strategy=test_every", "sync.test_every.period=4"}),
                    run({"sync.strategy=test_every", "sync.test_every.period=5"})));
}

}  // namespace
}  // namespace laconic
