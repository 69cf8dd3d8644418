// What a recorded run would take on a described network: its event trace (trace/) replayed on
// SimGrid (sim/replay.h), without retraining. `trainer simulate RUN_DIR` and the end of every run
// with a [network] (replay_after_run) call simulate_run(); it writes DIR/summary.json and
// DIR/timeline.json.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "collectives/netsim/topology.h"
#include "framework/recipe/recipe.h"
#include "framework/train/metrics.h"
#include "sim/replay.h"

namespace laconic {

struct RunSpec;
struct TrainSummary;

// The recipe's [network] as a topology (groups, links, stragglers) for `recipe.distributed.world_size` ranks.
Topology make_topology(const Recipe& recipe);

struct SimulateOptions {
  std::string network_file;   // a TOML file with a [network] table; "" = the run's own [network]
  std::string platform_file;  // a SimGrid platform file (overrides network.platform)
  std::int64_t as_params = 0; // > 0: project message bytes and compute onto a model of N parameters
  std::string out_dir;        // where summary.json and timeline.json go; "" = RUN_DIR/simulated
                              // (RUN_DIR/simulated-world-N with a projection)
  int world = 0;              // > 0: replay the run as this many ranks (sim/project.h)
  int groups = 0;             // with world: in this many groups (0: the run's network.groups)
  int exact_up_to = 256;      // with world: rings of at most this many ranks message by message, larger as flows
};

// A projection's timeline is written up to this many ranks (beyond, summary.json only).
inline constexpr int kMaxTimelineRanks = 256;

struct Simulation {
  ReplayResult replay;
  std::string network;        // one line describing what was replayed on
  double scale = 1;           // as_params / the run's parameters (1: no projection)
  std::int64_t as_params = 0;
  int world = 0, groups = 0;  // a projection's world and groups (0: the recorded run's own)
  int recorded_world = 0;
  std::int64_t first_step = 0;
  // Per step mark of the trace (step number: steps done): the slowest rank's time there, and
  // rank 0's exposed communication so far.
  std::vector<std::int64_t> steps;
  std::vector<double> time_at, exposed_at;
  std::vector<std::uint64_t> inter_at;  // rank 0's inter-tier bytes sent by then (as the replay completes them)
  double time_s = 0;          // at the last step mark
  double exposed_s = 0;       // rank 0's, at the last step mark
  std::uint64_t bytes_intra = 0, bytes_inter = 0;  // rank 0's sent per tier
  // The most inter-tier bytes rank 0 sent between two step marks train.log_every steps apart
  // (multiples of it), over the simulated time between them: metrics.h's peak_inter_bytes_per_s,
  // with each message placed where the replay completes it. The interval ending at the run's last
  // mark is left out (it holds the end's drain of syncs launched in its last steps). NaN with
  // fewer than two such marks.
  double peak_inter_bytes_per_s = kAbsent;
  std::string out_dir;

  // The time, exposed communication and inter-tier bytes at step mark `step` (NaN, nullopt if the
  // trace has none).
  double time_at_step(std::int64_t step) const;
  double exposed_at_step(std::int64_t step) const;
  std::optional<std::uint64_t> inter_at_step(std::int64_t step) const;
};

// Replays RUN_DIR's trace and writes the results. InputError (exit 2) for a run without a trace,
// a bad network or platform file, or no network at all.
Simulation simulate_run(const std::string& run_dir, const SimulateOptions& opts);

// RUN_DIR/timeline.json: the recorded run's own timeline (sim/timeline.h) from its trace.
void write_measured_timeline(const std::string& run_dir);

// After a run with [network]: metrics.jsonl's sim_time_s and sim_comm_s replaced by the replay's
// (records from `sim.first_step` on), so the file and summary.json hold the engine's figures; the
// live clock's sim_time_s stays beside them as sim_estimate_s.
void apply_simulation(const std::string& run_dir, const Simulation& sim);

// After a run, in rank 0's process once every rank is done and summary.json is written: a traced
// run's RUN_DIR/timeline.json; with [network], the replay of its trace (which forks a simulator
// process), whose figures replace the live clock's quick estimate in `summary` (sim_time_s,
// peak_inter_bytes_per_s), metrics.jsonl and summary.json, with a line to `log` (null: silent);
// not replayed, the peak inter-tier rate is the live counters'. A failed timeline or replay is a
// warning on stderr: the training itself succeeded.
void replay_after_run(const RunSpec& spec, const std::string& run_dir, std::ostream* log, TrainSummary& summary);

}  // namespace laconic
