// Which checkpoint a run continues from (TrainOptions::resume), settled before anything is written.
#pragma once

#include <optional>
#include <string>

#include "collectives/communicator.h"
#include "framework/train/checkpoint.h"
#include "framework/train/run_spec.h"
#include "framework/train/options.h"

namespace laconic {

// The checkpoint `opts.resume` names, checked against this run (nullopt: start fresh). Everything
// that would refuse it is found here, before anything is written: another world size, another
// recipe (naming the keys), a damaged checkpoint (every shard verified), a run already finished.
std::optional<CheckpointInfo> resolve_resume(const RunSpec& spec, const TrainOptions& opts, const std::string& root);

// `--resume auto` is resolved by every process on its own view of the checkpoint directory; under
// MPI those views can differ (a node-local disk, a commit racing the listing). Rank 0's choice
// wins: it broadcasts the step (-1: start fresh) and every rank reads that checkpoint, which then
// fails loudly on a rank that cannot see it instead of silently resuming elsewhere.
std::optional<CheckpointInfo> agree_on_resume(Communicator& comm, const TrainOptions& opts,
                                              const std::optional<CheckpointInfo>& mine, const std::string& root);

}  // namespace laconic
