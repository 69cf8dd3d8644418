#include "framework/train/lifecycle.h"

#include "framework/train/banner.h"
#include "framework/train/elastic_hook.h"
#include "framework/train/metrics.h"
#include "framework/train/resume.h"
#include "framework/train/run_dir.h"
#include "framework/train/simulate.h"

namespace laconic {

RunLifecycle::RunLifecycle(const RunSpec& spec, const TrainOptions& options) : spec_(spec), options_(options) {
  const std::string& root = spec.checkpoint_root;
  // An elastic replica joining a run in progress resumes from the state a member sent it.
  if (options.elastic.replicas > 0) {
    elastic_ = make_elastic_group(spec.recipe, spec, options);
    if (std::optional<TrainOptions> joined = join_run(*elastic_, root, options)) options_ = std::move(*joined);
  }
  resume_ = resolve_resume(spec, options_, root);
  // An unusable directory is bad input: found before anything else is written (every run with a
  // directory checkpoints its last step).
  if (!options_.run_dir.empty()) check_writable_directory(options_.run_dir, "run directory");
  if (!root.empty()) check_writable_directory(root, "checkpoint directory (checkpoint.dir)");
  if (options_.stop_on_signals) signals_.emplace();
}

RunLifecycle::~RunLifecycle() = default;

std::optional<CheckpointInfo> RunLifecycle::open_rank(Communicator& comm, Communicator& control, const TrainData& data,
                                                      int gemm_threads) const {
  const bool lead = comm.rank() == 0;  // rank 0 alone writes the run directory and the log
  if (lead && !options_.run_dir.empty()) {
    make_directories(options_.run_dir);
    write_file_atomic(options_.run_dir + "/recipe.resolved.toml", to_toml(spec_.recipe) + resolved_comment(spec_.plan, data));
  }
  if (lead && options_.log) start_banner(*options_.log, spec_, data, comm, gemm_threads, options_.run_dir);
  return agree_on_resume(control, options_, resume_, spec_.checkpoint_root);
}

void RunLifecycle::rethrow_dropped() const {
  if (elastic_ && !elastic_->dropped().empty()) throw ReplicaDropped(elastic_->dropped());
}

void RunLifecycle::close(bool lead, TrainSummary& summary) {
  elastic_.reset();
  if (lead) {
    if (!options_.run_dir.empty()) write_summary(options_.run_dir, summary);
    replay_after_run(spec_, options_.run_dir, options_.log, summary);
  }
  signals_.reset();
}

}  // namespace laconic
