// Elastic periodic training (framework/elastic) inside a run: the replica group, made and checked
// before anything is written; the data shard each rank of a replica reads; and a step hook that
// connects the group to the run's periodic strategy, sends a joiner the state of the sync that
// admitted it, logs the committed syncs (RUN_DIR/elastic.jsonl) and reports the final anchor.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "collectives/communicator.h"
#include "framework/elastic/elastic.h"
#include "framework/recipe/recipe.h"
#include "framework/train/checkpointer.h"
#include "framework/train/hooks.h"
#include "framework/train/run_spec.h"
#include "framework/train/options.h"

namespace laconic {

// Whether a recipe can run as elastic replicas (InputError naming the key otherwise): one periodic
// strategy without a synchronous warm-up, on the CPU, without a simulated network, and a readable
// elastic.secret_file if it names one. The supervisor checks it before starting anything (a
// script's recipe: this much; the trainer's: with the spec).
void check_elastic_strategy(const Recipe& recipe);
// The same, and one process per replica (the threads backend).
void check_elastic_run(const Recipe& recipe, const RunSpec& spec);

// The replicas' shared secret: the contents of elastic.secret_file (a path as given, relative to
// the working directory; trailing newlines dropped; InputError naming the recipe and the file when
// it cannot be read, is empty or holds more than 4096 bytes), else LACONIC_ELASTIC_SECRET, else ""
// (the store is unauthenticated).
std::string elastic_secret(const Recipe& recipe);

// An elastic replica's group, after checking that the run can be one (before anything is written).
std::unique_ptr<ElasticGroup> make_elastic_group(const Recipe& recipe, const RunSpec& spec, const TrainOptions& opts);

// A replica joining a run in progress (one with a committed sync) resumes from the state a member
// sent it, whatever its own checkpoints hold: `opts` resuming from there. nullopt: the run has
// not synced yet and `opts` stand (`trainer elastic --resume`: each replica from its own).
std::optional<TrainOptions> join_run(ElasticGroup& group, const std::string& checkpoint_root, const TrainOptions& opts);

// The shard of the training data a rank reads: `rank` of `ranks` readers. An elastic replica's
// ranks read their shard of every replica's data: replica i's rank r is rank i * W + r of the
// N * W readers (W = comm.size(), N = replicas); otherwise the world is the run's ranks.
struct DataShard {
  int rank = 0;
  int ranks = 1;
};
DataShard data_shard(const Communicator& comm, const ElasticGroup* group);

// The hook of an elastic replica (null when `group` is null); it runs after the checkpointer,
// whose checkpoints it sends to joiners. The run's strategy must be periodic (make_elastic_group
// checked it).
std::unique_ptr<StepHook> make_elastic_hook(Loop& loop, ElasticGroup* group, Checkpointer& checkpointer);

}  // namespace laconic
