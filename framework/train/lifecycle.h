// What every run does around its ranks' steps, whoever computes them: the trainer's Worker
// (trainer.cpp) and laconic.torch's ExternalRun (external.h) differ only in that. Before any rank
// starts, an elastic replica joins its run, the checkpoint to resume from is found and the
// directories are checked (nothing is written until all of it holds); as each rank starts, rank 0
// writes the run directory's recipe and the banner and the ranks agree on the resume; once every
// rank is done, rank 0 writes summary.json and replays the trace. A new file of the run directory,
// or a new refusal, is one edit here.
#pragma once

#include <memory>
#include <optional>

#include "collectives/communicator.h"
#include "framework/elastic/elastic.h"
#include "framework/train/checkpoint.h"
#include "framework/train/options.h"
#include "framework/train/run_spec.h"
#include "framework/train/stop.h"
#include "framework/train/summary.h"

namespace laconic {

class RunLifecycle {
 public:
  // The checks and the elastic join; SIGTERM, SIGINT and SIGUSR1 stop the run cleanly from here
  // on (TrainOptions::stop_on_signals). Throws InputError before anything is written.
  RunLifecycle(const RunSpec& spec, const TrainOptions& options);
  ~RunLifecycle();
  RunLifecycle(const RunLifecycle&) = delete;
  RunLifecycle& operator=(const RunLifecycle&) = delete;

  // The run's options: a joining elastic replica's resume from the state a member sent it.
  const TrainOptions& options() const { return options_; }
  ElasticGroup* elastic() const { return elastic_.get(); }

  // On every rank as it starts, before its Session: rank 0 writes the run directory's start and
  // the banner (`gemm_threads`: the rank's GEMM threads it names); returns the checkpoint to resume
  // from as the ranks agreed (rank 0's choice). Const: a threads world's ranks call it together.
  std::optional<CheckpointInfo> open_rank(Communicator& comm, Communicator& control, const TrainData& data,
                                          int gemm_threads) const;

  // f(), where a failure of a member dropped from an elastic run is that drop (ReplicaDropped:
  // the process ends with exit 76); a user's mistake stays one.
  template <typename F>
  auto guarded(F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const InputError&) {
      throw;
    } catch (const std::exception&) {
      rethrow_dropped();
      throw;
    }
  }

  // Once every rank is done (the world left): the group left, rank 0's summary.json and replay
  // (which adds the replayed times to `summary`), then the signal handlers restored.
  void close(bool lead, TrainSummary& summary);

 private:
  void rethrow_dropped() const;

  const RunSpec& spec_;
  TrainOptions options_;
  std::unique_ptr<ElasticGroup> elastic_;
  std::optional<CheckpointInfo> resume_;
  std::optional<SignalStop> signals_;
};

}  // namespace laconic
