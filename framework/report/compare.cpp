#include "framework/report/compare.h"
#include "framework/report/protocol.h"
#include "framework/report/seeds.h"
#include "framework/report/tune.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <streambuf>
#include <toml++/toml.h>

#include "core/check.h"
#include "core/launcher.h"
#include "core/units.h"
#include "framework/inference/export.h"
#include "framework/recipe/factory.h"
#include "framework/train/run_dir.h"
#include "framework/train/simulate.h"
#include "framework/train/trainer.h"
#include "framework/train/world.h"

extern char** environ;

namespace laconic {
namespace fs = std::filesystem;

namespace {

std::string fixed(double x, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << x;
  return os.str();
}

constexpr const char* kNone = "—";

std::string fmt_loss(double x) { return std::isnan(x) ? kNone : fixed(x, 4); }
std::string fmt_percent(double x) { return std::isnan(x) ? kNone : fixed(100.0 * x, 2) + "%"; }

std::string fmt_bytes(double b) { return std::isnan(b) ? kNone : format_bytes(b); }

std::string fmt_seconds(double s) {
  if (std::isnan(s)) return kNone;
  if (s < 1) return fixed(s, 3) + " s";
  if (s < 100) return fixed(s, 2) + " s";
  return fixed(s, 0) + " s";
}

// A link rate in bit/s, three significant digits ("185 Mbit/s").
std::string fmt_rate(double bytes_per_s) {
  if (std::isnan(bytes_per_s)) return kNone;
  double v = 8 * bytes_per_s;
  const char* unit = "bit/s";
  for (const char* u : {"kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"}) {
    if (v < 1000) break;
    v /= 1000;
    unit = u;
  }
  std::ostringstream os;
  os << std::setprecision(3) << v << " " << unit;
  return os.str();
}

// Ratios span orders of magnitude (top-k sends ~1% of the bytes): three significant digits.
std::string fmt_ratio(double x) {
  if (std::isnan(x) || std::isinf(x)) return kNone;
  if (x >= 100) return fixed(x, 0) + "x";
  std::ostringstream os;
  os << std::showpoint << std::setprecision(3) << x << "x";
  return os.str();
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// The same value for every run: "1 (every run)"; else "a: 1, b: 2"; "unknown" without recipes.
std::string common_value(const std::vector<RunResult>& runs, const std::string& key) {
  std::vector<std::string> values;
  std::set<std::string> distinct;
  for (const auto& r : runs) {
    std::string v = r.recipe_value(key);
    if (v.empty()) v = "unknown";
    distinct.insert(v);
    values.push_back(r.name + ": " + v);
  }
  if (distinct.size() == 1) return *distinct.begin() + (runs.size() > 1 ? " (every run)" : "");
  return join(values, ", ");
}

// The variants' log lines, each prefixed with "[name] " (also after '\r': the progress line).
class PrefixBuf : public std::streambuf {
 public:
  PrefixBuf(std::ostream& out, std::string prefix) : out_(out), prefix_(std::move(prefix)) {}

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    if (line_start_ && c != '\r' && c != '\n') out_ << prefix_;  // "\r\033[K": prefixed once
    line_start_ = c == '\n' || c == '\r';
    out_.put(static_cast<char>(c));
    return c;
  }
  int sync() override {
    out_.flush();
    return 0;
  }

 private:
  std::ostream& out_;
  std::string prefix_;
  bool line_start_ = true;
};

// Runs `python3 SCRIPT OUT_DIR` (python3 rather than the script itself: a lost executable bit
// must not cost the plots). Returns "" on success, else what to say in the report.
std::string run_plot(const std::string& script, const std::string& out_dir) {
  if (!fs::is_regular_file(script)) return "the plot script " + script + " does not exist";
  std::vector<std::string> args{"python3", script, out_dir};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int err = posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ); err != 0)
    return std::string("cannot run python3: ") + std::strerror(err);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return std::string("waiting for scripts/plot: ") + std::strerror(errno);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
    return "scripts/plot could not plot (matplotlib missing? apt-get install python3-matplotlib)";
  if (WIFEXITED(status)) return "scripts/plot failed with exit code " + std::to_string(WEXITSTATUS(status));
  return "scripts/plot was killed by signal " + std::to_string(WTERMSIG(status));
}

void check_target(const std::optional<double>& target) {
  if (target && !std::isfinite(*target)) LC_INPUT_ERROR("--target-loss: expected a finite number, got ", *target);
}

const char* const kPlots[] = {"loss_vs_steps.png", "loss_vs_bytes.png", "loss_vs_time.png", "pareto_bytes.png",
                              "pareto_time.png",     "sensitivity.png"};

// A --networks file's report folder: its stem.
std::string network_name(const std::string& path) { return fs::path(path).stem().string(); }

// --networks, before anything is trained or written: every file a valid [network] for every run.
void check_networks(const std::vector<Recipe>& recipes, const std::vector<std::string>& networks) {
  std::set<std::string> names;
  for (const std::string& n : networks) {
    for (const Recipe& r : recipes) (void)with_network_file(r, n);
    if (!names.insert(network_name(n)).second)
      LC_INPUT_ERROR("compare: --networks: two files named ", network_name(n), " (each gets a report folder of that name)");
  }
}

// --as-params, before anything is trained or written: the projection is of the simulated clock,
// so every run (named by names[i]) needs a [network] of its own to be replayed on.
void check_projection(const std::vector<Recipe>& recipes, const std::vector<std::string>& names, std::int64_t as_params) {
  if (as_params <= 0) return;
  for (std::size_t i = 0; i < recipes.size(); ++i)
    if (recipes[i].network.groups == 0 && recipes[i].network.platform.empty())
      LC_INPUT_ERROR("compare: --as-params projects the simulated clock, and ", names[i],
                     " has no [network] (give the recipe one, e.g. --network.groups=2)");
}

// `run` with its simulated figures from a replay of its trace (simulate_run: on `network_file`,
// "" = its own [network]; projected onto as_params parameters when > 0), its summary and timeline
// in out_dir. The projection multiplies bytes by the replay's scale: metrics' bytes_sent are
// scaled alike, inter-tier bytes are the replay's own count.
RunResult replayed(const RunResult& run, const std::string& network_file, std::int64_t as_params,
                   const std::string& out_dir) {
  SimulateOptions so;
  so.network_file = network_file;
  so.as_params = as_params;
  so.out_dir = out_dir;
  const Simulation sim = simulate_run(run.dir, so);
  RunResult r = run;
  r.sim_time_s = sim.time_s;
  r.bytes_inter = static_cast<double>(sim.bytes_inter);
  r.peak_inter_bytes_per_s = sim.peak_inter_bytes_per_s;
  r.projection = sim.scale;
  r.bytes_sent *= sim.scale;
  r.bytes_inter_start *= sim.scale;
  for (MetricPoint& m : r.metrics) {
    m.sim_time_s = sim.time_at_step(m.step);
    m.bytes_sent = static_cast<std::uint64_t>(std::llround(static_cast<double>(m.bytes_sent) * sim.scale));
    m.bytes_inter = sim.inter_at_step(m.step);
  }
  return r;
}

// compare.json, the plots and report.md of these runs in opts.out_dir; the table on the log.
void write_report(const std::vector<RunResult>& runs, ReportContext ctx, const CompareOptions& opts) {
  Comparison c = compare_runs(runs, opts.target);
  c.as_params = opts.as_params;
  make_directories(opts.out_dir);
  write_file_atomic(opts.out_dir + "/compare.json", compare_json(c, runs));
  ctx.command = opts.command;
  ctx.plot_note = opts.plot_note;
  if (!opts.plot_script.empty()) {
    for (const char* png : kPlots) fs::remove(fs::path(opts.out_dir) / png);  // no stale plots
    ctx.plot_note = run_plot(opts.plot_script, opts.out_dir);
    if (ctx.plot_note.empty())
      for (const char* png : kPlots)
        if (fs::exists(fs::path(opts.out_dir) / png)) ctx.plots.push_back(png);
  }
  if (!ctx.plot_note.empty() && opts.log) *opts.log << "compare: plots skipped: " << ctx.plot_note << "\n";
  std::string report = report_markdown(c, runs, ctx);
  if (opts.seeds > 1 || opts.budget) report += seeds_markdown(runs, group_by_variant(runs, c, opts.budget), c, opts.budget);
  report += ctx.appendix;
  write_file_atomic(opts.out_dir + "/report.md", report);
  if (opts.log) {
    // The table alone: the report's lines that start with '|'; then the verdict and warnings.
    std::istringstream in(report);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("|", 0) == 0) *opts.log << line << "\n";
    if (!c.verdict.text.empty()) *opts.log << "compare: " << c.verdict.text << "\n";
    for (const std::string& w : c.warnings) *opts.log << "compare: warning: " << w << "\n";
    *opts.log << "compare: wrote " << opts.out_dir << "/report.md" << std::endl;
  }
}

// The shared tail of both modes: the report (of the projected replays with --as-params), and with
// --networks each run replayed on each network: a report per network and the runs x networks table.
void write_comparison(const std::vector<RunResult>& runs, const ReportContext& ctx, const CompareOptions& opts) {
  const std::string projected = "projected-" + std::to_string(opts.as_params);
  if (opts.as_params > 0) {
    std::vector<RunResult> on_own;
    for (const RunResult& r : runs) on_own.push_back(replayed(r, "", opts.as_params, (fs::path(r.dir) / projected).string()));
    write_report(on_own, ctx, opts);
  } else {
    write_report(runs, ctx, opts);
  }
  if (opts.networks.empty()) return;
  std::vector<std::string> names;
  std::vector<Comparison> per_network;
  for (const std::string& net : opts.networks) {
    const std::string name = network_name(net);
    std::vector<RunResult> on_net;
    for (const RunResult& r : runs) {
      on_net.push_back(replayed(r, net, opts.as_params,
                                (fs::path(r.dir) / ("simulated-" + name + (opts.as_params > 0 ? "-" + projected : ""))).string()));
      if (opts.log) *opts.log << "compare: " << r.name << " on " << name << ": " << on_net.back().sim_time_s << " s simulated" << std::endl;
    }
    CompareOptions o = opts;
    o.out_dir = (fs::path(opts.out_dir) / name).string();
    write_report(on_net, ctx, o);
    names.push_back(name);
    per_network.push_back(compare_runs(on_net, opts.target));
  }
  const std::string table = networks_markdown(names, per_network, runs);
  write_file_atomic(opts.out_dir + "/networks.md", table);
  if (opts.log) *opts.log << table << "compare: wrote " << opts.out_dir << "/networks.md" << std::endl;
}

}  // namespace

std::string networks_markdown(const std::vector<std::string>& names, const std::vector<Comparison>& per_network,
                              const std::vector<RunResult>& runs) {
  std::ostringstream os;
  os << "# Runs x networks\n\nEvery run's event trace replayed on each network (SimGrid; "
        "docs/simulation.md): simulated time, and in brackets the simulated time to the target loss "
        "of that network's report (`<network>/report.md`).\n\n| run |";
  for (const auto& n : names) os << " " << n << " |";
  os << "\n| --- |";
  for (std::size_t i = 0; i < names.size(); ++i) os << " --- |";
  os << "\n";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    os << "| " << runs[r].name << " |";
    for (const Comparison& c : per_network) {
      const CompareRow& row = c.rows[r];
      os << " " << fmt_seconds(row.time_s) << " (" << (row.hit ? fmt_seconds(row.hit->time_s) : std::string("not reached"))
         << ") |";
    }
    os << "\n";
  }
  return os.str();
}

// ---- the comparison --------------------------------------------------------------------------

namespace {

// One warning per variant (its first seed's recipe and steps: the seeds share both).
std::vector<std::string> warmup_warnings(const std::vector<RunResult>& runs, const std::vector<SeedGroup>& groups) {
  std::vector<std::string> out;
  for (const SeedGroup& g : groups) {
    const RunResult& r = runs[g.runs.front()];
    const std::optional<DenseWarmup> w = dense_warmup(r);
    if (!w || r.steps <= 0) continue;
    const std::int64_t dense = std::min(w->steps, r.steps);
    const double fraction = static_cast<double>(dense) / static_cast<double>(r.steps);
    if (fraction < kWarmupWarnFraction) continue;
    out.push_back(g.name + " was dense for " + std::to_string(dense) + " of its " + std::to_string(r.steps) + " steps (" +
                  fixed(100 * fraction, 0) + "%, " + w->key + " = " + std::to_string(w->steps) +
                  "): this comparison mostly measures its warm-up; train longer or lower " + w->key);
  }
  return out;
}

Verdict verdict_of(const Comparison& c, const std::vector<SeedGroup>& groups) {
  Verdict v;
  if (groups.size() < 2) return v;
  const bool eval = c.series == LossSeries::eval;
  const std::string loss_word = eval ? "eval loss" : "training loss";
  std::vector<double> time(groups.size(), kAbsent), bytes(groups.size()), loss(groups.size());
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const SeedGroup& g = groups[k];
    std::vector<double> t;
    for (const std::size_t i : g.runs)
      if (c.rows[i].hit) t.push_back(c.rows[i].hit->time_s);
    if (t.size() == g.runs.size()) time[k] = stat_of(t).mean;
    bytes[k] = (c.simulated_network ? g.bytes_inter : g.bytes_sent).mean;
    loss[k] = (eval ? g.eval_loss : g.final_loss).mean;
  }
  // The first index of the least non-NaN value (npos when there is none).
  const auto least = [](const std::vector<double>& x) {
    std::size_t best = std::string::npos;
    for (std::size_t k = 0; k < x.size(); ++k)
      if (!std::isnan(x[k]) && (best == std::string::npos || x[k] < x[best])) best = k;
    return best;
  };
  const std::size_t first = least(time), fewest = least(bytes), lowest = least(loss);
  const std::string clock = c.clock == CompareClock::simulated ? " simulated" : " on the wall clock";
  std::ostringstream os;
  os << "**Verdict**: ";
  if (first == std::string::npos) {
    os << "no variant reaches the target " << loss_word << (std::isnan(c.target) ? "" : " " + fixed(c.target, 4));
  } else {
    v.first = groups[first].name;
    v.first_time_s = time[first];
    os << v.first << " reaches the target " << loss_word << " first (" << fmt_seconds(time[first]) << clock;
    if (first != 0 && !std::isnan(time[0]) && time[first] > 0)
      os << ", " << fixed(time[0] / time[first], 2) << "x faster than " << groups[0].name;
    os << ")";
  }
  if (lowest != std::string::npos) {
    v.lowest = groups[lowest].name;
    v.lowest_loss = loss[lowest];
  }
  if (fewest != std::string::npos) {
    v.least = groups[fewest].name;
    v.least_bytes = bytes[fewest];
    os << "; " << v.least << " sends least" << (c.simulated_network ? " across the slow tier (" : " (")
       << fmt_bytes(bytes[fewest]) << " per rank";
    if (fewest != 0 && bytes[0] > 0) os << ", " << fmt_percent(bytes[fewest] / bytes[0]) << " of " << groups[0].name << "'s";
    os << ")";
    if (lowest != std::string::npos && !std::isnan(loss[fewest])) {
      v.least_loss_cost = loss[fewest] - loss[lowest];
      if (fewest == lowest || v.least_loss_cost == 0)
        os << " at no loss cost (the lowest final " << loss_word << ", " << fixed(loss[fewest], 4) << ")";
      else
        os << " at +" << fixed(v.least_loss_cost, 4) << " final " << loss_word << " over the lowest (" << v.lowest
           << ", " << fixed(loss[lowest], 4) << ")";
    }
  }
  os << ".";
  v.text = os.str();
  return v;
}

}  // namespace

Comparison compare_runs(const std::vector<RunResult>& runs, std::optional<double> target) {
  LC_CHECK(!runs.empty(), "no runs to compare");
  Comparison c;
  const bool all_sim = std::all_of(runs.begin(), runs.end(), [](const RunResult& r) { return !std::isnan(r.sim_time_s); });
  c.clock = all_sim ? CompareClock::simulated : CompareClock::wall;
  const bool all_eval = std::all_of(runs.begin(), runs.end(), [](const RunResult& r) {
    return std::any_of(r.metrics.begin(), r.metrics.end(), [](const MetricPoint& p) { return !std::isnan(p.eval_loss); });
  });
  c.series = all_eval ? LossSeries::eval : LossSeries::train;
  if (target) {
    check_target(target);
    c.target = *target;
  } else {
    const RunResult& base = runs.front();
    double final = c.series == LossSeries::eval ? base.eval_loss : base.final_loss;
    if (std::isnan(final) && c.series == LossSeries::eval)  // summary without it: the last evaluation
      for (const auto& p : base.metrics)
        if (!std::isnan(p.eval_loss)) final = p.eval_loss;
    c.target = final * kDefaultTargetSlack;
    c.default_target = true;
  }
  for (const auto& r : runs) {
    CompareRow row;
    row.name = r.name;
    row.eval_loss = r.eval_loss;
    row.eval_accuracy = r.eval_accuracy;
    row.final_loss = r.final_loss;
    row.bytes_sent = r.bytes_sent;
    row.bytes_inter = r.bytes_inter;
    row.peak_inter_bytes_per_s = r.peak_inter_bytes_per_s;
    row.bytes_inter_training = r.bytes_inter - r.bytes_inter_start;  // NaN when either is unknown
    row.compression_ratio = r.compression_ratio;
    row.time_s = c.clock == CompareClock::simulated ? r.sim_time_s : r.wall_s;
    row.hit = time_to_target(r.metrics, c.series, c.clock, c.target);
    if (!std::isnan(r.bytes_inter)) c.simulated_network = true;
    c.rows.push_back(row);
  }
  const CompareRow& base = c.rows.front();
  for (auto& row : c.rows) {
    if (base.hit && row.hit && row.hit->time_s > 0) row.speedup = base.hit->time_s / row.hit->time_s;
    if (base.bytes_sent > 0) row.bytes_ratio = row.bytes_sent / base.bytes_sent;
  }
  const std::vector<SeedGroup> groups = group_by_variant(runs, c, std::nullopt);
  c.verdict = verdict_of(c, groups);
  c.warnings = warmup_warnings(runs, groups);
  return c;
}

namespace {

bool any_evaluated(const Comparison& c) {
  return std::any_of(c.rows.begin(), c.rows.end(), [](const CompareRow& r) { return !std::isnan(r.eval_loss); });
}

std::string series_word(const Comparison& c) { return c.series == LossSeries::eval ? "eval loss" : "training loss"; }

// The title and what was compared: the command, the recipe and its variants (or the run
// directories), the seed, the world size and the baseline.
void write_context(std::ostream& os, const std::vector<RunResult>& runs, const ReportContext& ctx) {
  std::vector<std::string> names;
  for (const auto& r : runs) names.push_back(r.name);
  os << "# Comparison: " << join(names, " vs ") << "\n\n";
  if (!ctx.command.empty()) os << "```\n" << ctx.command << "\n```\n\n";
  if (!ctx.recipe.empty()) {
    os << "- **Recipe**: `" << ctx.recipe << "`";
    if (!ctx.overrides.empty()) {
      os << " with";
      for (const auto& o : ctx.overrides) os << " `--" << o << "`";
    }
    os << "\n";
  }
  for (const auto& a : ctx.axes) os << "- **Varied**: `" << a.key << "` = " << join(a.values, ", ") << "\n";
  if (ctx.axes.empty()) {
    os << "- **Runs**:";
    for (const auto& r : runs) os << " `" << r.dir << "`";
    os << "\n";
  }
  os << "- **Seed**: " << common_value(runs, "run.seed") << "; **world size**: "
     << common_value(runs, "distributed.world_size") << "\n";
  os << "- **Baseline**: " << runs.front().name << " (the first run): speedups and byte ratios are relative to it\n";
  os << protocol_markdown(runs);
}

// How the runs are measured: the clock, the loss series, the target loss and any projection.
void write_measures(std::ostream& os, const Comparison& c, const std::vector<RunResult>& runs) {
  const bool sim = c.clock == CompareClock::simulated;
  const bool eval = c.series == LossSeries::eval;
  os << "- **Clock**: "
     << (sim ? "simulated time (`sim_time_s`: the replay of the run's trace on its `[network]`, docs/simulation.md)"
             : "wall time on this machine (`wall_s`; evaluation included)");
  if (!sim && std::any_of(runs.begin(), runs.end(), [](const RunResult& r) { return !std::isnan(r.sim_time_s); }))
    os << "; some runs have no simulated clock, so none is used";
  os << "\n";
  os << "- **Loss**: "
     << (eval ? "evaluation loss on the test split (`eval_loss`)"
              : "training loss (`loss`, rank 0's mean over each log interval)");
  if (!eval && any_evaluated(c)) os << "; not every run was evaluated, so training loss is compared";
  os << "\n";
  os << "- **Target loss**: ";
  if (std::isnan(c.target)) {
    os << "none (the baseline has no final " << series_word(c) << ")\n";
  } else if (c.default_target) {
    os << fixed(c.target, 4) << " = the baseline's final " << series_word(c) << " x " << kDefaultTargetSlack
       << " (2% above where it ended; choose another with `--target-loss`)\n";
  } else {
    os << fixed(c.target, 4) << " (`--target-loss`)\n";
  }
  if (c.as_params > 0) {
    char n[32];
    std::snprintf(n, sizeof n, "%.4g", static_cast<double>(c.as_params));
    os << "- **Projection**: onto N = " << n << " parameters: every run's trace replayed with its message "
          "bytes and compute x N / its parameters (";
    for (std::size_t i = 0; i < runs.size(); ++i) os << (i ? ", " : "") << runs[i].name << " " << fmt_ratio(runs[i].projection);
    os << "); times and bytes are the projected model's, losses as measured\n";
  }
}

// The results table's columns: eval and inter-group ones only where some run has them.
std::vector<std::string> result_columns(const Comparison& c) {
  std::vector<std::string> head{"run"};
  if (any_evaluated(c)) head.insert(head.end(), {"eval loss", "eval acc"});
  head.insert(head.end(), {"train loss", "sent/rank"});
  if (c.simulated_network) head.insert(head.end(), {"inter-group", "in training", "peak inter-group"});
  head.insert(head.end(), {"compression", c.clock == CompareClock::simulated ? "simulated time" : "wall time",
                           "time to target", "steps to target", "speedup", "bytes vs baseline"});
  return head;
}

std::vector<std::string> result_cells(const Comparison& c, const CompareRow& row) {
  std::vector<std::string> cells{row.name};
  if (any_evaluated(c)) cells.insert(cells.end(), {fmt_loss(row.eval_loss), fmt_percent(row.eval_accuracy)});
  cells.insert(cells.end(), {fmt_loss(row.final_loss), fmt_bytes(row.bytes_sent)});
  if (c.simulated_network)
    cells.insert(cells.end(), {fmt_bytes(row.bytes_inter),
                               fmt_bytes(row.bytes_inter_training),
                               fmt_rate(row.peak_inter_bytes_per_s)});
  cells.push_back(fmt_ratio(row.compression_ratio));
  cells.push_back(fmt_seconds(row.time_s));
  if (row.hit) {
    cells.push_back(fmt_seconds(row.hit->time_s));
    cells.push_back(fixed(row.hit->step, 0));
  } else {
    cells.insert(cells.end(), {"not reached", "not reached"});
  }
  cells.push_back(std::isnan(row.speedup) ? kNone : fixed(row.speedup, 2) + "x");
  cells.push_back(fmt_ratio(row.bytes_ratio));
  return cells;
}

// The results table and what its columns mean.
void write_results(std::ostream& os, const Comparison& c) {
  os << "\n## Results\n\n";
  const std::vector<std::string> head = result_columns(c);
  os << "| " << join(head, " | ") << " |\n|";
  for (std::size_t i = 0; i < head.size(); ++i) os << (i == 0 ? " --- |" : " ---: |");
  os << "\n";
  for (const auto& row : c.rows) os << "| " << join(result_cells(c, row), " | ") << " |\n";
  os << "\n"
     << "- *sent/rank*: bytes rank 0 sent over the whole run";
  if (c.simulated_network)
    os << "; *inter-group*: the part of them that crossed between `[network]` groups; *in training*: "
          "less the start's broadcast of the parameters (once per run, before step 0); *peak inter-group*: the "
          "most of those bytes in one log interval over its simulated time, the bandwidth the link must provision";
  os << "\n"
     << "- *compression*: fp32 gradient bytes / bytes of their encoding\n"
     << "- *time to target*, *steps to target*: where the " << series_word(c)
     << " first reached the target, interpolated linearly between the last record above it and the first at "
        "or below it (the first record itself when that is already at or below)\n"
     << "- *speedup*: the baseline's time to target / this run's (above 1: faster); *bytes vs baseline*: "
        "sent/rank / the baseline's\n";
}

// A run's row of the step-time table ("" when its records have no step_time_*).
std::string step_time_row(const RunResult& r) {
  double median = 0, slowest = 0;
  int n = 0;
  std::map<std::int64_t, int> slowest_count;
  for (const MetricPoint& p : r.metrics) {
    if (std::isnan(p.step_time_median_s) || std::isnan(p.step_time_max_s)) continue;
    median += p.step_time_median_s;
    slowest += p.step_time_max_s;
    ++slowest_count[p.slowest_rank];
    ++n;
  }
  if (n == 0) return "";
  const auto most = std::max_element(slowest_count.begin(), slowest_count.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  std::ostringstream row;
  row << "| " << r.name << " | " << fixed(1e3 * median / n, 3) << " ms | " << fixed(1e3 * slowest / n, 3) << " ms | "
      << (median > 0 ? fixed(slowest / median, 2) + "x" : kNone) << " | " << most->first << " (" << most->second << " of "
      << n << " records) |\n";
  return row.str();
}

// Per-rank compute spread (metrics records' step_time_*): which rank held the others up.
void write_step_times(std::ostream& os, const std::vector<RunResult>& runs) {
  std::string rows;
  for (const RunResult& r : runs) rows += step_time_row(r);
  if (rows.empty()) return;
  os << "\n## Step time across ranks\n\n| run | median rank's compute per step | slowest rank's | spread | slowest "
        "rank |\n| --- | ---: | ---: | ---: | ---: |\n"
     << rows
     << "\n- means over the metrics records of each rank's compute per step since the previous record (times its "
        "`[network]` straggler slowdown when simulated); *spread*: slowest / median, 1.00x when the ranks keep pace; "
        "*slowest rank*: the one slowest in most records\n";
}

// The recipe keys of `r` that differ from the baseline's, as "`key = value`" (run names and
// output directories always differ and say nothing).
std::vector<std::string> recipe_differences(const RunResult& base, const RunResult& r) {
  std::vector<std::string> d;
  std::set<std::string> keys;
  for (const auto& [k, v] : base.recipe) keys.insert(k);
  for (const auto& [k, v] : r.recipe) keys.insert(k);
  for (const auto& k : keys) {
    if (k == "run.name" || k == "run.out_dir") continue;
    const std::string a = base.recipe_value(k), b = r.recipe_value(k);
    if (a != b) d.push_back("`" + k + " = " + (b.empty() ? "(absent)" : b) + "`");
  }
  return d;
}

// What differs from the baseline, from the runs' recipe.resolved.toml.
void write_differences(std::ostream& os, const std::vector<RunResult>& runs) {
  std::ostringstream diffs;
  const RunResult& base = runs.front();
  for (std::size_t i = 1; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    if (r.recipe.empty() || base.recipe.empty()) continue;
    const std::vector<std::string> d = recipe_differences(base, r);
    diffs << "- **" << r.name << "**: " << (d.empty() ? "the same recipe" : join(d, ", ")) << "\n";
  }
  if (!diffs.str().empty())
    os << "\n## Differences from the baseline\n\n(from each run's `recipe.resolved.toml`)\n\n" << diffs.str();
}

void write_plots(std::ostream& os, const ReportContext& ctx) {
  os << "\n## Plots\n\n";
  if (!ctx.plots.empty()) {
    os << "Eval loss as markers, training loss as a thin line of the same colour; the dashed line is the "
          "target.\n\n";
    for (const auto& p : ctx.plots) os << "![" << p.substr(0, p.rfind('.')) << "](" << p << ")\n\n";
  } else {
    os << "No plots: " << (ctx.plot_note.empty() ? "none were made" : ctx.plot_note)
       << ". `scripts/plot DIR` makes them from this directory's `compare.json`.\n";
  }
}

}  // namespace

std::string report_markdown(const Comparison& c, const std::vector<RunResult>& runs, const ReportContext& ctx) {
  LC_CHECK(c.rows.size() == runs.size() && !runs.empty(), "rows and runs disagree");
  std::ostringstream os;
  write_context(os, runs, ctx);
  write_measures(os, c, runs);
  if (!c.verdict.text.empty()) os << "\n" << c.verdict.text << "\n";
  for (const std::string& w : c.warnings) os << "\n**Warning**: " << w << "\n";
  write_results(os, c);
  write_step_times(os, runs);
  write_differences(os, runs);
  write_plots(os, ctx);
  return os.str();
}

namespace {

nlohmann::json verdict_json(const Comparison& c) {
  if (c.verdict.text.empty()) return nullptr;
  const auto name = [](const std::string& n) { return n.empty() ? nlohmann::json(nullptr) : nlohmann::json(n); };
  const Verdict& v = c.verdict;
  return {{"first_to_target", name(v.first)}, {"first_time_to_target_s", v.first_time_s},
          {"least_bytes", name(v.least)}, {"least_bytes_per_rank", v.least_bytes},
          {"bytes_tier", c.simulated_network ? "inter" : "sent"},
          {"least_bytes_loss_cost", v.least_loss_cost}, {"lowest_loss", name(v.lowest)},
          {"lowest_final_loss", v.lowest_loss}, {"text", v.text}};
}

// The curves as this comparison sees them (its clock; replayed or projected when it replayed),
// which scripts/plot draws: metrics.jsonl holds the run's own measurement only.
nlohmann::json records_json(const Comparison& c, const RunResult& run) {
  nlohmann::json records = nlohmann::json::array();
  const auto opt = [](const std::optional<std::uint64_t>& b) { return b ? nlohmann::json(*b) : nlohmann::json(nullptr); };
  for (const MetricPoint& p : run.metrics)
    records.push_back({{"step", p.step}, {"loss", p.loss}, {"eval_loss", p.eval_loss}, {"bytes_sent", p.bytes_sent},
                       {"bytes_inter", opt(p.bytes_inter)},
                       {"time_s", c.clock == CompareClock::simulated ? p.sim_time_s : p.wall_s}});
  return records;
}

nlohmann::json run_json(const Comparison& c, const RunResult& run, const CompareRow& row) {
  nlohmann::json r;
  r["name"] = run.name;
  r["dir"] = fs::absolute(run.dir).lexically_normal().string();  // plots work from anywhere
  r["eval_loss"] = row.eval_loss;
  r["eval_accuracy"] = row.eval_accuracy;
  r["final_loss"] = row.final_loss;
  r["bytes_sent"] = row.bytes_sent;
  r["bytes_inter"] = row.bytes_inter;
  r["peak_inter_bytes_per_s"] = row.peak_inter_bytes_per_s;
  r["bytes_inter_training"] = row.bytes_inter_training;
  r["compression_ratio"] = row.compression_ratio;
  r["time_s"] = row.time_s;
  r["target_reached"] = row.hit.has_value();
  r["time_to_target_s"] = row.hit ? row.hit->time_s : kAbsent;
  r["steps_to_target"] = row.hit ? row.hit->step : kAbsent;
  r["bytes_to_target"] = row.hit ? row.hit->bytes : kAbsent;
  r["speedup"] = row.speedup;
  r["bytes_ratio"] = row.bytes_ratio;
  r["projection"] = run.projection;
  r["records"] = records_json(c, run);
  return r;
}

}  // namespace

std::string compare_json(const Comparison& c, const std::vector<RunResult>& runs) {
  nlohmann::json j;
  j["clock"] = c.clock == CompareClock::simulated ? "simulated" : "wall";
  j["series"] = c.series == LossSeries::eval ? "eval" : "train";
  j["target"] = c.target;  // NaN is written as null
  j["default_target"] = c.default_target;
  j["as_params"] = c.as_params > 0 ? nlohmann::json(c.as_params) : nlohmann::json(nullptr);
  j["verdict"] = verdict_json(c);
  j["warnings"] = c.warnings;
  j["runs"] = nlohmann::json::array();
  for (std::size_t i = 0; i < runs.size(); ++i) j["runs"].push_back(run_json(c, runs[i], c.rows[i]));
  // The variants over their seeds (one run each without --seeds), for the plots' bands and fronts.
  // From the second on, the paired difference of the final loss against the first (seeds.h).
  j["groups"] = nlohmann::json::array();
  const std::vector<SeedGroup> groups = group_by_variant(runs, c, std::nullopt);
  const std::vector<PairedRow> paired = paired_rows(runs, groups, c, std::nullopt);
  for (std::size_t k = 0; k < groups.size(); ++k) {
    nlohmann::json o;
    o["name"] = groups[k].name;
    o["runs"] = groups[k].runs;
    if (k > 0 && groups[k].runs.size() > 1) {
      const PairedRow& p = paired[k - 1];
      o["loss_difference"] = {{"mean", p.loss.mean}, {"lo95", p.loss.lo}, {"hi95", p.loss.hi}, {"pairs", p.loss.n},
                              {"baseline_mean", p.baseline_loss}, {"verdict", p.verdict}};
    }
    j["groups"].push_back(o);
  }
  return j.dump(2) + "\n";
}

// ---- the subcommand ----------------------------------------------------------------------------

namespace {

// The flags compare_variants refuses now, not after training every variant.
void check_variant_flags(const std::vector<std::string>& vary_specs, const CompareOptions& opts) {
  check_target(opts.target);
  // Checked in every build: a non-MPI trainer under mpirun would run the comparison once per process.
  if (launched_by_mpi_launcher())
    LC_INPUT_ERROR("compare: not supported under mpirun: it trains the variants one after another "
                   "in one process on the threads backend; run it without mpirun");
  if (vary_specs.empty()) LC_INPUT_ERROR("compare: --recipe needs at least one --vary section.key=v1,v2");
  if (opts.seeds < 1) LC_INPUT_ERROR("compare: --seeds: expected at least 1, got ", opts.seeds);
  if (opts.warm_start < 0) LC_INPUT_ERROR("compare: --warm-start: expected a number of steps >= 1, got ", opts.warm_start);
}

// Each variant once per seed (base + 0..seeds-1), seeds innermost, named "<variant>/seed<k>"
// (its directory too).
std::vector<Variant> seeded_variants(const std::vector<Variant>& variants, int seeds, std::uint64_t base) {
  std::vector<Variant> seeded;
  for (const Variant& v : variants)
    for (int k = 0; k < seeds; ++k) {
      Variant s = v;
      s.name = v.name + "/seed" + std::to_string(k);
      s.assignments.push_back("run.seed=" + std::to_string(base + static_cast<std::uint64_t>(k)));
      seeded.push_back(std::move(s));
    }
  return seeded;
}

// load_recipe, with an error about one of v's assignments named as the --vary the user wrote.
Recipe load_variant(const std::string& recipe_path, const std::vector<std::string>& all, const Variant& v) {
  try {
    return load_recipe(recipe_path, all);
  } catch (const InputError& e) {
    // The recipe names a bad override "--key=value"; the user wrote it as part of a --vary.
    const std::string msg = e.what();
    for (const auto& a : v.assignments)
      if (msg.rfind("--" + a + ":", 0) == 0) throw InputError("--vary " + msg.substr(2));
    throw;
  }
}

// The recipe's run.seed as its first variant has it: the shared overrides alone need not make a
// valid recipe (a --vary may supply what a cross-field check needs, such as network.groups).
std::uint64_t base_seed(const std::string& recipe_path, const std::vector<std::string>& overrides, const Variant& first) {
  std::vector<std::string> all = overrides;
  all.insert(all.end(), first.assignments.begin(), first.assignments.end());
  return load_variant(recipe_path, all, first).run.seed;
}

// Variant v's recipe: the shared overrides, then its assignments.
Recipe variant_recipe(const std::string& recipe_path, const std::vector<std::string>& overrides, const Variant& v,
                      const CompareOptions& opts) {
  std::vector<std::string> all = overrides;
  all.insert(all.end(), v.assignments.begin(), v.assignments.end());
  if (!opts.networks.empty() || opts.as_params > 0) all.push_back("train.trace=true");  // replayed afterwards
  Recipe r = load_variant(recipe_path, all, v);
  // Not under a launcher (refused above), "auto" is the threads backend: only "mpi" is refused.
  if (r.distributed.backend == BackendKind::mpi)
    LC_INPUT_ERROR("compare: variant ", v.name, ": distributed.backend = \"mpi\": compare runs every "
                   "variant on the threads backend (use --distributed.backend=threads)");
  return r;
}

// Every variant's recipe, resolved and checked (with --networks and --as-params) before anything
// is trained or written.
std::vector<Recipe> variant_recipes(const std::string& recipe_path, const std::vector<std::string>& overrides,
                                    const std::vector<Variant>& variants, const CompareOptions& opts) {
  std::vector<Recipe> recipes;
  for (const auto& v : variants) recipes.push_back(variant_recipe(recipe_path, overrides, v, opts));
  check_networks(recipes, opts.networks);
  std::vector<std::string> names;
  for (const Variant& v : variants) names.push_back("variant " + v.name);
  check_projection(recipes, names, opts.as_params);
  return recipes;
}

// The variants' data: one load per distinct [data] table, so the variants see the very same examples.
struct VariantData {
  std::vector<TrainData> loaded;
  std::vector<std::size_t> of;  // of[i]: recipes[i]'s, an index into loaded
  const TrainData& operator[](std::size_t i) const { return loaded[of[i]]; }
};

VariantData load_variant_data(const std::vector<Recipe>& recipes) {
  VariantData data;
  data.of.resize(recipes.size());
  std::vector<const Recipe*> loaded_for;
  for (std::size_t i = 0; i < recipes.size(); ++i) {
    std::size_t d = 0;
    while (d < loaded_for.size() && !(loaded_for[d]->data == recipes[i].data)) ++d;
    if (d == loaded_for.size()) {
      LoadOptions load;
      load.cache_dir = recipes[i].run.out_dir;  // the tokenizer cache, as a plain run keeps it
      data.loaded.push_back(load_data(recipes[i], load));
      loaded_for.push_back(&recipes[i]);
    }
    data.of[i] = d;
  }
  return data;
}

// Variant i of n, trained into out_dir/<its name>, its log lines prefixed "[name] ", and read
// back from its directory, as --runs reads it: the replay of a [network] run rewrites
// metrics.jsonl's sim_time_s after training, so the records in memory lack the simulated clock.
RunResult train_variant(const Variant& v, std::size_t i, std::size_t n, const Recipe& recipe, const TrainData& data,
                        const CompareOptions& opts) {
  const std::string dir = (fs::path(opts.out_dir) / v.name).string();
  std::optional<PrefixBuf> buf;
  std::optional<std::ostream> prefixed;
  TrainOptions t;
  t.run_dir = dir;
  if (opts.log) {
    *opts.log << "compare: [" << i + 1 << "/" << n << "] " << v.name << ": " << join(v.assignments, " ") << std::endl;
    buf.emplace(*opts.log, "[" + v.name + "] ");
    prefixed.emplace(&*buf);
    t.log = &*prefixed;
    t.progress_line = opts.progress_line;
  }
  TrainSummary s = train(recipe, data, t);
  if (t.log) *t.log << done_line(s) << std::endl;
  return read_run(dir, v.name);
}

// A finished run in dir whose recipe is `recipe` (its recipe.resolved.toml read back and printed
// again, keys added to the schema since taking their defaults): --tune reuses it. A finished run of another recipe
// there is refused before anything trains: a result is never overwritten. A run without
// summary.json (stopped) trains again.
bool finished_run_of(const std::string& dir, const Recipe& recipe) {
  if (!fs::exists(fs::path(dir) / "summary.json")) return false;
  const fs::path resolved = fs::path(dir) / "recipe.resolved.toml";
  bool same = false;
  if (fs::exists(resolved)) try {
      // Compared as printed: the sections of components a recipe does not use are not.
      Recipe had = load_recipe(resolved.string());
      had.path = recipe.path;
      same = to_toml(had) == to_toml(recipe);
    } catch (const InputError&) {  // a key this build no longer has: another recipe
    }
  if (!same)
    LC_INPUT_ERROR(dir, ": holds a finished run of another recipe; --tune reuses only runs of the same recipe "
                   "(choose another --out, or move that run away)");
  return true;
}

// How train_variants treats the runs it finds and the ones that fail.
struct TrainPolicy {
  bool reuse = false;     // a finished run of the same recipe is read back, not trained again
  bool failures = false;  // a run that fails (a non-finite gradient) is a result (RunResult::failed)
};

// Variant i, or (with policy.failures) the reason it failed: the run's own error, after the checks
// that every variant passed before the first trained.
RunResult train_or_record(const Variant& v, std::size_t i, std::size_t n, const Recipe& recipe, const TrainData& data,
                          const CompareOptions& opts, const TrainPolicy& policy) {
  if (!policy.failures) return train_variant(v, i, n, recipe, data, opts);
  try {
    return train_variant(v, i, n, recipe, data, opts);
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    if (opts.log) *opts.log << "compare: [" << i + 1 << "/" << n << "] " << v.name << ": failed: " << e.what() << std::endl;
    RunResult r;
    r.name = v.name;
    r.dir = (fs::path(opts.out_dir) / v.name).string();
    r.failed = e.what();
    return r;
  }
}

// Trains (or reuses, per policy) every variant, resolved and checked first; their data loaded once
// per distinct [data] table.
std::vector<RunResult> train_variants(const std::string& recipe_path, const std::vector<std::string>& overrides,
                                      const std::vector<Variant>& variants, const CompareOptions& opts,
                                      const TrainPolicy& policy) {
  const bool reuse = policy.reuse;
  const std::vector<Recipe> recipes = variant_recipes(recipe_path, overrides, variants, opts);
  std::vector<bool> done(variants.size(), false);
  for (std::size_t i = 0; i < variants.size(); ++i)
    done[i] = reuse && finished_run_of((fs::path(opts.out_dir) / variants[i].name).string(), recipes[i]);
  const VariantData data = load_variant_data(recipes);
  // Every variant's cross-field errors before the first one trains.
  for (std::size_t i = 0; i < recipes.size(); ++i)
    (void)resolve(recipes[i], data[i], (fs::path(opts.out_dir) / variants[i].name).string());
  if (opts.log)
    *opts.log << "compare: " << variants.size() << " variants of " << recipe_path << ", data loaded "
              << (data.loaded.size() == 1 ? "once for all" : std::to_string(data.loaded.size()) + " times") << "; into "
              << opts.out_dir << "/" << std::endl;
  make_directories(opts.out_dir);
  std::vector<RunResult> runs;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    if (done[i]) {
      if (opts.log) *opts.log << "compare: [" << i + 1 << "/" << variants.size() << "] " << variants[i].name << ": reused (finished)" << std::endl;
      runs.push_back(read_run((fs::path(opts.out_dir) / variants[i].name).string(), variants[i].name));
    } else {
      runs.push_back(train_or_record(variants[i], i, variants.size(), recipes[i], data[i], opts, policy));
    }
  }
  return runs;
}

// --warm-start: the shared start's weights file (trained, or reused when finished), absolute.
std::string warm_start_weights(const std::string& recipe_path, const std::vector<std::string>& overrides,
                               const CompareOptions& opts) {
  const std::string n = std::to_string(opts.warm_start);
  const Variant w{"warm_start", {"sync.strategy=allreduce", "sync.phases=[]", "train.steps=" + n, "checkpoint.every=" + n}};
  CompareOptions o = opts;
  o.networks.clear();
  o.as_params = 0;
  const RunResult run = train_variants(recipe_path, overrides, {w}, o, {.reuse = true}).front();
  ExportOptions eo;
  eo.source = run.dir;
  eo.out = (fs::absolute(run.dir) / "model.safetensors").lexically_normal().string();
  eo.tokenizer_out = (fs::path(run.dir) / "tokenizer.json").string();
  const ExportReport r = export_checkpoint(eo);
  if (opts.log) *opts.log << "compare: warm start: " << eo.out << " (data parallel, step " << r.step << ")" << std::endl;
  return eo.out;
}

// The shared overrides, with --warm-start's model.init_from last.
std::vector<std::string> with_warm_start(const std::string& recipe_path, const std::vector<std::string>& overrides,
                                         const std::vector<VaryAxis>& axes, const CompareOptions& opts) {
  if (opts.warm_start <= 0) return overrides;
  (void)variant_recipes(recipe_path, overrides, make_variants(axes), opts);  // the variants are sound first
  std::vector<std::string> out = overrides;
  out.push_back("model.init_from=" + warm_start_weights(recipe_path, overrides, opts));
  return out;
}

// --tune's first phase: every variant's grid on the tuning seeds, scored on the validation half.
std::vector<TunedVariant> tune_grid(const std::string& recipe_path, const std::vector<std::string>& overrides,
                                    const std::vector<Variant>& variants, const std::vector<TuneAxis>& axes,
                                    std::uint64_t seed, const CompareOptions& opts, TuningCost& cost) {
  std::vector<TunedVariant> tuned;
  std::vector<Variant> runs;
  for (const Variant& v : variants) {
    TunedVariant t{v.name, {}, {}, 0, false};
    for (const TuneAxis& a : axes)
      if (tunes(a, v)) t.keys.push_back(a.axis.key);
    for (const Variant& c : tune_configs(v, axes)) {
      t.configs.push_back(TunedConfig{c, {}, {}, ""});
      if (t.keys.empty()) continue;
      for (int k = 0; k < opts.tune_seeds; ++k) {
        Variant r{"tune/" + v.name + "/" + c.name + "/seed" + std::to_string(k), v.assignments};
        r.assignments.insert(r.assignments.end(), c.assignments.begin(), c.assignments.end());
        r.assignments.push_back("run.seed=" + std::to_string(seed + kTuneSeedOffset + static_cast<std::uint64_t>(k)));
        r.assignments.push_back("data.eval_split=validation");
        t.configs.back().runs.push_back(runs.size());
        runs.push_back(std::move(r));
      }
    }
    tuned.push_back(std::move(t));
  }
  if (runs.empty()) LC_INPUT_ERROR("compare: --tune: no --tune applies to any variant");
  CompareOptions o = opts;
  o.networks.clear();  // the choice is on the loss; the replays are for the comparison
  o.as_params = 0;
  const std::vector<RunResult> results = train_variants(recipe_path, overrides, runs, o, {.reuse = true, .failures = true});
  for (TunedVariant& t : tuned) {
    for (TunedConfig& tc : t.configs) {
      std::vector<double> loss;
      for (const std::size_t i : tc.runs) {
        const RunResult& r = results[i];
        // The validation loss is an eval loss by construction (data.eval_split = "validation").
        const std::optional<double> at = opts.budget ? loss_at_budget(r.metrics, LossSeries::eval, *opts.budget, global_batch_of(r))
                                                     : std::optional<double>(r.eval_loss);
        loss.push_back(at.value_or(kAbsent));
        if (!r.failed.empty() && tc.failure.empty()) tc.failure = r.failed;
        if (!r.failed.empty()) continue;
        cost.examples += static_cast<double>(r.steps) * static_cast<double>(global_batch_of(r));
        cost.wall_s += r.wall_s;
      }
      tc.validation = stat_of(loss);
    }
    if (t.configs.size() > 1) choose(t, opts.tune_seeds);
  }
  cost.runs = results.size();
  return tuned;
}

// Every --tune value makes a valid recipe for each variant it applies to, its errors named as the
// flag the user wrote, before anything trains.
void check_tune_values(const std::string& recipe_path, const std::vector<std::string>& overrides,
                       const std::vector<Variant>& variants, const std::vector<TuneAxis>& axes) {
  for (const TuneAxis& a : axes)
    for (const Variant& v : variants) {
      if (!tunes(a, v)) continue;
      for (const std::string& value : a.axis.values) {
        std::vector<std::string> all = overrides;
        all.insert(all.end(), v.assignments.begin(), v.assignments.end());
        const std::string mine = a.axis.key + "=" + value;
        all.push_back(mine);
        try {
          (void)load_recipe(recipe_path, all);
        } catch (const InputError& e) {
          const std::string msg = e.what();
          if (msg.rfind("--" + mine + ":", 0) == 0) throw InputError("--tune " + msg.substr(2));
          throw;
        }
      }
    }
}

// --tune: the grids, then each variant's chosen configuration on the comparison's seeds, scored
// on the test half.
void compare_tuned(const std::string& recipe_path, const std::vector<std::string>& overrides,
                   const std::vector<VaryAxis>& vary, const CompareOptions& opts) {
  if (opts.tune_seeds < 1) LC_INPUT_ERROR("compare: --tune-seeds: expected at least 1, got ", opts.tune_seeds);
  std::vector<TuneAxis> axes;
  for (const std::string& s : opts.tune) axes.push_back(parse_tune(s));
  const std::vector<Variant> variants = make_variants(vary);
  check_tune_axes(axes, variants, vary);
  check_tune_values(recipe_path, overrides, variants, axes);
  const std::uint64_t seed = base_seed(recipe_path, overrides, variants.front());
  TuningCost cost;
  const std::vector<TunedVariant> tuned = tune_grid(recipe_path, overrides, variants, axes, seed, opts, cost);
  std::vector<Variant> finals;
  for (std::size_t i = 0; i < variants.size(); ++i) {
    Variant f = variants[i];
    const Variant& chosen = tuned[i].configs[tuned[i].chosen].config;
    f.assignments.insert(f.assignments.end(), chosen.assignments.begin(), chosen.assignments.end());
    f.assignments.push_back("data.eval_split=test");
    finals.push_back(std::move(f));
    if (opts.log && !tuned[i].keys.empty())
      *opts.log << "compare: " << variants[i].name << ": chose " << chosen.name << " (validation " << format_stat(tuned[i].configs[tuned[i].chosen].validation, 4) << ")" << std::endl;
  }
  if (opts.seeds > 1) finals = seeded_variants(finals, opts.seeds, seed);
  const std::vector<RunResult> runs = train_variants(recipe_path, overrides, finals, opts, {.reuse = true});
  write_file_atomic(opts.out_dir + "/tuning.json", tuning_json(tuned, cost, opts.tune_seeds));
  ReportContext ctx;
  ctx.recipe = recipe_path;
  ctx.overrides = overrides;
  ctx.axes = vary;
  ctx.appendix = tuning_markdown(tuned, cost, opts.tune_seeds, opts.budget ? "eval loss at " + opts.budget->text : "final eval loss");
  write_comparison(runs, ctx, opts);
}

}  // namespace

void compare_variants(const std::string& recipe_path, const std::vector<std::string>& overrides,
                      const std::vector<std::string>& vary_specs, const CompareOptions& opts) {
  check_variant_flags(vary_specs, opts);
  std::vector<VaryAxis> axes;
  for (const auto& s : vary_specs) axes.push_back(parse_vary(s));
  const std::vector<std::string> shared = with_warm_start(recipe_path, overrides, axes, opts);
  if (!opts.tune.empty()) return compare_tuned(recipe_path, shared, axes, opts);
  std::vector<Variant> variants = make_variants(axes);
  if (opts.seeds > 1) variants = seeded_variants(variants, opts.seeds, base_seed(recipe_path, shared, variants.front()));
  const std::vector<RunResult> runs = train_variants(recipe_path, shared, variants, opts, {});
  ReportContext ctx;
  ctx.recipe = recipe_path;
  ctx.overrides = shared;
  ctx.axes = axes;
  write_comparison(runs, ctx, opts);
}

void compare_run_dirs(const std::vector<std::string>& dirs, const CompareOptions& opts) {
  if (dirs.empty()) LC_INPUT_ERROR("compare: --runs needs at least one run directory");
  std::vector<RunResult> runs;
  std::set<std::string> taken;
  for (const auto& d : dirs) {
    // The directory's own name labels it; a clash ("a/run", "b/run") falls back to the path. A
    // seed of --seeds' layout (V/seed<k>) is "V/seed<k>", so that the seeds of V group as one variant.
    fs::path p = fs::path(d).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    std::string name = p.filename().string();
    const bool seed = name.size() > 4 && name.rfind("seed", 0) == 0 &&
                      name.find_first_not_of("0123456789", 4) == std::string::npos;
    if (seed && !p.parent_path().filename().empty()) name = p.parent_path().filename().string() + "/" + name;
    if (name.empty() || taken.count(name)) name = d;
    taken.insert(name);
    runs.push_back(read_run(d, name));
  }
  if (!opts.networks.empty() || opts.as_params > 0) {
    const char* flag = opts.networks.empty() ? "--as-params" : "--networks";
    std::vector<Recipe> recipes;
    for (const RunResult& r : runs) {
      const std::string recipe = (fs::path(r.dir) / "recipe.resolved.toml").string();
      if (!fs::exists(recipe) || !fs::exists(fs::path(r.dir) / "trace" / "meta.json"))
        LC_INPUT_ERROR(r.dir, ": ", flag, " needs the run's recipe.resolved.toml and its event trace (train.trace = true)");
      recipes.push_back(load_recipe(recipe));
    }
    check_networks(recipes, opts.networks);
    check_projection(recipes, dirs, opts.as_params);
  }
  write_comparison(runs, ReportContext{}, opts);
}

}  // namespace laconic
