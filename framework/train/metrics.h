// What a run reports, defined once: a metrics.jsonl record and the summary.json of a run. Each
// struct lists its fields in one visit() function; writing and reading both go through it, so
// the file formats cannot drift from what the trainer and `trainer compare` think they are.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace laconic {

inline constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();

// One line of metrics.jsonl. Bytes are this rank's (rank 0's), cumulative. Fields marked optional
// are left out of the line when absent (NaN / nullopt).
struct MetricsRecord {
  std::int64_t step = 0;      // optimizer steps done
  double epoch = 0;
  double loss = kAbsent;      // mean training loss over every rank's examples since the last multiple of log_every
  double lr = 0;
  std::uint64_t bytes_sent = 0, bytes_recv = 0;
  double bytes_per_step = 0;  // sent since the previous record, per step
  double comm_s = 0;          // reducing gradients, on whichever thread
  double exposed_comm_s = 0;  // what the step loop waited for communication
  double compression_ratio = 1;
  double compute_s = 0, wall_s = 0, examples_per_s = 0;
  double grad_norm = kAbsent;      // optional: before clipping, when clipping
  double noise_scale = kAbsent;    // optional: B_simple, when estimated
  double sim_time_s = kAbsent;     // optional, [network]: the simulated time (the replay's, sim/replay.h)
  double sim_comm_s = kAbsent;     // optional, [network]: its communication part
  double sim_estimate_s = kAbsent; // optional, [network]: the live clock's quick estimate of sim_time_s
  std::optional<std::uint64_t> bytes_intra, bytes_inter;  // optional, [network]: sent per link tier
  double eval_loss = kAbsent;      // optional: at evaluations
  double eval_accuracy = kAbsent;  // optional
  // Every rank's compute per step since the previous record (forward, backward, optimizer; with a
  // [network], times the rank's straggler slowdown): the median over ranks, the slowest and its rank.
  double step_time_median_s = kAbsent, step_time_max_s = kAbsent;
  std::int64_t slowest_rank = 0;
  double quorum_size = kAbsent;  // optional, elastic: the replicas in the last outer sync's quorum

  // f(name, member, optional) for every field, in file order.
  template <class Self, class F>
  static void visit(Self& r, F&& f) {
    f("step", r.step, false);
    f("epoch", r.epoch, false);
    f("loss", r.loss, false);
    f("lr", r.lr, false);
    f("bytes_sent", r.bytes_sent, false);
    f("bytes_recv", r.bytes_recv, false);
    f("bytes_per_step", r.bytes_per_step, false);
    f("comm_s", r.comm_s, false);
    f("exposed_comm_s", r.exposed_comm_s, false);
    f("compression_ratio", r.compression_ratio, false);
    f("compute_s", r.compute_s, false);
    f("wall_s", r.wall_s, false);
    f("examples_per_s", r.examples_per_s, false);
    f("grad_norm", r.grad_norm, true);
    f("noise_scale", r.noise_scale, true);
    f("sim_time_s", r.sim_time_s, true);
    f("sim_comm_s", r.sim_comm_s, true);
    f("sim_estimate_s", r.sim_estimate_s, true);
    f("bytes_intra", r.bytes_intra, true);
    f("bytes_inter", r.bytes_inter, true);
    f("eval_loss", r.eval_loss, true);
    f("eval_accuracy", r.eval_accuracy, true);
    f("step_time_median_s", r.step_time_median_s, true);
    f("step_time_max_s", r.step_time_max_s, true);
    f("slowest_rank", r.slowest_rank, false);
    f("quorum_size", r.quorum_size, true);
  }
};

// summary.json: the run as a whole (rank 0's view; bytes per rank, cumulative).
struct RunSummary {
  std::int64_t steps = 0;
  double final_loss = kAbsent;     // the last record's loss
  double eval_loss = kAbsent;      // on the test split (null when there is none)
  double eval_accuracy = kAbsent;
  std::uint64_t bytes_sent = 0, bytes_recv = 0;
  double compression_ratio = 1;    // fp32 gradient bytes / payload bytes
  double comm_s = 0, exposed_comm_s = 0, compute_s = 0, wall_s = 0;
  double sim_time_s = kAbsent;     // optional, [network]
  // optional, [network]: the most bytes this rank (rank 0) sent over the inter tier in one window
  // between consecutive metrics records (train.log_every steps), divided by the window's simulated
  // time: the bandwidth the slow link must provision (peak_inter_rate).
  double peak_inter_bytes_per_s = kAbsent;
  // optional, [network]: the inter-tier bytes this rank had sent when the step loop began (the
  // start's broadcast of the parameters, once per process): metrics' bytes_inter minus this is
  // what training itself sent across.
  std::optional<std::uint64_t> bytes_inter_start;
  // optional, [network]: every inter-tier byte this rank sent, the end's drain included (an eager
  // or streaming sync still in flight at the last record counts here, not there).
  std::optional<std::uint64_t> bytes_inter;
  // A run stopped before its last step (framework/train/stop.h): "signal" or "time_limit" ("" =
  // it ran to the end; `steps` is then the steps done), the signal's name; and the checkpoint of
  // the last step done, the run's weights ("" when the run has no checkpoint directory).
  std::string stopped, signal, checkpoint;
  // optional, elastic: xxh64 of the final theta_global (every fragment's anchor, in order: the
  // replicas in step hold the same) and this replica's committed outer syncs.
  std::string theta_global_checksum;
  std::optional<std::uint64_t> elastic_syncs;
  // What this rank (rank 0) holds at the end, in bytes (docs/recipes.md "The run directory"): the
  // parameters, their gradients, the optimizer's state, the sync strategy's (anchors, outer
  // momentum, error feedback: everything its checkpoint holds), its working buffers (a sharded
  // run's shard of weights and gradients), and the process's peak resident memory, which also
  // counts activations, data and communication scratch; beside them, what trainer plan predicted
  // for the five before the run allocated them (its memory check). Absent in older runs.
  std::optional<std::uint64_t> memory_weights, memory_gradients, memory_optimizer, memory_strategy, memory_buffers,
      peak_rss, memory_planned;

  template <class Self, class F>
  static void visit(Self& s, F&& f) {
    f("steps", s.steps, false);
    f("stopped", s.stopped, true);
    f("signal", s.signal, true);
    f("checkpoint", s.checkpoint, true);
    f("final_loss", s.final_loss, false);
    f("eval_loss", s.eval_loss, false);
    f("eval_accuracy", s.eval_accuracy, false);
    f("bytes_sent", s.bytes_sent, false);
    f("bytes_recv", s.bytes_recv, false);
    f("compression_ratio", s.compression_ratio, false);
    f("comm_s", s.comm_s, false);
    f("exposed_comm_s", s.exposed_comm_s, false);
    f("compute_s", s.compute_s, false);
    f("wall_s", s.wall_s, false);
    f("sim_time_s", s.sim_time_s, true);
    f("peak_inter_bytes_per_s", s.peak_inter_bytes_per_s, true);
    f("bytes_inter_start", s.bytes_inter_start, true);
    f("bytes_inter", s.bytes_inter, true);
    f("theta_global_checksum", s.theta_global_checksum, true);
    f("elastic_syncs", s.elastic_syncs, true);
    f("memory_weights", s.memory_weights, true);
    f("memory_gradients", s.memory_gradients, true);
    f("memory_optimizer", s.memory_optimizer, true);
    f("memory_strategy", s.memory_strategy, true);
    f("memory_buffers", s.memory_buffers, true);
    f("peak_rss", s.peak_rss, true);
    f("memory_planned", s.memory_planned, true);
  }
};

// The largest (bytes[k] - bytes[k-1]) / (t[k] - t[k-1]) over consecutive points with t rising
// (bytes cumulative); NaN with fewer than two. The one computation of a peak link rate: from
// records (below) and from the replay's step marks (framework/train/simulate.h).
double peak_rate(std::span<const double> t, std::span<const std::uint64_t> bytes);

// The largest (bytes_inter[k] - bytes_inter[k-1]) / (sim_time_s[k] - sim_time_s[k-1]) over
// consecutive records: the steady state. The first record is only the base: its interval holds
// the run's start, whose broadcast of the parameters crosses the link once. NaN without two
// records with inter-tier bytes and simulated times.
double peak_inter_rate(const std::vector<MetricsRecord>& records);

// One JSON line (no newline); NaN of a required field is written as null.
std::string to_json_line(const MetricsRecord& r);
// summary.json's text (indented, with a final newline).
std::string to_json(const RunSummary& s);
// RUN_DIR/summary.json, written atomically (run_dir.h).
void write_summary(const std::string& run_dir, const RunSummary& s);

// Parsing: `where` names the source in errors ("runs/x/metrics.jsonl:3"). InputError for invalid
// JSON, a record without "step", or a field of the wrong type; absent fields keep their defaults
// (required floats: NaN when absent or null).
MetricsRecord parse_metrics_record(const std::string& line, const std::string& where);
RunSummary parse_summary(const std::string& text, const std::string& where);

// A metrics.jsonl file read back (trainer compare, simulate) is a regular file of at most this
// many bytes: some 2.5 million records of ~400 bytes.
inline constexpr std::uint64_t kMaxMetricsBytes = 1'000'000'000;

// Every record of a metrics.jsonl file (blank lines skipped), InputError naming file:line.
std::vector<MetricsRecord> read_metrics(const std::string& path);

}  // namespace laconic
