#include "sim/failures.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "core/check.h"
#include "core/stats.h"
#include "core/units.h"

namespace laconic {

FailureModel parse_failures(const std::string& spec) {
  FailureModel m;
  bool mtbf = false, restart = false;
  std::stringstream in(spec);
  for (std::string item; std::getline(in, item, ',');) {
    const auto eq = item.find('=');
    if (eq == std::string::npos)
      LC_INPUT_ERROR("--failures: expected key=value, got '", item, "' (keys: mtbf, restart, seed, trials, checkpoint_every, period, steps, replicas)");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto integer = [&](std::int64_t lo) {
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < lo)
        LC_INPUT_ERROR("--failures: ", key, ": expected an integer >= ", lo, ", got '", value, "'");
      return static_cast<std::int64_t>(v);
    };
    auto duration = [&] {
      const std::optional<double> s = parse_duration(value);
      if (!s || !(*s >= 0)) LC_INPUT_ERROR("--failures: ", key, ": expected a duration (e.g. 2h, 10m, 90s), got '", value, "'");
      return *s;
    };
    if (key == "mtbf") {
      m.mtbf_s = duration();
      mtbf = true;
      if (m.mtbf_s <= 0) LC_INPUT_ERROR("--failures: mtbf: expected a duration > 0, got '", value, "'");
    } else if (key == "restart") {
      m.restart_s = duration();
      restart = true;
    } else if (key == "seed") {
      m.seed = static_cast<std::uint64_t>(integer(0));
    } else if (key == "trials") {
      m.trials = static_cast<int>(std::min<std::int64_t>(integer(1), 100000));
    } else if (key == "checkpoint_every") {
      m.checkpoint_every = integer(1);
    } else if (key == "period") {
      m.period = integer(1);
    } else if (key == "steps") {
      m.steps = integer(1);
    } else if (key == "replicas") {
      m.replicas = static_cast<int>(std::min<std::int64_t>(integer(1), 1 << 20));
    } else {
      LC_INPUT_ERROR("--failures: unknown key '", key, "' (keys: mtbf, restart, seed, trials, checkpoint_every, period, steps, replicas)");
    }
  }
  if (!mtbf || !restart) LC_INPUT_ERROR("--failures: expected mtbf=DURATION,restart=DURATION, got '", spec, "'");
  return m;
}

namespace {

// One host's down intervals [fail, fail + restart), in time order, up to `horizon`.
std::vector<std::pair<double, double>> failures_of(std::mt19937_64& rng, const FailureModel& m, double horizon) {
  std::exponential_distribution<double> gap(1.0 / m.mtbf_s);
  std::vector<std::pair<double, double>> out;
  for (double t = gap(rng); t < horizon; t += m.restart_s + gap(rng)) out.push_back({t, t + m.restart_s});
  return out;
}

struct Trial {
  double wall_dp = 0, wall_elastic = 0, useful_elastic = 0, lost_dp = 0, failures = 0;
  std::int64_t done_dp = 0;  // steps data parallel kept (all of them unless it hit the horizon)
};

constexpr double kNever = std::numeric_limits<double>::infinity();

// Hosts [first, second).
using Hosts = std::pair<int, int>;

Hosts hosts_of(const FailureRun& r, int replica) {
  const int per = r.hosts / r.replicas;
  return {replica * per, (replica + 1) * per};
}

// Every host's down intervals in one trial. Each host's intervals are sorted and disjoint: the
// queries binary-search them.
class Outages {
 public:
  Outages(std::mt19937_64& rng, const FailureModel& m, int hosts, double horizon)
      : down_(static_cast<std::size_t>(hosts)) {
    for (auto& d : down_) d = failures_of(rng, m, horizon);
  }

  // Failures that begin before `t`, over all hosts.
  double count_before(double t) const {
    double n = 0;
    for (const auto& d : down_)
      for (const auto& f : d) n += f.first < t ? 1 : 0;
    return n;
  }

  // The first failure of any of `hosts` in [from, to) (kNever: none).
  double first_failure(Hosts hosts, double from, double to) const {
    double when = kNever;
    for (int h = hosts.first; h < hosts.second; ++h) {
      const auto& d = down_[static_cast<std::size_t>(h)];
      const auto it = std::lower_bound(d.begin(), d.end(), from, [](const auto& f, double t) { return f.first < t; });
      if (it != d.end() && it->first < to) when = std::min(when, it->first);
    }
    return when;
  }

  // The first time >= from when all of `hosts` are up.
  double all_up_at(Hosts hosts, double from) const {
    double t0 = from;
    for (bool moved = true; moved;) {
      moved = false;
      for (int h = hosts.first; h < hosts.second; ++h) {
        const auto& d = down_[static_cast<std::size_t>(h)];
        auto it = std::upper_bound(d.begin(), d.end(), t0, [](double t, const auto& f) { return t < f.first; });
        if (it != d.begin() && t0 < std::prev(it)->second) {  // inside the interval that began last
          t0 = std::prev(it)->second;
          moved = true;
        }
      }
    }
    return t0;
  }

 private:
  std::vector<std::vector<std::pair<double, double>>> down_;
};

// Data parallel with checkpoint-restart (given up at the horizon: its goodput is then what it
// kept by then).
void run_data_parallel(const Outages& o, const FailureRun& r, double horizon, Trial& t) {
  const Hosts all{0, r.hosts};
  double now = o.all_up_at(all, 0);
  std::int64_t done = 0;
  while (done < r.steps && now < horizon) {
    const double finish = now + static_cast<double>(r.steps - done) * r.step_s;
    const double fail = o.first_failure(all, now, finish);
    if (fail == kNever) {
      now = finish;
      done = r.steps;
      break;
    }
    const auto progressed = static_cast<std::int64_t>(std::floor((fail - now) / r.step_s));
    const std::int64_t reached = done + progressed;
    const std::int64_t kept = reached / r.checkpoint_every * r.checkpoint_every;  // >= done: a checkpoint
    t.lost_dp += static_cast<double>(reached - kept);
    done = kept;
    now = o.all_up_at(all, fail);
  }
  t.wall_dp = std::min(now, horizon);
  t.done_dp = done;
}

// The replicas that hold the state at time `at`: those all up then (never down, or restarted and
// waiting as joiners).
void set_members(const Outages& o, const FailureRun& r, std::vector<bool>& member, double at) {
  for (int q = 0; q < r.replicas; ++q) member[static_cast<std::size_t>(q)] = o.all_up_at(hosts_of(r, q), at) == at;
}

// Every member failed within the period [now, end): it is run again from the last sync's state
// (as from a checkpoint) by the replicas up when the first is back after the last failure.
// Returns that time.
double rerun_period(const Outages& o, const FailureRun& r, std::vector<bool>& member, double now, double end) {
  double last = now;
  for (int q = 0; q < r.replicas; ++q)
    if (member[static_cast<std::size_t>(q)]) last = std::max(last, o.first_failure(hosts_of(r, q), now, end));
  double back = kNever;
  for (int q = 0; q < r.replicas; ++q) back = std::min(back, o.all_up_at(hosts_of(r, q), last));
  set_members(o, r, member, back);
  return back;
}

// Elastic periodic training, period by period.
void run_elastic(const Outages& o, const FailureRun& r, double horizon, Trial& t) {
  std::vector<bool> member(static_cast<std::size_t>(r.replicas), true);
  double now = 0;
  std::int64_t done = 0;
  while (done < r.steps && now < horizon) {
    const std::int64_t h = std::min(r.period, r.steps - done);
    const double end = now + static_cast<double>(h) * r.step_s;
    int contributing = 0;
    bool awaited = false;  // a member that failed and is not back by the sync: the quorum waits for it
    for (int q = 0; q < r.replicas; ++q) {
      if (!member[static_cast<std::size_t>(q)]) continue;
      if (o.first_failure(hosts_of(r, q), now, end) == kNever) ++contributing;
      else if (o.all_up_at(hosts_of(r, q), end) != end) awaited = true;
    }
    if (contributing == 0) {
      now = rerun_period(o, r, member, now, end);
      continue;
    }
    t.useful_elastic += static_cast<double>(contributing) * static_cast<double>(h);
    done += h;
    set_members(o, r, member, end);  // they hold the state of the next period
    now = end + (awaited ? r.join_timeout_s : 0.0);
  }
  t.wall_elastic = std::min(now, horizon);
}

Trial run_trial(const FailureModel& m, const FailureRun& r, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Far enough: the failure-free time, many times over (the loops stop at the end anyway).
  const double ideal = static_cast<double>(r.steps) * r.step_s;
  const double horizon = 50 * ideal + 100 * (m.restart_s + m.mtbf_s);
  const Outages outages(rng, m, r.hosts, horizon);
  Trial t;
  t.failures = outages.count_before(ideal);
  run_data_parallel(outages, r, horizon, t);
  run_elastic(outages, r, horizon, t);
  return t;
}

}  // namespace

GoodputResult simulate_failures(const FailureModel& m, const FailureRun& r) {
  LC_CHECK(r.hosts >= 1 && r.replicas >= 1 && r.hosts % r.replicas == 0, "failures: ", r.hosts, " hosts in ",
           r.replicas, " replicas");
  LC_CHECK(r.steps >= 1 && r.period >= 1 && r.checkpoint_every >= 1 && r.step_s > 0, "failures: bad run");
  std::vector<double> gdp, gel, wdp, wel, lost_dp, lost_el, fails;
  for (int k = 0; k < m.trials; ++k) {
    const Trial t = run_trial(m, r, m.seed + static_cast<std::uint64_t>(k));
    gdp.push_back(static_cast<double>(t.done_dp) * r.step_s / t.wall_dp);
    gel.push_back(t.useful_elastic * r.step_s / (static_cast<double>(r.replicas) * t.wall_elastic));
    wdp.push_back(t.wall_dp);
    wel.push_back(t.wall_elastic);
    lost_dp.push_back(t.lost_dp);
    lost_el.push_back(static_cast<double>(r.replicas) * static_cast<double>(r.steps) - t.useful_elastic);
    fails.push_back(t.failures);
  }
  GoodputResult g;
  g.failures = stat_of(fails).mean;
  g.wall_dp_s = stat_of(wdp).mean;
  g.wall_elastic_s = stat_of(wel).mean;
  const Stat dp = stat_of(gdp), el = stat_of(gel);
  g.goodput_dp = dp.mean;
  g.goodput_elastic = el.mean;
  g.goodput_dp_std = dp.std;
  g.goodput_elastic_std = el.std;
  g.lost_dp_steps = stat_of(lost_dp).mean;
  g.lost_elastic_replica_steps = stat_of(lost_el).mean;
  return g;
}

}  // namespace laconic
