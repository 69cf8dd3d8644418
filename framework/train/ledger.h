// The run's ledger: what one rank of a run has counted and measured so far, across resumes. The
// hooks read it (the reporter's records, the checkpointer's entry), the session adds what the
// loop measures, and a checkpoint saves and loads it; nothing calls back into the session.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "collectives/communicator.h"
#include "compression/reducer.h"
#include "core/timer.h"

namespace laconic {

class ElasticGroup;
class ShardReader;
class ShardWriter;
class SyncStrategy;

// The cumulative figures a run reports: this rank's traffic and its reducers' statistics.
struct RunCounters {
  ByteCounters bytes;
  ReducerStats reducer;

  static constexpr std::size_t kValues = 3 + kReducerCounts.size();
  // In the checkpoint entry's order: bytes sent, received, messages sent, then kReducerCounts.
  std::array<std::uint64_t, kValues> values() const;
  static RunCounters from_values(const std::array<std::uint64_t, kValues>& v);
  RunCounters operator+(const RunCounters& o) const;
  RunCounters operator-(const RunCounters& o) const;
};

class RunLedger {
 public:
  // Where this rank's live counts come from: its training communicator, its device communicator
  // (null: none; NCCL counts its own bytes, staging shows `comm`'s), its strategy's reducers and,
  // on rank 0 of an elastic run, the replica group's traffic across replicas (null: not elastic).
  // All outlive the ledger.
  RunLedger(const Communicator& comm, const Communicator* device, const SyncStrategy& sync,
            const ElasticGroup* elastic);

  // The run's totals: a resumed checkpoint's, plus what this process has counted since the loop
  // started (a fresh run: since the process started, the start broadcast included).
  RunCounters totals() const;
  std::int64_t first_step() const { return first_step_; }  // > 0 after a resume
  bool resumed() const { return first_step_ > 0; }

  // The "counters" entry of a checkpoint shard. load() continues from the checkpoint of step
  // `step`: its totals, with this process's counts now as the start (so the resumed process's
  // own start broadcast is not counted twice).
  void save(ShardWriter& w);
  void load(const ShardReader& r, std::int64_t step);

  // What the loop measured on this rank: forward + backward + optimizer, and waiting for
  // communication (what overlap did not hide); the wall clock since start_clock().
  void add_compute(double s) { compute_s_ += s; }
  void add_exposed_comm(double s) { exposed_comm_s_ += s; }
  double compute_s() const { return compute_s_; }
  double exposed_comm_s() const { return exposed_comm_s_; }
  void start_clock() { wall_.reset(); }
  double wall_s() const { return wall_.seconds(); }

 private:
  RunCounters live() const;

  const Communicator& comm_;
  const Communicator* device_;
  const SyncStrategy& sync_;
  const ElasticGroup* elastic_;
  RunCounters resumed_;   // the checkpoint's totals (zero when fresh)
  RunCounters at_start_;  // after a resume: this process's counts when the loop started
  std::int64_t first_step_ = 0;
  double compute_s_ = 0, exposed_comm_s_ = 0;
  Stopwatch wall_;
  std::array<std::int64_t, RunCounters::kValues> entry_{};  // the shard keeps a view until written
};

}  // namespace laconic
