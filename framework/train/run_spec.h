// resolve(): everything a recipe implies for a run, settled once before any rank starts and any
// file is written: the plan (steps, global batch, learning rate), the device, whether a network is
// simulated and reductions overlap backward, which optional measurements apply, the recipe hash
// and checkpoint directory. Every cross-field error is raised here as an InputError naming the
// recipe (exit 2); a requested feature that cannot apply is announced in `notes` (printed at start).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "framework/recipe/recipe.h"
#include "framework/recipe/factory.h"
#include "workloads/weights/safetensors.h"

namespace laconic {

// What a recipe resolves to once the data is known.
struct TrainPlan {
  std::int64_t steps = 0;
  std::int64_t global_batch = 0;     // micro_batch * grad_accum * world_size
  std::int64_t steps_per_epoch = 0;  // full global batches per pass over the training set
  std::int64_t parameters = 0;
  double lr = 0;                     // peak learning rate after the scaling rule
  std::int64_t warmup_steps = 0;     // after the scaling rule
  std::string model;                 // Model::describe()
  bool external = false;             // the model, data and inner optimizer are the caller's (external.h)
  // model.init_from's weights, read once per process and checked against the model here; every
  // rank loads them after init (null: no init_from).
  std::shared_ptr<const SafeTensorsFile> init_weights;
};
TrainPlan make_plan(const Recipe& recipe, const TrainData& data);
// The plan of a model trained outside Laconic (external.h): the recipe's train.steps (required:
// there is no dataset to size epochs by), its global batch from train.micro_batch (the caller's
// batch per process), the model's parameters.
TrainPlan make_external_plan(const Recipe& recipe, Model& model);

struct RunSpec {
  Recipe recipe;
  TrainPlan plan;
  // threads or mpi: the recipe's distributed.backend with "auto" settled (resolve_backend). The
  // one place the run's backend is worked out; everything after resolve() reads it here.
  BackendKind backend = BackendKind::threads;
  Device device = Device::cpu;  // where the model, optimizer and sync state live
  bool simulate = false;        // [network] describes groups: the run is traced and replayed on it
  // Gradient buckets are reduced while backward runs (sync.overlap), except when skipping
  // non-finite steps (every rank's verdict is needed before any bucket leaves).
  bool overlap = false;
  // The per-rank alpha-beta clock (SimCommunicator) runs during training as the live estimate of
  // the simulated time: with a [network] and no overlap (it charges in program order, and
  // overlapped reductions would race it). The replay at the end is the figure either way.
  bool live_clock = false;
  bool noise_scale = false;     // train.noise_scale and it can apply (see resolve)
  std::string identity;         // recipe_identity(recipe), kept in checkpoint manifests
  std::string hash;             // recipe_hash(recipe)
  std::string checkpoint_root;  // checkpoint_root(recipe, run_dir)
  std::string trace_dir;        // run_dir/trace when the run is traced (train.trace), else ""
  std::vector<std::string> notes;  // one line each: what was asked for and does not apply
};

// "auto" resolves to mpi when this process was started by an MPI launcher (and MPI is built in),
// else threads. Throws InputError for "mpi" in a build without MPI. Called by resolve() (the
// run's RunSpec::backend, which everything after it reads) and by ProcessRuntime, which must set
// MPI up before the data is loaded and resolve() can run.
BackendKind resolve_backend(const Recipe& recipe);

// The device this recipe trains on. For cuda, checks (InputError naming the recipe) that the build
// has CUDA, that a device is visible, and that the recipe uses nothing that is host-only.
Device resolve_device(const Recipe& recipe);

// `run_dir`: where the run writes ("" = nothing), for the checkpoint directory.
RunSpec resolve(const Recipe& recipe, const TrainData& data, const std::string& run_dir);
// The same for a plan and a backend settled by the caller (an external model's run).
RunSpec resolve(const Recipe& recipe, TrainPlan plan, BackendKind backend, const std::string& run_dir);

// The resolved recipe (to_toml) without what does not change the numbers (the file it came from,
// run name and directory, logging, evaluation and checkpoint intervals, the time limit, replica
// checks, the [fault]); checkpoints carry it and its hash, recipe_hash.
std::string recipe_identity(const Recipe& recipe);
std::string recipe_hash(const Recipe& recipe);
// The checkpoint directory of a run: recipe.checkpoint.dir, under run_dir when relative; "" (no
// checkpoints) when it is relative and there is no run directory.
std::string checkpoint_root(const Recipe& recipe, const std::string& run_dir);

}  // namespace laconic
