// What a caller asks of one run besides its recipe: where it writes, what it logs, how it resumes,
// extra step hooks, signals, elastic membership. Its own header so that the hooks (hooks.cpp) and
// the loop (trainer.h) both see it without including each other.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <string>
#include <vector>

#include "core/params.h"
#include "framework/train/hook_factory.h"

namespace laconic {

struct EvalResult {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();  // NaN: not measured
};

struct TrainOptions {
  std::string run_dir;          // where to write the run's files; "" = write nothing
  std::ostream* log = nullptr;  // rank 0's log lines; null = silent
  bool progress_line = false;   // a live progress line (when log is a terminal)
  // Called on every rank after every optimizer step (tests observe replicas through it). With
  // device = "cuda" the store's spans are device memory.
  std::function<void(int rank, std::int64_t step, const ParamStore&)> on_step;
  // Called on rank 0 with each metrics record, the JSON line metrics.jsonl gets (laconic.torch's
  // TensorBoard writer), as it is written.
  std::function<void(const std::string& json_line)> on_record;
  // Continue from a checkpoint: "" = start fresh, "auto" = the newest complete checkpoint under
  // the recipe's checkpoint directory (fresh when there is none), else a checkpoint directory.
  std::string resume;
  // Resume even when the resolved recipe differs from the checkpoint's (the state is loaded as
  // saved and training continues under the new recipe; not bit-exact with any single run).
  // A different world size is always refused: every rank's state is its own.
  bool resume_any_recipe = false;
  // Extra step hooks, made on every rank and run before the built-in ones (fault injection:
  // framework/train/faults.h; tests observing or breaking the loop).
  std::vector<HookFactory> hooks;
  // The run's evaluation when the caller computes it (laconic.torch's eval_fn), on rank 0 at
  // train.eval_every and after the last step; unset: the data's eval split, if any.
  std::function<EvalResult()> evaluate;
  // SIGTERM, SIGINT and SIGUSR1 stop the run cleanly at the ranks' next agreed step, with a
  // checkpoint (framework/train/stop.h; the signal handlers are installed for the run's duration).
  // The trainer's command line sets it; a library caller decides.
  bool stop_on_signals = false;
  // The ranks agree on stopping after every step instead of StopAgreement's interval (an exact
  // stop step, at an all-reduce per step).
  bool agree_every_step = false;
  // Elastic periodic training (framework/elastic, `trainer elastic`): this process is replica
  // `replica` of `replicas` (its shard of the data), meeting the others through the store `store`
  // ("file:DIR" or "redis:HOST:PORT") at every outer sync. replicas = 0: not elastic.
  struct Elastic {
    int replica = 0;
    int replicas = 0;
    std::string store;
  } elastic;
};

}  // namespace laconic
