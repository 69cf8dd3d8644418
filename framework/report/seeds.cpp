#include "framework/report/seeds.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/check.h"
#include "core/units.h"

namespace laconic {
namespace {

// "25MB", "1.5e9", "3 GiB" -> bytes; nullopt when not a positive byte count.
std::optional<double> parse_bytes(std::string_view text) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v <= 0) return std::nullopt;
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::pair<const char*, double> units[] = {
      {"", 1},       {"B", 1},           {"KB", 1e3},        {"MB", 1e6},        {"GB", 1e9},
      {"TB", 1e12},  {"KiB", 1024.0},    {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  for (const auto& [name, scale] : units)
    if (unit == name) return v * scale;
  return std::nullopt;
}

// The budget's axis at a record (NaN when the record lacks it).
double axis_at(const MetricPoint& p, BudgetKind k, std::int64_t global_batch) {
  switch (k) {
    case BudgetKind::examples:
      return static_cast<double>(p.step) * static_cast<double>(global_batch);
    case BudgetKind::bytes:
      return p.bytes_inter ? static_cast<double>(*p.bytes_inter) : static_cast<double>(p.bytes_sent);
    case BudgetKind::sim_time:
      return p.sim_time_s;
  }
  return kAbsent;
}

std::string fmt(double v, int digits) {
  if (std::isnan(v)) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::int64_t global_batch_of(const RunResult& r) {
  const auto num = [&](const char* key) {
    const std::string v = r.recipe_value(key);
    return v.empty() ? std::int64_t{0} : std::stoll(v);
  };
  return num("train.micro_batch") * std::max<std::int64_t>(1, num("train.grad_accum")) *
         std::max<std::int64_t>(1, num("distributed.world_size"));
}

std::string format_stat(const Stat& s, int digits) {
  if (s.n == 0) return "—";
  if (s.n == 1) return fmt(s.mean, digits);
  return fmt(s.mean, digits) + " ± " + fmt(s.std, digits);
}

Budget parse_budget(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos)
    LC_INPUT_ERROR("--budget ", spec, ": expected examples=E, bytes=B or sim_time=T");
  const std::string kind = spec.substr(0, eq), value = spec.substr(eq + 1);
  Budget b;
  b.text = spec;
  std::optional<double> v;
  if (kind == "examples") {
    b.kind = BudgetKind::examples;
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && *end == '\0' && std::isfinite(x) && x > 0) v = x;
  } else if (kind == "bytes") {
    b.kind = BudgetKind::bytes;
    v = parse_bytes(value);
  } else if (kind == "sim_time") {
    b.kind = BudgetKind::sim_time;
    v = parse_duration(value);
    if (v && *v <= 0) v.reset();
  } else {
    LC_INPUT_ERROR("--budget ", spec, ": expected examples=E, bytes=B or sim_time=T, got kind \"", kind, "\"");
  }
  if (!v)
    LC_INPUT_ERROR("--budget ", spec, ": expected a positive ",
                   b.kind == BudgetKind::examples ? "number of examples"
                   : b.kind == BudgetKind::bytes  ? "byte count (e.g. 25MB, 1.5e9)"
                                                  : "duration (e.g. 90s, 2min)",
                   ", got \"", value, "\"");
  b.value = *v;
  return b;
}

const char* budget_axis(BudgetKind k) {
  switch (k) {
    case BudgetKind::examples:
      return "examples";
    case BudgetKind::bytes:
      return "bytes";
    case BudgetKind::sim_time:
      return "simulated seconds";
  }
  return "";
}

std::optional<double> loss_at_budget(const std::vector<MetricPoint>& metrics, LossSeries series, const Budget& budget,
                                     std::int64_t global_batch) {
  const auto loss_of = [&](const MetricPoint& p) { return series == LossSeries::eval ? p.eval_loss : p.loss; };
  // The curve: (axis, loss) at the records that have both, in step order; the axes only grow.
  double prev_x = kAbsent, prev_y = kAbsent;
  for (const MetricPoint& p : metrics) {
    const double x = axis_at(p, budget.kind, global_batch), y = loss_of(p);
    if (std::isnan(x) || std::isnan(y)) continue;
    if (x >= budget.value) {
      if (std::isnan(prev_x)) return x == budget.value ? std::optional<double>(y) : std::nullopt;
      if (x == prev_x) return y;
      const double t = (budget.value - prev_x) / (x - prev_x);
      return prev_y + t * (y - prev_y);
    }
    prev_x = x;
    prev_y = y;
  }
  return std::nullopt;
}

std::vector<bool> pareto_front(std::span<const double> loss, std::span<const double> cost) {
  LC_CHECK(loss.size() == cost.size(), "pareto_front: sizes differ");
  std::vector<bool> on(loss.size(), false);
  for (std::size_t i = 0; i < loss.size(); ++i) {
    if (std::isnan(loss[i]) || std::isnan(cost[i])) continue;
    bool dominated = false;
    for (std::size_t j = 0; j < loss.size() && !dominated; ++j) {
      if (j == i || std::isnan(loss[j]) || std::isnan(cost[j])) continue;
      dominated = loss[j] <= loss[i] && cost[j] <= cost[i] && (loss[j] < loss[i] || cost[j] < cost[i]);
    }
    on[i] = !dominated;
  }
  return on;
}

std::vector<SeedGroup> group_by_variant(const std::vector<RunResult>& runs, const Comparison& c,
                                        const std::optional<Budget>& budget) {
  std::vector<SeedGroup> groups;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string& n = runs[i].name;
    const auto slash = n.rfind("/seed");
    const std::string variant = slash == std::string::npos ? n : n.substr(0, slash);
    auto [it, fresh] = index.emplace(variant, groups.size());
    if (fresh) groups.push_back(SeedGroup{variant, {}, {}, {}, {}, {}, {}, {}});
    groups[it->second].runs.push_back(i);
  }
  for (SeedGroup& g : groups) {
    std::vector<double> eval, final, time, sent, inter, at;
    for (const std::size_t i : g.runs) {
      const RunResult& r = runs[i];
      const CompareRow& row = c.rows[i];
      eval.push_back(r.eval_loss);
      final.push_back(r.final_loss);
      time.push_back(row.time_s);
      sent.push_back(r.bytes_sent);
      inter.push_back(r.bytes_inter);
      if (budget) at.push_back(loss_at_budget(r.metrics, c.series, *budget, global_batch_of(r)).value_or(kAbsent));
    }
    g.eval_loss = stat_of(eval);
    g.final_loss = stat_of(final);
    g.time_s = stat_of(time);
    g.bytes_sent = stat_of(sent);
    g.bytes_inter = stat_of(inter);
    g.at_budget = stat_of(at);
  }
  return groups;
}

std::string paired_verdict(const Interval& d) {
  if (d.n < 2) return d.n == 1 ? "one seed: no interval" : "—";
  if (d.contains_zero()) return "no difference measured";
  if (d.n < kMinSeedsForOrdering) return "too few seeds (" + std::to_string(d.n) + ") to claim an ordering";
  return d.lo > 0 ? "higher" : "lower";
}

namespace {

// The loss (final, or at the budget) of each of the group's runs, in seed order.
std::vector<double> losses_of(const std::vector<RunResult>& runs, const SeedGroup& g, const Comparison& c,
                              const std::optional<Budget>& budget) {
  std::vector<double> out;
  for (const std::size_t i : g.runs) {
    const RunResult& r = runs[i];
    if (budget)
      out.push_back(loss_at_budget(r.metrics, c.series, *budget, global_batch_of(r)).value_or(kAbsent));
    else
      out.push_back(c.series == LossSeries::eval ? r.eval_loss : r.final_loss);
  }
  return out;
}

// The first n of both (a variant run with fewer seeds than the baseline pairs its own).
Interval paired_prefix(std::vector<double> a, std::vector<double> b) {
  const std::size_t n = std::min(a.size(), b.size());
  a.resize(n);
  b.resize(n);
  return paired_difference(a, b);
}

std::string fmt_signed(double v, int digits) {
  if (std::isnan(v)) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.*f", digits, v);
  return buf;
}

std::string fmt_interval(const Interval& d, int digits, double scale = 1, const char* unit = "") {
  if (std::isnan(d.lo)) return "—";
  char buf[96];
  std::snprintf(buf, sizeof buf, "[%+.*f%s, %+.*f%s]", digits, d.lo * scale, unit, digits, d.hi * scale, unit);
  return buf;
}

void write_paired(std::ostream& os, const std::vector<PairedRow>& rows, const std::string& base, const std::string& loss_word,
                  bool budget) {
  os << "\n## Against the baseline (paired seeds)\n\n"
     << "Each variant's final " << loss_word << " minus " << base << "'s, seed by seed (seed k of both shares the "
     << "initialisation and the data order), with a 95% confidence interval (Student's t over the pairs); "
     << "relative: the difference over " << base << "'s mean. \"no difference measured\": the interval contains "
     << "zero; an ordering is claimed from " << kMinSeedsForOrdering << " seeds up.\n\n"
     << "| variant | pairs | difference | 95% interval | relative (95% interval) | verdict |"
     << (budget ? " at budget | 95% interval |" : "") << "\n|---|---:|---:|---:|---:|---|" << (budget ? "---:|---:|" : "") << "\n";
  for (const PairedRow& r : rows) {
    const double rel = 100 / r.baseline_loss;
    os << "| " << r.name << " | " << r.loss.n << " | " << fmt_signed(r.loss.mean, 4) << " | " << fmt_interval(r.loss, 4)
       << " | " << (std::isnan(r.loss.mean) ? "—" : fmt_signed(r.loss.mean * rel, 2) + "%") << " "
       << fmt_interval(r.loss, 2, rel, "%") << " | " << r.verdict << " |";
    if (budget) os << " " << fmt_signed(r.at_budget.mean, 4) << " | " << fmt_interval(r.at_budget, 4) << " |";
    os << "\n";
  }
}

}  // namespace

std::vector<PairedRow> paired_rows(const std::vector<RunResult>& runs, const std::vector<SeedGroup>& groups,
                                   const Comparison& c, const std::optional<Budget>& budget) {
  std::vector<PairedRow> out;
  if (groups.empty()) return out;
  const std::vector<double> base = losses_of(runs, groups.front(), c, std::nullopt);
  const std::vector<double> base_at = budget ? losses_of(runs, groups.front(), c, budget) : std::vector<double>{};
  for (std::size_t k = 1; k < groups.size(); ++k) {
    PairedRow r;
    r.name = groups[k].name;
    const std::vector<double> mine = losses_of(runs, groups[k], c, std::nullopt);
    r.loss = paired_prefix(base, mine);
    std::vector<double> base_pairs(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(std::min(base.size(), mine.size())));
    r.baseline_loss = stat_of(base_pairs).mean;
    if (budget) r.at_budget = paired_prefix(base_at, losses_of(runs, groups[k], c, budget));
    r.verdict = paired_verdict(r.loss);
    out.push_back(std::move(r));
  }
  return out;
}

std::string seeds_markdown(const std::vector<RunResult>& runs, const std::vector<SeedGroup>& groups, const Comparison& c,
                           const std::optional<Budget>& budget) {
  std::ostringstream os;
  const bool eval = c.series == LossSeries::eval;
  const bool sim = c.clock == CompareClock::simulated;
  const std::string loss_word = eval ? "eval loss" : "training loss";
  int seeds = 0;
  for (const SeedGroup& g : groups) seeds = std::max(seeds, static_cast<int>(g.runs.size()));
  os << "\n## Across seeds\n\n"
     << "Mean ± sample standard deviation over each variant's seeds (" << seeds
     << " per variant; the same seeds, hence the same initialisations and data orders, for every variant).\n\n"
     << "| variant | seeds | final " << loss_word << " | " << (sim ? "simulated" : "wall") << " time (s) | sent/rank |"
     << (c.simulated_network ? " inter-tier/rank |" : "") << "\n|---|---:|---:|---:|---:|" << (c.simulated_network ? "---:|" : "")
     << "\n";
  for (const SeedGroup& g : groups) {
    const Stat& loss = eval ? g.eval_loss : g.final_loss;
    os << "| " << g.name << " | " << g.runs.size() << " | " << format_stat(loss, 4) << " | " << format_stat(g.time_s, 2)
       << " | " << format_bytes(g.bytes_sent.mean) << " |";
    if (c.simulated_network) os << " " << (g.bytes_inter.n ? format_bytes(g.bytes_inter.mean) : "—") << " |";
    os << "\n";
  }
  if (groups.size() > 1 && seeds > 1) write_paired(os, paired_rows(runs, groups, c, budget), groups.front().name, loss_word, budget.has_value());
  if (budget) {
    os << "\n## At equal budget: " << budget->text << "\n\n"
       << "Each run's " << loss_word << " where its curve crosses " << budget->value << " " << budget_axis(budget->kind)
       << (budget->kind == BudgetKind::bytes ? (c.simulated_network ? " (inter-tier, per rank)" : " (sent, per rank)") : "")
       << ", interpolated linearly between the records around it; — where a run never got that far.\n\n"
       << "| variant | " << loss_word << " at budget | runs that reached it |\n|---|---:|---:|\n";
    for (const SeedGroup& g : groups)
      os << "| " << g.name << " | " << format_stat(g.at_budget, 4) << " | " << g.at_budget.n << "/" << g.runs.size() << " |\n";
  }
  // The front over variants (means): against bytes (inter-tier when simulated) and against time.
  std::vector<double> loss, bytes, time;
  for (const SeedGroup& g : groups) {
    loss.push_back((eval ? g.eval_loss : g.final_loss).mean);
    bytes.push_back(c.simulated_network ? g.bytes_inter.mean : g.bytes_sent.mean);
    time.push_back(g.time_s.mean);
  }
  const std::vector<bool> by_bytes = pareto_front(loss, bytes), by_time = pareto_front(loss, time);
  os << "\n## Pareto front\n\n"
     << "Variants no other beats on both final " << loss_word << " and cost (means over seeds): cost = "
     << (c.simulated_network ? "bytes crossing the inter tier per rank" : "bytes sent per rank") << ", and "
     << (sim ? "simulated" : "wall") << " time.\n\n| variant | on the front (bytes) | on the front (time) |\n|---|:---:|:---:|\n";
  for (std::size_t i = 0; i < groups.size(); ++i)
    os << "| " << groups[i].name << " | " << (by_bytes[i] ? "yes" : "") << " | " << (by_time[i] ? "yes" : "") << " |\n";
  return os.str();
}

}  // namespace laconic
