#include "framework/train/simulate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "collectives/netsim/cost_model.h"
#include "core/check.h"
#include "core/input.h"
#include "core/json.h"
#include "core/units.h"
#include "framework/train/metrics.h"
#include "framework/train/run_dir.h"
#include "framework/train/run_spec.h"
#include "framework/train/summary.h"
#include "sim/project.h"
#include "sim/timeline.h"

namespace laconic {

namespace fs = std::filesystem;

Topology make_topology(const Recipe& r) {
  const NetworkConfig& n = r.network;
  Topology t = grouped_topology(r.distributed.world_size, std::max(1, n.groups),
                                LinkSpec{n.intra_bandwidth.bytes_per_s, n.intra_latency.seconds},
                                LinkSpec{n.inter_bandwidth.bytes_per_s, n.inter_latency.seconds});
  set_stragglers(t, n.stragglers.ranks, n.straggler_slowdown);
  return t;
}

namespace {

double at_mark(const Simulation& s, const std::vector<double>& v, std::int64_t step) {
  const auto it = std::find(s.steps.begin(), s.steps.end(), step);
  if (it == s.steps.end()) return kAbsent;
  return v[static_cast<std::size_t>(it - s.steps.begin())];
}

// Platforms of thousands of hosts take a few MB.
constexpr std::uint64_t kMaxPlatformBytes = 100'000'000;

std::int64_t meta_int(const nlohmann::json& m, const char* key, const std::string& path) {
  if (!m.contains(key) || !m[key].is_number()) LC_INPUT_ERROR(path, ": '", key, "' missing or not a number");
  return m[key].get<std::int64_t>();
}

// One link tier's protocol: "rendezvous of 1 round trip above 64 KiB, buffered sends, slow start
// from 10 segments", or "eager" first.
std::string describe_protocol(int rounds, double eager_kib, bool buffered, int segments) {
  std::ostringstream os;
  if (rounds > 0)
    os << "rendezvous of " << rounds << (rounds == 1 ? " round trip" : " round trips") << " above " << eager_kib << " KiB";
  else
    os << "eager";
  if (buffered) os << ", buffered sends";
  if (segments > 0) os << ", slow start from " << segments << " segments";
  return os.str();
}

// The network in a line. Without [network.inter] the protocol's parts come where they always
// did, so a run's summary reads as before.
std::string describe(const NetworkConfig& n) {
  if (!n.platform.empty()) return "SimGrid platform " + n.platform.path;
  std::ostringstream os;
  os << n.groups << (n.groups == 1 ? " group" : " groups") << ", " << format_bandwidth(n.intra_bandwidth.bytes_per_s)
     << " / " << format_duration(n.intra_latency.seconds) << " inside, "
     << format_bandwidth(n.inter_bandwidth.bytes_per_s) << " / " << format_duration(n.inter_latency.seconds)
     << " between (" << (n.inter_link == InterLink::shared ? "one shared uplink per group" : "a link per rank pair")
     << "), compute " << name_of(n.compute);
  const InterProtocolConfig& i = n.inter;
  const bool tiers = i != InterProtocolConfig{};
  if (!tiers && n.rendezvous_round_trips > 0)
    os << ", rendezvous of " << n.rendezvous_round_trips << (n.rendezvous_round_trips == 1 ? " round trip" : " round trips")
       << " above " << n.eager_limit_kib << " KiB";
  if (!tiers && n.buffered_sends) os << ", buffered sends";
  if (n.streams > 1) os << ", " << n.streams << " TCP streams per pair";
  if (n.tcp_window_kib > 0) os << ", a window of " << n.tcp_window_kib << " KiB per stream";
  if (!tiers && n.tcp_initial_window_segments > 0)
    os << ", slow start from " << n.tcp_initial_window_segments << " segments";
  const int rounds = static_cast<int>(n.rendezvous_round_trips);
  if (tiers)
    os << "; inside groups: " << describe_protocol(rounds, n.eager_limit_kib, n.buffered_sends, n.tcp_initial_window_segments)
       << "; between groups: "
       << describe_protocol(i.rendezvous_round_trips.resolve(rounds), i.eager_limit_kib.resolve(n.eager_limit_kib),
                            i.buffered_sends.resolve(n.buffered_sends),
                            i.tcp_initial_window_segments.resolve(n.tcp_initial_window_segments));
  return os.str();
}

std::string summary_json(const Simulation& s, const Recipe& r) {
  nlohmann::ordered_json j;
  j["engine"] = s.replay.engine;
  j["network"] = s.network;
  if (s.as_params > 0)
    j["projection"] = {{"as_params", s.as_params}, {"scale", s.scale},
                       {"note", "convergence as measured; time projected for the larger model"}};
  else
    j["projection"] = nullptr;
  if (s.world > 0)
    j["world_projection"] = {{"world", s.world}, {"groups", s.groups}, {"recorded_world", s.recorded_world},
                             {"recorded_groups", std::max(1, r.network.groups)},
                             {"note", "each collective regenerated for the projected world; compute as recorded"}};
  else
    j["world_projection"] = nullptr;
  j["ranks"] = static_cast<int>(s.replay.ranks.size());
  j["sim_time_s"] = s.time_s;
  j["sim_comm_s"] = s.exposed_s;
  j["bytes_intra"] = s.bytes_intra;
  j["bytes_inter"] = s.bytes_inter;
  j["peak_inter_bytes_per_s"] = s.peak_inter_bytes_per_s;
  double compute = 0;
  for (const RankReplay& k : s.replay.ranks) compute = std::max(compute, k.compute_s);
  j["compute_s"] = compute;
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < s.steps.size(); ++i)
    if (s.steps[i] % r.train.log_every == 0 || i + 1 == s.steps.size())
      steps.push_back({{"step", s.steps[i]}, {"sim_time_s", s.time_at[i]}, {"sim_comm_s", s.exposed_at[i]},
                       {"bytes_inter", s.inter_at[i]}});
  j["steps"] = std::move(steps);
  return j.dump(2) + "\n";
}

}  // namespace

double Simulation::time_at_step(std::int64_t step) const { return at_mark(*this, time_at, step); }
double Simulation::exposed_at_step(std::int64_t step) const { return at_mark(*this, exposed_at, step); }
std::optional<std::uint64_t> Simulation::inter_at_step(std::int64_t step) const {
  const auto it = std::find(steps.begin(), steps.end(), step);
  if (it == steps.end()) return std::nullopt;
  return inter_at[static_cast<std::size_t>(it - steps.begin())];
}

namespace {

void check_options(const SimulateOptions& opts) {
  if (opts.world < 0 || opts.world > kMaxProjectedWorld)
    LC_INPUT_ERROR("--world: expected 1 to ", kMaxProjectedWorld, " ranks, got ", opts.world);
  if (opts.groups != 0 && opts.world == 0) LC_INPUT_ERROR("--groups: expected it with --world N");
  if (opts.groups < 0) LC_INPUT_ERROR("--groups: expected a number of groups >= 1, got ", opts.groups);
  if (opts.exact_up_to < 1) LC_INPUT_ERROR("--exact-up-to: expected a number of ranks >= 1, got ", opts.exact_up_to);
}

// The run's resolved recipe with the network the options replay it on.
Recipe replayed_recipe(const std::string& run_dir, const SimulateOptions& opts) {
  const std::string recipe_path = (fs::path(run_dir) / "recipe.resolved.toml").string();
  if (!fs::exists(recipe_path)) LC_INPUT_ERROR(run_dir, ": not a run directory (no recipe.resolved.toml)");
  Recipe r = load_recipe(recipe_path);
  if (!opts.network_file.empty()) r = with_network_file(r, opts.network_file);
  if (!opts.platform_file.empty()) r.network.platform.path = opts.platform_file;
  if (r.network.groups == 0 && r.network.platform.empty())
    LC_INPUT_ERROR(recipe_path, ": the run describes no [network] to replay on; give --network NET.toml or "
                                "--platform FILE.xml");
  // SimGrid reads the platform itself, in the replay's child; checked here, a FIFO or a device in
  // its place is a one-line error instead of a replay that hangs or never ends.
  if (!r.network.platform.empty()) InputFile(r.network.platform.path, kMaxPlatformBytes, "SimGrid platform file");
  return r;
}

// What the run recorded: its trace and the trace's meta.json.
struct Recorded {
  std::string meta_path;
  nlohmann::json meta;
  std::int64_t parameters = 0, examples = 0;
  double flops = 0;
  std::vector<RankTrace> trace;
};

Recorded read_recorded(const std::string& run_dir, const Recipe& r) {
  Recorded rec;
  const std::string trace_dir = (fs::path(run_dir) / "trace").string();
  rec.meta_path = trace_dir + "/meta.json";
  if (!fs::exists(rec.meta_path))
    LC_INPUT_ERROR(run_dir, ": no complete event trace (", rec.meta_path, " is missing; record one with train.trace = true "
                            "and let the run finish)");
  rec.meta = parse_json(read_text(rec.meta_path), rec.meta_path);
  if (!rec.meta.is_object()) LC_INPUT_ERROR(rec.meta_path, ": expected a JSON object, got ", rec.meta.type_name());
  rec.parameters = meta_int(rec.meta, "parameters", rec.meta_path);
  rec.examples = meta_int(rec.meta, "examples_per_rank_step", rec.meta_path);
  rec.flops = rec.meta.value("flops_per_example", 0.0);
  rec.trace = read_run_trace(trace_dir);
  if (static_cast<int>(rec.trace.size()) != r.distributed.world_size)
    LC_INPUT_ERROR(trace_dir, ": a trace of ", rec.trace.size(), " ranks, the recipe says distributed.world_size = ",
                   r.distributed.world_size);
  return rec;
}

// A projection (sim/project.h): the same run as opts.world ranks on the recipe's network laid
// out for them (stragglers are the recorded world's ranks: not projected). Returns the recipe
// laid out for the world replayed (r itself without a projection).
Recipe project(const Recipe& r, const SimulateOptions& opts, const std::vector<RankTrace>& trace,
               ProjectedTrace& projected) {
  Recipe laid = r;
  if (opts.world == 0) return laid;
  if (!r.network.platform.empty())
    LC_INPUT_ERROR("--world: a projection lays out its network from [network] (groups, links); not with a platform file");
  ProjectionOptions po;
  po.recorded_groups = std::max(1, r.network.groups);
  po.world = opts.world;
  po.groups = opts.groups;
  laid.distributed.world_size = opts.world;
  laid.network.groups = opts.groups > 0 ? opts.groups : po.recorded_groups;
  laid.network.stragglers.ranks.clear();
  // (More groups than ranks lay out no topology: project_trace refuses them with the reason.)
  if (laid.network.groups <= opts.world && r.distributed.algorithm == Algorithm::auto_)
    po.choose = make_all_reduce_chooser(make_topology(laid));
  projected = project_trace(trace, po);
  return laid;
}

// One link tier's protocol in the replay's units (KiB and segments of 1448 bytes: TCP's on Ethernet).
MessageProtocol message_protocol(double eager_limit_kib, int rendezvous_round_trips, bool buffered) {
  return {.eager_limit_bytes = static_cast<std::uint64_t>(eager_limit_kib * 1024),
          .rendezvous_round_trips = rendezvous_round_trips, .buffered = buffered};
}
std::uint64_t window_bytes(int segments) { return static_cast<std::uint64_t>(segments) * 1448; }

ReplayNetwork replay_network(const Recipe& r, const Recipe& laid) {
  const NetworkConfig& n = r.network;
  ReplayNetwork net;
  net.topo = make_topology(laid);
  net.inter_link = n.inter_link;
  net.platform_file = n.platform.path;
  const int rounds = static_cast<int>(n.rendezvous_round_trips);
  net.protocol = message_protocol(n.eager_limit_kib, rounds, n.buffered_sends);
  net.transport.streams = n.streams;
  net.transport.window_bytes = static_cast<std::uint64_t>(n.tcp_window_kib * 1024);
  net.transport.initial_window_bytes = window_bytes(n.tcp_initial_window_segments);
  const InterProtocolConfig& i = n.inter;
  if (i != InterProtocolConfig{})  // each key left "auto" is [network]'s
    net.inter = InterTier{.protocol = message_protocol(i.eager_limit_kib.resolve(n.eager_limit_kib),
                                                       i.rendezvous_round_trips.resolve(rounds),
                                                       i.buffered_sends.resolve(n.buffered_sends)),
                          .initial_window_bytes = window_bytes(i.tcp_initial_window_segments.resolve(n.tcp_initial_window_segments))};
  return net;
}

ReplayOptions replay_options(const Recipe& r, const SimulateOptions& opts, const Recorded& rec,
                             const ProjectedTrace& projected) {
  ReplayOptions ro;
  ro.modeled = r.network.compute == ComputeKind::modeled;
  ro.modeled_step_s = rec.flops * static_cast<double>(rec.examples) / (r.network.device_tflops * 1e12 * r.network.mfu);
  ro.scale = opts.as_params > 0 ? static_cast<double>(opts.as_params) / static_cast<double>(rec.parameters) : 1.0;
  ro.timeline = opts.world == 0 || opts.world <= kMaxTimelineRanks;
  ro.sources = projected.source;
  ro.message_level_ranks = opts.exact_up_to;
  if (r.sync.phases.phases.empty()) ro.strategy = r.sync.strategy.value;  // phases: the messages' own names
  return ro;
}

// Per step mark: the slowest rank's time, rank 0's exposed communication and inter-tier bytes.
void mark_steps(Simulation& s) {
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    double t = 0;
    for (const RankReplay& k : s.replay.ranks) t = std::max(t, i < k.step_begin.size() ? k.step_begin[i] : 0.0);
    s.time_at.push_back(t);
    const RankReplay& lead = s.replay.ranks[0];
    s.exposed_at.push_back(i < lead.step_exposed.size() ? lead.step_exposed[i] : 0.0);
    s.inter_at.push_back(i < lead.step_inter_sent.size() ? lead.step_inter_sent[i] : 0);
  }
  if (!s.time_at.empty()) {
    s.time_s = s.time_at.back();
    s.exposed_s = s.exposed_at.back();
  }
}

// Marks at multiples of log_every, without the last: the run's end, whose interval holds the
// drain of syncs launched in its last steps, without the inner steps they would have overlapped.
double peak_inter_rate(const Simulation& s, std::int64_t log_every) {
  std::vector<double> window_t;
  std::vector<std::uint64_t> window_bytes;
  for (std::size_t i = 0; i + 1 < s.steps.size(); ++i)
    if (s.steps[i] % log_every == 0) {
      window_t.push_back(s.time_at[i]);
      window_bytes.push_back(s.inter_at[i]);
    }
  return peak_rate(window_t, window_bytes);
}

void write_simulation(Simulation& s, const Recipe& r, const std::string& run_dir, const SimulateOptions& opts,
                      bool timeline) {
  const std::string own = opts.world ? "simulated-world-" + std::to_string(opts.world) : "simulated";
  s.out_dir = opts.out_dir.empty() ? (fs::path(run_dir) / own).string() : opts.out_dir;
  make_directories(s.out_dir);
  write_file_atomic(s.out_dir + "/summary.json", summary_json(s, r));
  if (timeline)
    write_file_atomic(s.out_dir + "/timeline.json", timeline_json(s.replay.timeline, static_cast<int>(s.replay.ranks.size()),
                                                                  r.run.name + " on " + s.network));
}

}  // namespace

Simulation simulate_run(const std::string& run_dir, const SimulateOptions& opts) {
  check_options(opts);
  const Recipe r = replayed_recipe(run_dir, opts);
  const Recorded rec = read_recorded(run_dir, r);
  if (opts.as_params < 0) LC_INPUT_ERROR("--as-params: expected a parameter count >= 1, got ", opts.as_params);
  ProjectedTrace projected;
  const Recipe laid = project(r, opts, rec.trace, projected);
  const ReplayNetwork net = replay_network(r, laid);
  const ReplayOptions ro = replay_options(r, opts, rec, projected);

  Simulation s;
  s.replay = replay(opts.world ? projected.lanes : rec.trace, net, ro);
  s.world = opts.world;
  s.groups = opts.world ? laid.network.groups : 0;
  s.recorded_world = static_cast<int>(rec.trace.size());
  s.network = describe(r.network);
  s.scale = ro.scale;
  s.as_params = opts.as_params;
  s.first_step = meta_int(rec.meta, "first_step", rec.meta_path);
  s.steps = s.replay.steps;
  mark_steps(s);
  s.peak_inter_bytes_per_s = peak_inter_rate(s, r.train.log_every);
  s.bytes_intra = s.replay.ranks[0].tiers[0].sent;
  s.bytes_inter = s.replay.ranks[0].tiers[1].sent;
  write_simulation(s, r, run_dir, opts, ro.timeline);
  return s;
}

void write_measured_timeline(const std::string& run_dir) {
  const std::vector<RankTrace> trace = read_run_trace((fs::path(run_dir) / "trace").string());
  write_file_atomic((fs::path(run_dir) / "timeline.json").string(),
                    timeline_json(measured_timeline(trace), static_cast<int>(trace.size()), run_dir + " (measured)"));
}

void apply_simulation(const std::string& run_dir, const Simulation& sim) {
  const std::string path = (fs::path(run_dir) / "metrics.jsonl").string();
  std::vector<MetricsRecord> records = read_metrics(path);
  // A resumed run's trace starts at its checkpoint: its times continue that step's record.
  double offset = 0, offset_comm = 0;
  if (sim.first_step > 0)
    for (const MetricsRecord& m : records)
      if (m.step == sim.first_step && !std::isnan(m.sim_time_s) && !std::isnan(m.sim_comm_s)) {
        offset = m.sim_time_s - sim.time_at_step(sim.first_step);
        offset_comm = m.sim_comm_s - sim.exposed_at_step(sim.first_step);
      }
  std::string text;
  for (MetricsRecord& m : records) {
    if (m.step > sim.first_step) {
      const double t = sim.time_at_step(m.step), c = sim.exposed_at_step(m.step);
      if (!std::isnan(t)) {
        m.sim_estimate_s = m.sim_time_s;  // the live clock's, kept beside the engine's
        m.sim_time_s = offset + t;
      }
      if (!std::isnan(c)) m.sim_comm_s = offset_comm + c;
    }
    text += to_json_line(m) + "\n";
  }
  write_file_atomic(path, text);
}

void replay_after_run(const RunSpec& spec, const std::string& run_dir, std::ostream* log, TrainSummary& summary) {
  if (!spec.trace_dir.empty()) {
    try {
      write_measured_timeline(run_dir);
    } catch (const std::exception& e) {
      std::cerr << "laconic: warning: no timeline.json: " << e.what() << std::endl;
    }
  }
  // Once every rank is done (the replay forks a simulator process): the run's simulated figures
  // are the replay's; the live clock was the quick estimate.
  if (spec.simulate && !spec.trace_dir.empty()) {
    const double estimate = summary.sim_time_s;
    try {
      const Simulation sim = simulate_run(run_dir, SimulateOptions{});
      apply_simulation(run_dir, sim);
      summary.sim_time_s = sim.time_s;
      summary.peak_inter_bytes_per_s = sim.peak_inter_bytes_per_s;
      write_summary(run_dir, summary);
      if (log) {
        *log << "laconic: replayed on " << sim.replay.engine << ": " << std::defaultfloat << std::setprecision(4)
             << sim.time_s << " s simulated (";
        if (std::isnan(estimate))
          *log << "no live estimate: reductions overlapped backward";
        else
          *log << "the live estimate said " << estimate << " s, " << std::showpos << std::fixed << std::setprecision(1)
               << 100 * (estimate - sim.time_s) / sim.time_s << std::noshowpos << "%";
        *log << "); timeline in " << sim.out_dir << "/timeline.json" << std::endl;
      }
    } catch (const std::exception& e) {
      // The training itself succeeded: keep its files, with the live estimate, and say why.
      std::cerr << "laconic: warning: the replay of the trace failed, simulated figures are the live estimate: "
                << e.what() << std::endl;
    }
  }
  if (spec.simulate && !run_dir.empty() && std::isnan(summary.peak_inter_bytes_per_s)) {
    // Not replayed: the live counters' estimate (async bytes fall in the interval they were sent in).
    summary.peak_inter_bytes_per_s = peak_inter_rate(read_metrics(run_dir + "/metrics.jsonl"));
    write_summary(run_dir, summary);
  }
}

}  // namespace laconic
