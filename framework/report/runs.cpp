#include "framework/report/runs.h"

#include <charconv>
#include <cmath>
#include <filesystem>

#include "core/check.h"
#include "core/input.h"
#include "framework/train/run_dir.h"
#include "framework/recipe/recipe.h"

namespace laconic {
namespace fs = std::filesystem;

// ---- run directories -------------------------------------------------------------------------

std::string RunResult::recipe_value(const std::string& key) const {
  for (const auto& [k, v] : recipe)
    if (k == key) return v;
  return "";
}

RunResult read_run(const std::string& dir, const std::string& name) {
  if (!fs::is_directory(dir)) LC_INPUT_ERROR(dir, ": not a run directory (no such directory)");
  for (const char* f : {"summary.json", "metrics.jsonl"})
    if (!fs::exists(fs::path(dir) / f))
      LC_INPUT_ERROR(dir, ": not a finished run: ", f, " is missing");
  const std::string summary_path = (fs::path(dir) / "summary.json").string();
  const RunSummary summary = parse_summary(read_text(summary_path), summary_path);
  const std::string metrics_path = (fs::path(dir) / "metrics.jsonl").string();
  RunResult r;
  r.name = name;
  r.dir = dir;
  r.steps = summary.steps;
  r.final_loss = summary.final_loss;
  r.eval_loss = summary.eval_loss;  // NaN when the run had no test split
  r.eval_accuracy = summary.eval_accuracy;
  r.bytes_sent = static_cast<double>(summary.bytes_sent);
  r.compression_ratio = summary.compression_ratio;
  r.wall_s = summary.wall_s;
  r.sim_time_s = summary.sim_time_s;
  r.peak_inter_bytes_per_s = summary.peak_inter_bytes_per_s;
  if (summary.bytes_inter_start) r.bytes_inter_start = static_cast<double>(*summary.bytes_inter_start);
  r.metrics = read_metrics(metrics_path);
  if (r.metrics.empty()) LC_INPUT_ERROR(metrics_path, ": no records");
  if (summary.bytes_inter)  // the end's drain included: a sync in flight at the last record
    r.bytes_inter = static_cast<double>(*summary.bytes_inter);
  else if (r.metrics.back().bytes_inter)  // a summary.json written before it carried the tier
    r.bytes_inter = static_cast<double>(*r.metrics.back().bytes_inter);
  // For the seeds, world sizes and differences the report states. A recipe written by another
  // version of Laconic is still TOML, so it is read as such, not as a Recipe.
  const fs::path recipe = fs::path(dir) / "recipe.resolved.toml";
  if (fs::exists(recipe)) r.recipe = flatten_toml(read_text(recipe.string())).value_or(FlatToml{});
  return r;
}

std::optional<TargetHit> time_to_target(const std::vector<MetricPoint>& metrics, LossSeries series,
                                        CompareClock clock, double target) {
  if (std::isnan(target)) return std::nullopt;
  const MetricPoint* prev = nullptr;
  auto loss_of = [&](const MetricPoint& p) { return series == LossSeries::eval ? p.eval_loss : p.loss; };
  auto time_of = [&](const MetricPoint& p) { return clock == CompareClock::simulated ? p.sim_time_s : p.wall_s; };
  for (const auto& p : metrics) {
    const double loss = loss_of(p);
    if (std::isnan(loss)) continue;  // a training-only record in the eval series
    if (loss <= target) {
      if (!prev) return TargetHit{static_cast<double>(p.step), time_of(p), static_cast<double>(p.bytes_sent)};
      const double l0 = loss_of(*prev);
      const double f = (l0 - target) / (l0 - loss);  // l0 > target >= loss: f in (0, 1]
      auto lerp = [f](double a, double b) { return a + f * (b - a); };
      return TargetHit{lerp(static_cast<double>(prev->step), static_cast<double>(p.step)),
                       lerp(time_of(*prev), time_of(p)), lerp(static_cast<double>(prev->bytes_sent), static_cast<double>(p.bytes_sent))};
    }
    prev = &p;
  }
  return std::nullopt;
}

std::optional<DenseWarmup> dense_warmup(const RunResult& run) {
  const std::string phases = run.recipe_value("sync.phases");
  if (!phases.empty() && phases != "[]") return std::nullopt;  // several strategies in turn
  std::string strategy = run.recipe_value("sync.strategy");
  if (strategy.size() >= 2 && strategy.front() == '"') strategy = strategy.substr(1, strategy.size() - 2);
  if (strategy.empty()) return std::nullopt;
  for (const char* name : {"warmup_steps", "start_iter"}) {
    const std::string key = "sync." + strategy + "." + name;
    const std::string v = run.recipe_value(key);
    std::int64_t steps = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), steps);
    if (!v.empty() && ec == std::errc{} && end == v.data() + v.size() && steps > 0) return DenseWarmup{key, steps};
  }
  return std::nullopt;
}

}  // namespace laconic
