// trainer compare's pure pieces: --vary parsing and the variants' names, reading run
// directories, time to a target loss, the report's rows and the report itself. Run directories
// are written by hand here, so every number the report shows is known in advance.
#include "framework/report/compare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/check.h"
#include "tests/support/input_error.h"

namespace laconic {
namespace {
namespace fs = std::filesystem;

using testing::input_error;

// ---- --vary ----------------------------------------------------------------------------------

TEST(ParseVary, SplitsValuesOnTopLevelCommas) {
  const VaryAxis a = parse_vary("sync.strategy=allreduce, powersgd ,topk");
  EXPECT_EQ(a.key, "sync.strategy");
  EXPECT_EQ(a.values, (std::vector<std::string>{"allreduce", "powersgd", "topk"}));
  // Arrays and quoted strings keep their commas.
  EXPECT_EQ(parse_vary("model.hidden=[256,128],[64]").values, (std::vector<std::string>{"[256,128]", "[64]"}));
  EXPECT_EQ(parse_vary("run.name=\"a,b\",c").values, (std::vector<std::string>{"\"a,b\"", "c"}));
  EXPECT_EQ(parse_vary("sync.topk.ratio=0.01").values, (std::vector<std::string>{"0.01"}));
  EXPECT_EQ(parse_vary("sync.topk.ratio=0.01").key, "sync.topk.ratio");
}

TEST(ParseVary, RejectsBadSyntaxWithOneLineNamingTheFlag) {
  for (const char* bad : {"sync.strategy", "strategy=a,b", "sync..strategy=a", ".x=a", "sync.strategy=",
                          "sync.strategy=a,,b", "sync.strategy=a,", "sync.strategy=a,a", "model.hidden=[1,2",
                          "model.hidden=1]", "run.name=\"a", "sync.str ategy=a"}) {
    const std::string msg = input_error([&] { parse_vary(bad); });
    EXPECT_EQ(msg.rfind(std::string("--vary ") + bad, 0), 0u) << bad << " -> " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(MakeVariants, OneAxisIsNamedByItsValues) {
  const auto v = make_variants({parse_vary("sync.strategy=allreduce,topk")});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].name, "allreduce");
  EXPECT_EQ(v[0].assignments, (std::vector<std::string>{"sync.strategy=allreduce"}));
  EXPECT_EQ(v[1].name, "topk");
}

TEST(MakeVariants, CartesianProductFirstAxisOutermost) {
  const auto v = make_variants({parse_vary("sync.strategy=topk,powersgd"), parse_vary("train.steps=10,20,30")});
  ASSERT_EQ(v.size(), 6u);
  const std::vector<std::string> names{"strategy=topk,steps=10",     "strategy=topk,steps=20",
                                       "strategy=topk,steps=30",     "strategy=powersgd,steps=10",
                                       "strategy=powersgd,steps=20", "strategy=powersgd,steps=30"};
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i].name, names[i]);
  EXPECT_EQ(v[4].assignments, (std::vector<std::string>{"sync.strategy=powersgd", "train.steps=20"}));
}

TEST(MakeVariants, NamesAreFilesystemSafeAndUnique) {
  EXPECT_EQ(make_variants({parse_vary("model.hidden=[256,128],[64]")})[0].name, "256-128");
  EXPECT_EQ(make_variants({parse_vary("run.name=\"a/b\"")})[0].name, "a-b");
  EXPECT_EQ(make_variants({parse_vary("run.name=.5")})[0].name, "_.5");  // never hidden, never ".."
  EXPECT_EQ(make_variants({parse_vary("run.name=..")})[0].name, "_..");
  EXPECT_EQ(make_variants({parse_vary("run.name=[]")})[0].name, "empty");
  const auto clash = make_variants({parse_vary("run.name=a b,a-b,a/b")});
  EXPECT_EQ(clash[0].name, "a-b");
  EXPECT_EQ(clash[1].name, "a-b-2");
  EXPECT_EQ(clash[2].name, "a-b-3");
  // Two axes ending in the same key are told apart by their whole key.
  const auto same_leaf = make_variants({parse_vary("sync.topk.warmup_steps=0"), parse_vary("sync.onebit.warmup_steps=5")});
  EXPECT_EQ(same_leaf[0].name, "sync.topk.warmup_steps=0,sync.onebit.warmup_steps=5");
}

TEST(MakeVariants, TheSameKeyTwiceIsAnInputError) {
  const std::string msg = input_error([] { make_variants({parse_vary("sync.strategy=a"), parse_vary("sync.strategy=b")}); });
  EXPECT_NE(msg.find("sync.strategy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("twice"), std::string::npos) << msg;
}

// ---- run directories -------------------------------------------------------------------------

class RunDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("laconic_compare_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const fs::path& p, const std::string& text) {
    std::ofstream(p) << text;
  }

  // A run whose eval loss falls 2.0, 1.0, 0.5 at steps 10, 20, 30 (training-only records between)
  // with `bytes_per_step` bytes sent per step and `s_per_step` seconds per step.
  // recipe_extra: more of recipe.resolved.toml (a strategy's section).
  fs::path make_run(const std::string& name, double bytes_per_step, double s_per_step, bool sim,
                    const std::string& strategy, double loss_scale = 1.0, const std::string& recipe_extra = "") {
    const fs::path d = root_ / name;
    fs::create_directories(d);
    std::string metrics;
    const double evals[] = {2.0, 1.0, 0.5};
    for (int step = 5; step <= 30; step += 5) {
      nlohmann::json j;
      j["step"] = step;
      j["loss"] = loss_scale * (3.0 - 0.08 * step);
      j["bytes_sent"] = bytes_per_step * step;
      j["wall_s"] = (sim ? 0.001 : s_per_step) * step;
      if (sim) {
        j["sim_time_s"] = s_per_step * step;
        j["bytes_inter"] = bytes_per_step * step / 4;
      }
      if (step % 10 == 0) {
        j["eval_loss"] = loss_scale * evals[step / 10 - 1];
        j["eval_accuracy"] = 0.3 * (step / 10);
      }
      metrics += j.dump() + "\n";
    }
    write(d / "metrics.jsonl", metrics);
    nlohmann::json s;
    s["steps"] = 30;
    s["final_loss"] = loss_scale * (3.0 - 0.08 * 30);
    s["eval_loss"] = loss_scale * 0.5;
    s["eval_accuracy"] = 0.9;
    s["bytes_sent"] = bytes_per_step * 30;
    s["bytes_recv"] = bytes_per_step * 30;
    s["compression_ratio"] = strategy == "topk" ? 50.0 : 1.0;
    s["wall_s"] = (sim ? 0.001 : s_per_step) * 30;
    if (sim) s["sim_time_s"] = s_per_step * 30;
    write(d / "summary.json", s.dump(2));
    write(d / "recipe.resolved.toml", "[run]\nname = \"" + name + "\"\nseed = 7\n\n[distributed]\nworld_size = 4\n\n"
                                      "[sync]\nstrategy = \"" + strategy + "\"\n\n[sync.topk]\nratio = 0.01\n"
                                      + recipe_extra + "\n# Resolved at start:\n#   steps = 30\n");
    return d;
  }

  fs::path root_;
};

TEST_F(RunDirs, ReadsSummaryMetricsAndRecipe) {
  const RunResult r = read_run(make_run("a", 100, 0.5, true, "topk").string(), "a");
  EXPECT_EQ(r.name, "a");
  EXPECT_EQ(r.steps, 30);
  EXPECT_DOUBLE_EQ(r.eval_loss, 0.5);
  EXPECT_DOUBLE_EQ(r.eval_accuracy, 0.9);
  EXPECT_DOUBLE_EQ(r.bytes_sent, 3000);
  EXPECT_DOUBLE_EQ(r.bytes_inter, 750);  // from the last metrics record
  EXPECT_DOUBLE_EQ(r.sim_time_s, 15);
  EXPECT_DOUBLE_EQ(r.compression_ratio, 50);
  ASSERT_EQ(r.metrics.size(), 6u);
  EXPECT_EQ(r.metrics[1].step, 10);
  EXPECT_DOUBLE_EQ(r.metrics[1].eval_loss, 2.0);
  EXPECT_TRUE(std::isnan(r.metrics[0].eval_loss));
  EXPECT_EQ(r.recipe_value("run.seed"), "7");
  EXPECT_EQ(r.recipe_value("distributed.world_size"), "4");
  EXPECT_EQ(r.recipe_value("sync.topk.ratio"), "0.01");
  EXPECT_EQ(r.recipe_value("no.such"), "");
}

TEST_F(RunDirs, SummaryNullsAndAMissingRecipeAreFine) {
  const fs::path d = make_run("a", 100, 0.5, false, "allreduce");
  write(d / "summary.json", R"({"steps": 30, "final_loss": 0.6, "eval_loss": null, "bytes_sent": 5})");
  fs::remove(d / "recipe.resolved.toml");
  const RunResult r = read_run(d.string(), "a");
  EXPECT_TRUE(std::isnan(r.eval_loss));
  EXPECT_TRUE(std::isnan(r.sim_time_s));
  EXPECT_TRUE(r.recipe.empty());
}

TEST_F(RunDirs, MissingOrBrokenFilesNameTheDirectoryAndTheFile) {
  const fs::path d = make_run("a", 100, 0.5, false, "allreduce");
  std::string msg = input_error([&] { read_run((root_ / "nope").string(), "x"); });
  EXPECT_NE(msg.find("nope"), std::string::npos) << msg;

  fs::rename(d / "summary.json", d / "summary.json.bak");
  msg = input_error([&] { read_run(d.string(), "a"); });
  EXPECT_NE(msg.find(d.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("summary.json is missing"), std::string::npos) << msg;
  fs::rename(d / "summary.json.bak", d / "summary.json");

  fs::rename(d / "metrics.jsonl", d / "metrics.jsonl.bak");
  msg = input_error([&] { read_run(d.string(), "a"); });
  EXPECT_NE(msg.find("metrics.jsonl is missing"), std::string::npos) << msg;
  fs::rename(d / "metrics.jsonl.bak", d / "metrics.jsonl");

  std::ofstream(d / "metrics.jsonl", std::ios::app) << "{\"step\": 35, \"loss\": \n";
  msg = input_error([&] { read_run(d.string(), "a"); });
  EXPECT_NE(msg.find("metrics.jsonl:7: not valid JSON"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// ---- time to target --------------------------------------------------------------------------

MetricPoint point(std::int64_t step, double loss, double eval, double bytes, double wall, double sim = kAbsent) {
  MetricPoint p;
  p.step = step;
  p.loss = loss;
  p.eval_loss = eval;
  p.bytes_sent = bytes;
  p.wall_s = wall;
  p.sim_time_s = sim;
  return p;
}

TEST(TimeToTarget, InterpolatesBetweenTheRecordsAroundTheCrossing) {
  const std::vector<MetricPoint> m{
      point(10, 2.5, 2.0, 100, 1.0, 10.0),
      point(20, 2.0, kAbsent, 200, 2.0, 20.0),  // no evaluation: skipped in the eval series
      point(30, 1.5, 1.0, 300, 3.0, 30.0),
      point(40, 1.0, 0.5, 400, 4.0, 40.0),
  };
  // Eval: 2.0 at step 10, 1.0 at step 30; 1.5 is half way.
  auto hit = time_to_target(m, LossSeries::eval, CompareClock::wall, 1.5);
  ASSERT_TRUE(hit);
  EXPECT_DOUBLE_EQ(hit->step, 20);
  EXPECT_DOUBLE_EQ(hit->time_s, 2.0);
  EXPECT_DOUBLE_EQ(hit->bytes, 200);
  hit = time_to_target(m, LossSeries::eval, CompareClock::simulated, 1.5);
  EXPECT_DOUBLE_EQ(hit->time_s, 20.0);
  // Exactly on a record: that record.
  hit = time_to_target(m, LossSeries::eval, CompareClock::wall, 1.0);
  EXPECT_DOUBLE_EQ(hit->step, 30);
  // Training loss: 2.0 at step 20, 1.5 at 30; 1.9 is a fifth of the way.
  hit = time_to_target(m, LossSeries::train, CompareClock::wall, 1.9);
  EXPECT_DOUBLE_EQ(hit->step, 22);
  EXPECT_NEAR(hit->time_s, 2.2, 1e-12);
  // Already below at the first record: that record, nothing to interpolate from.
  hit = time_to_target(m, LossSeries::eval, CompareClock::wall, 3.0);
  EXPECT_DOUBLE_EQ(hit->step, 10);
  EXPECT_DOUBLE_EQ(hit->time_s, 1.0);
  // Never reached, or no target at all.
  EXPECT_FALSE(time_to_target(m, LossSeries::eval, CompareClock::wall, 0.4));
  EXPECT_FALSE(time_to_target(m, LossSeries::eval, CompareClock::wall, kAbsent));
  EXPECT_FALSE(time_to_target({}, LossSeries::eval, CompareClock::wall, 1.0));
}

TEST(TimeToTarget, TheFirstCrossingCountsNotALaterOne) {
  const std::vector<MetricPoint> m{point(10, 2.0, kAbsent, 0, 1), point(20, 1.0, kAbsent, 0, 2),
                                   point(30, 3.0, kAbsent, 0, 3), point(40, 0.5, kAbsent, 0, 4)};
  EXPECT_DOUBLE_EQ(time_to_target(m, LossSeries::train, CompareClock::wall, 1.0)->step, 20);
}

// ---- the comparison and the report -------------------------------------------------------------

TEST_F(RunDirs, RowsSpeedupsAndBytesRatiosAgainstTheFirstRun) {
  // b sends a tenth of a's bytes and takes half the simulated time per step, with the same losses.
  const std::vector<RunResult> runs{read_run(make_run("a", 1000, 1.0, true, "allreduce").string(), "a"),
                                    read_run(make_run("b", 100, 0.5, true, "topk").string(), "b")};
  const Comparison c = compare_runs(runs, 1.5);
  EXPECT_EQ(c.clock, CompareClock::simulated);
  EXPECT_EQ(c.series, LossSeries::eval);
  EXPECT_FALSE(c.default_target);
  EXPECT_TRUE(c.simulated_network);
  ASSERT_EQ(c.rows.size(), 2u);
  // Eval 2.0 at step 10, 1.0 at step 20: 1.5 at step 15.
  ASSERT_TRUE(c.rows[0].hit && c.rows[1].hit);
  EXPECT_DOUBLE_EQ(c.rows[0].hit->step, 15);
  EXPECT_DOUBLE_EQ(c.rows[0].hit->time_s, 15);
  EXPECT_DOUBLE_EQ(c.rows[1].hit->time_s, 7.5);
  EXPECT_DOUBLE_EQ(c.rows[0].speedup, 1.0);
  EXPECT_DOUBLE_EQ(c.rows[1].speedup, 2.0);
  EXPECT_DOUBLE_EQ(c.rows[0].bytes_ratio, 1.0);
  EXPECT_DOUBLE_EQ(c.rows[1].bytes_ratio, 0.1);
  EXPECT_DOUBLE_EQ(c.rows[1].time_s, 15);
  EXPECT_DOUBLE_EQ(c.rows[1].bytes_inter, 750);
}

TEST_F(RunDirs, DefaultTargetIsTheBaselinesFinalEvalLossTimes102) {
  // c's losses are twice a's: it never gets within 2% of a's end.
  const std::vector<RunResult> runs{read_run(make_run("a", 1000, 1.0, false, "allreduce").string(), "a"),
                                    read_run(make_run("c", 100, 1.0, false, "topk", 2.0).string(), "c")};
  const Comparison c = compare_runs(runs, std::nullopt);
  EXPECT_TRUE(c.default_target);
  EXPECT_EQ(c.clock, CompareClock::wall);
  EXPECT_FALSE(c.simulated_network);
  EXPECT_DOUBLE_EQ(c.target, 0.5 * kDefaultTargetSlack);
  ASSERT_TRUE(c.rows[0].hit);
  EXPECT_FALSE(c.rows[1].hit);
  EXPECT_TRUE(std::isnan(c.rows[1].speedup));
  EXPECT_DOUBLE_EQ(c.rows[1].bytes_ratio, 0.1);

  const std::string md = report_markdown(c, runs, ReportContext{});
  EXPECT_NE(md.find("| c | 1.0000 | 90.00% |"), std::string::npos) << md;
  EXPECT_NE(md.find("not reached"), std::string::npos) << md;
  EXPECT_NE(md.find("0.5100 = the baseline's final eval loss x 1.02"), std::string::npos) << md;
  EXPECT_NE(md.find("wall time on this machine"), std::string::npos) << md;
  EXPECT_NE(md.find("**Seed**: 7 (every run); **world size**: 4 (every run)"), std::string::npos) << md;
  EXPECT_NE(md.find("- **c**: `sync.strategy = "), std::string::npos) << md;  // the differences
  EXPECT_EQ(md.find("inter-group"), std::string::npos) << md;                  // no [network]
  EXPECT_NE(md.find("No plots"), std::string::npos) << md;
}

TEST_F(RunDirs, OneRunWithoutSimulationMeansWallTimeForAll) {
  const std::vector<RunResult> runs{read_run(make_run("a", 1000, 1.0, true, "allreduce").string(), "a"),
                                    read_run(make_run("b", 100, 1.0, false, "topk").string(), "b")};
  const Comparison c = compare_runs(runs, std::nullopt);
  EXPECT_EQ(c.clock, CompareClock::wall);
  EXPECT_DOUBLE_EQ(c.rows[0].time_s, 0.03);  // a's wall_s, not its sim_time_s
  EXPECT_NE(report_markdown(c, runs, {}).find("some runs have no simulated clock"), std::string::npos);
}

TEST_F(RunDirs, WithoutEvaluationEverywhereTheTrainingLossIsCompared) {
  const fs::path d = make_run("b", 100, 1.0, false, "topk");
  // Strip b's evaluations.
  std::ifstream in(d / "metrics.jsonl");
  std::string line, out;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    j.erase("eval_loss");
    j.erase("eval_accuracy");
    out += j.dump() + "\n";
  }
  in.close();
  write(d / "metrics.jsonl", out);
  const std::vector<RunResult> runs{read_run(make_run("a", 1000, 1.0, false, "allreduce").string(), "a"),
                                    read_run(d.string(), "b")};
  const Comparison c = compare_runs(runs, std::nullopt);
  EXPECT_EQ(c.series, LossSeries::train);
  EXPECT_NEAR(c.target, (3.0 - 0.08 * 30) * kDefaultTargetSlack, 1e-12);  // a's final training loss
  const std::string md = report_markdown(c, runs, {});
  EXPECT_NE(md.find("not every run was evaluated"), std::string::npos) << md;
}

TEST_F(RunDirs, ReportStatesTheCommandRecipeAndPlots) {
  const std::vector<RunResult> runs{read_run(make_run("allreduce", 1000, 1.0, true, "allreduce").string(), "allreduce"),
                                    read_run(make_run("topk", 10, 1.0, true, "topk").string(), "topk")};
  ReportContext ctx;
  ctx.command = "trainer compare --recipe r.toml --vary sync.strategy=allreduce,topk --out x";
  ctx.recipe = "r.toml";
  ctx.overrides = {"train.steps=20"};
  ctx.axes = {parse_vary("sync.strategy=allreduce,topk")};
  ctx.plots = {"loss_vs_steps.png"};
  const std::string md = report_markdown(compare_runs(runs, std::nullopt), runs, ctx);
  EXPECT_EQ(md.rfind("# Comparison: allreduce vs topk\n", 0), 0u) << md;
  EXPECT_NE(md.find(ctx.command), std::string::npos);
  EXPECT_NE(md.find("`r.toml` with `--train.steps=20`"), std::string::npos) << md;
  EXPECT_NE(md.find("**Varied**: `sync.strategy` = allreduce, topk"), std::string::npos) << md;
  EXPECT_NE(md.find("simulated time (`sim_time_s`"), std::string::npos) << md;
  EXPECT_NE(md.find("| inter-group |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0.0100x |"), std::string::npos) << md;  // bytes vs baseline
  EXPECT_NE(md.find("| 50.0x |"), std::string::npos) << md;    // compression
  EXPECT_NE(md.find("![loss_vs_steps](loss_vs_steps.png)"), std::string::npos) << md;

  const auto j = nlohmann::json::parse(compare_json(compare_runs(runs, std::nullopt), runs));
  EXPECT_EQ(j["clock"], "simulated");
  EXPECT_EQ(j["series"], "eval");
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["name"], "topk");
  EXPECT_TRUE(fs::path(j["runs"][1]["dir"].get<std::string>()).is_absolute());
  EXPECT_DOUBLE_EQ(j["runs"][1]["bytes_ratio"].get<double>(), 0.01);
  EXPECT_TRUE(j["runs"][0]["target_reached"].get<bool>());
}

TEST_F(RunDirs, CompareRunDirsWritesTheReportWithoutPlots) {
  const std::string a = make_run("allreduce", 1000, 1.0, false, "allreduce").string();
  const std::string b = make_run("topk", 10, 1.0, false, "topk").string();
  CompareOptions o;
  o.out_dir = (root_ / "cmp").string();
  o.plot_note = "not requested (--no-plots)";
  compare_run_dirs({a, b + "/"}, o);  // a trailing slash still names the run "topk"
  std::ifstream in(root_ / "cmp" / "report.md");
  const std::string md((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(md.find("| allreduce |"), std::string::npos) << md;
  EXPECT_NE(md.find("| topk |"), std::string::npos) << md;
  EXPECT_NE(md.find("No plots: not requested (--no-plots)"), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(root_ / "cmp" / "compare.json"));

  // A missing run stops it before anything is written.
  o.out_dir = (root_ / "cmp2").string();
  const std::string msg = input_error([&] { compare_run_dirs({a, (root_ / "missing").string()}, o); });
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(root_ / "cmp2"));
}

// ---- the verdict and the warm-up warning ------------------------------------------------------

TEST_F(RunDirs, VerdictNamesTheFirstToTargetAndTheLeastSenderWithItsLossCost) {
  // b: a tenth of a's bytes, half its simulated time per step, eval losses 1.1x a's (2.2, 1.1, 0.55).
  const std::vector<RunResult> runs{read_run(make_run("a", 1000, 1.0, true, "allreduce").string(), "a"),
                                    read_run(make_run("b", 100, 0.5, true, "topk", 1.1).string(), "b")};
  const Comparison c = compare_runs(runs, 1.5);
  // Target 1.5: a at step 15 (15 s); b between 2.2 at step 10 and 1.1 at step 20, f = 0.7 / 1.1.
  const double b_time = 0.5 * (10 + 10 * 0.7 / 1.1);
  EXPECT_EQ(c.verdict.first, "b");
  EXPECT_NEAR(c.verdict.first_time_s, b_time, 1e-12);
  EXPECT_EQ(c.verdict.least, "b");
  EXPECT_DOUBLE_EQ(c.verdict.least_bytes, 750);  // b's inter-tier bytes (a: 7500)
  EXPECT_EQ(c.verdict.lowest, "a");
  EXPECT_NEAR(c.verdict.least_loss_cost, 0.55 - 0.5, 1e-12);
  const std::string& t = c.verdict.text;
  EXPECT_NE(t.find("b reaches the target eval loss first (" + std::to_string(b_time).substr(0, 4) + " s simulated, " +
                   std::to_string(15 / b_time).substr(0, 4) + "x faster than a)"), std::string::npos) << t;
  EXPECT_NE(t.find("b sends least across the slow tier (750 B per rank, 10.00% of a's) at +0.0500 final eval loss "
                   "over the lowest (a, 0.5000)"), std::string::npos) << t;

  const std::string md = report_markdown(c, runs, {});
  EXPECT_NE(md.find("\n" + t + "\n"), std::string::npos) << md;
  const auto j = nlohmann::json::parse(compare_json(c, runs));
  EXPECT_EQ(j["verdict"]["first_to_target"], "b");
  EXPECT_EQ(j["verdict"]["least_bytes"], "b");
  EXPECT_EQ(j["verdict"]["bytes_tier"], "inter");
  EXPECT_NEAR(j["verdict"]["least_bytes_loss_cost"].get<double>(), 0.05, 1e-12);
  EXPECT_EQ(j["verdict"]["text"], t);
  EXPECT_TRUE(j["as_params"].is_null());
  EXPECT_DOUBLE_EQ(j["runs"][1]["projection"].get<double>(), 1.0);
  // The curves as compared: b's records on the simulated clock, with its inter-tier bytes.
  ASSERT_EQ(j["runs"][1]["records"].size(), 6u);
  EXPECT_DOUBLE_EQ(j["runs"][1]["records"][1]["time_s"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(j["runs"][1]["records"][1]["bytes_inter"].get<double>(), 250);
  EXPECT_TRUE(j["runs"][1]["records"][0]["eval_loss"].is_null());
}

TEST_F(RunDirs, VerdictWhenNothingReachesTheTargetAndWithoutANetwork) {
  // Without a [network]: bytes sent; the baseline both sends least and has the lowest loss.
  const std::vector<RunResult> runs{read_run(make_run("a", 100, 1.0, false, "allreduce").string(), "a"),
                                    read_run(make_run("b", 1000, 1.0, false, "topk", 2.0).string(), "b")};
  const Comparison c = compare_runs(runs, 0.1);
  EXPECT_EQ(c.verdict.first, "");
  EXPECT_NE(c.verdict.text.find("no variant reaches the target eval loss 0.1000; a sends least (3.00 KB per rank) at "
                                "no loss cost (the lowest final eval loss, 0.5000)."),
            std::string::npos)
      << c.verdict.text;
  EXPECT_TRUE(nlohmann::json::parse(compare_json(c, runs))["verdict"]["first_to_target"].is_null());
  // One run: nothing to compare, no verdict.
  const std::vector<RunResult> one{runs.front()};
  const Comparison single = compare_runs(one, 0.1);
  EXPECT_EQ(single.verdict.text, "");
  EXPECT_TRUE(nlohmann::json::parse(compare_json(single, one))["verdict"].is_null());
}

TEST_F(RunDirs, DenseWarmupIsTheStrategysOwnKeyAndWarnsFromHalfTheSteps) {
  // 30 steps each: PowerSGD dense for start_iter = 100 (all 30), local SGD for 15 (half: warned),
  // DiLoCo for 14 (under half), top-k none; a phased run is not examined.
  const std::vector<RunResult> runs{
      read_run(make_run("allreduce", 100, 1.0, false, "allreduce").string(), "allreduce"),
      read_run(make_run("powersgd", 100, 1.0, false, "powersgd", 1.0, "\n[sync.powersgd]\nrank = 4\nstart_iter = 100\n").string(),
               "powersgd"),
      read_run(make_run("local", 100, 1.0, false, "local_sgd", 1.0, "\n[sync.local_sgd]\nperiod = 8\nwarmup_steps = 15\n").string(),
               "local"),
      read_run(make_run("diloco", 100, 1.0, false, "diloco", 1.0, "\n[sync.diloco]\nwarmup_steps = 14\n").string(), "diloco"),
      read_run(make_run("phased", 100, 1.0, false, "powersgd", 1.0,
                        "\n[sync.powersgd]\nstart_iter = 100\n\n[[sync.phases]]\nstrategy = \"allreduce\"\nsteps = 5\n").string(),
               "phased")};
  const std::optional<DenseWarmup> w = dense_warmup(runs[1]);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->key, "sync.powersgd.start_iter");
  EXPECT_EQ(w->steps, 100);
  EXPECT_FALSE(dense_warmup(runs[0]));  // allreduce: no section of its own with a warm-up
  EXPECT_EQ(dense_warmup(runs[2])->key, "sync.local_sgd.warmup_steps");
  EXPECT_FALSE(dense_warmup(runs[4]));

  const Comparison c = compare_runs(runs, std::nullopt);
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_EQ(c.warnings[0], "powersgd was dense for 30 of its 30 steps (100%, sync.powersgd.start_iter = 100): this "
                           "comparison mostly measures its warm-up; train longer or lower sync.powersgd.start_iter");
  EXPECT_EQ(c.warnings[1].rfind("local was dense for 15 of its 30 steps (50%, sync.local_sgd.warmup_steps = 15)", 0), 0u)
      << c.warnings[1];
  EXPECT_NE(report_markdown(c, runs, {}).find("**Warning**: " + c.warnings[0]), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(compare_json(c, runs))["warnings"][1], c.warnings[1]);
}

}  // namespace
}  // namespace laconic
