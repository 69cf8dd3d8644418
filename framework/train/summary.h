// What a run returns to its caller (train(), the step hooks' finish()): summary.json's fields
// plus what only a caller in this process needs. Its own header so that the hooks (hooks.h) and
// the loop (trainer.h) both find it without including each other.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/train/metrics.h"

namespace laconic {

// What train() returns: summary.json's fields plus what only a caller in this process needs.
struct TrainSummary : RunSummary {
  std::int64_t first_step = 0;     // where this run started (> 0 after a resume)
  std::int64_t planned_steps = 0;  // what the recipe asked for (steps < planned_steps: it stopped early)
  int stop_signal = 0;             // the signal that stopped it (summary's "signal" names it)
  std::int64_t skipped_steps = 0;  // steps skipped by guards.nonfinite = "skip"
  double baseline_loss = kAbsent;  // the data's unigram loss (language models), for the closing line
  std::vector<MetricsRecord> records;  // what this process wrote to metrics.jsonl (rank 0)
  std::vector<float> final_params;     // rank 0's parameters at the end
};

}  // namespace laconic
