// The lines a run writes to its log (rank 0) at its start and at its end.
#pragma once

#include <iosfwd>
#include <string>

#include "collectives/communicator.h"
#include "framework/train/run_spec.h"
#include "framework/train/summary.h"

namespace laconic {

// The start: the model and the world ("laconic: MODEL, N ranks (BACKEND backend, ALGORITHM
// all-reduce), global batch B, S steps (E epochs)[, GEMM threads per rank T]"), the data, the
// optimizer and its schedule, the unigram baseline (language models), the simulated network
// ([network]), resolve()'s notes and the run directory ("" = none). `comm`: the run's world.
void start_banner(std::ostream& log, const RunSpec& spec, const TrainData& data, const Communicator& comm,
                  int gemm_threads, const std::string& run_dir);

// What the recipe resolved to, appended to recipe.resolved.toml as comments (the keys above stay
// the ones the user wrote, so the file still loads as a recipe).
std::string resolved_comment(const TrainPlan& plan, const TrainData& data);

// The run's closing line: "done: N steps [(resumed at S)] [(K skipped: ...)] in W s [(simulated
// T s)], final loss L[, eval loss E [(D nats below the unigram baseline U)]][, eval accuracy A%],
// sent B per rank[; weights in CHECKPOINT]", bytes in units (61.4 MB); after a line "laconic: held per
// rank: ..." with what the run held (summary.json's memory_*) when the summary has it.
std::string done_line(const TrainSummary& s);

}  // namespace laconic
